package rules

import (
	"slices"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

func TestParseMentions(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		prefix string
		want   []string
	}{
		{"none", "hello there", "@", nil},
		{"one", "hello @codex", "@", []string{"codex"}},
		{"at start", "@codex hi", "@", []string{"codex"}},
		{"lower-cased", "@Codex and @CLAUDE", "@", []string{"codex", "claude"}},
		{"order kept", "@b then @a then @c", "@", []string{"b", "a", "c"}},
		{"deduplicated case-insensitively", "@codex @Codex @CODEX", "@", []string{"codex"}},
		{"trailing period", "ask @codex.", "@", []string{"codex"}},
		{"trailing comma", "@codex, @claude; ok", "@", []string{"codex", "claude"}},
		{"trailing colon", "@codex: please", "@", []string{"codex"}},
		{"trailing question and exclamation", "@codex? @claude!", "@", []string{"codex", "claude"}},
		{"closing paren", "(cc @codex)", "@", []string{"codex"}},
		{"trailing dots and dashes", "@codex... @claude--", "@", []string{"codex", "claude"}},
		{"inner punctuation kept", "@gpt-5.2-codex and @a.b_c:d", "@", []string{"gpt-5.2-codex", "a.b_c:d"}},
		{"apostrophe ends the name", "@codex's idea", "@", []string{"codex"}},
		{"email is not a mention", "write to a@b.com", "@", nil},
		{"word before prefix", "foo@codex", "@", nil},
		{"underscore before prefix", "x_@codex", "@", nil},
		{"non-ASCII letter before prefix", "é@codex", "@", nil},
		{"punctuation before prefix", "(@codex) [@claude]", "@", []string{"codex", "claude"}},
		{"double prefix", "@@codex", "@", []string{"codex"}},
		{"bare prefix", "@ codex @", "@", nil},
		{"prefix then punctuation", "@-codex @.x", "@", nil},
		{"newline separated", "hi\n@codex\n@claude", "@", []string{"codex", "claude"}},
		{"inline code ignored", "run `@codex` now @claude", "@", []string{"claude"}},
		{"double backtick span", "``a ` @codex`` @claude", "@", []string{"claude"}},
		{"fenced block ignored", "before @a\n```\n@codex\n```\nafter @b", "@", []string{"a", "b"}},
		{"fenced block with language", "```go\n// @codex\n```", "@", nil},
		{"unclosed fence swallows the rest", "@a\n```\n@codex", "@", []string{"a"}},
		{"unclosed single backtick is literal", "it`s @codex", "@", []string{"codex"}},
		{"longer run does not close a shorter one", "`a `` @codex` @claude", "@", []string{"claude"}},
		{"reserved names are still parsed", "@all @here @everyone", "@", []string{"all", "here", "everyone"}},
		{"custom prefix", "hey +codex and @claude", "+", []string{"codex"}},
		{"multi-char prefix", "hey >>codex", ">>", []string{"codex"}},
		{"empty prefix means @", "hey @codex", "", []string{"codex"}},
		{"too long", "@" + strings.Repeat("a", 129), "@", nil},
		{"longest id", "@" + strings.Repeat("a", 128), "@", []string{strings.Repeat("a", 128)}},
		{"id with @", "@bot@host", "@", []string{"bot@host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseMentions(tt.text, tt.prefix)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("ParseMentions(%q, %q) = %q, want %q", tt.text, tt.prefix, got, tt.want)
			}
		})
	}
}

func TestIsReservedMention(t *testing.T) {
	for _, name := range []string{"all", "everyone", "here"} {
		if !IsReservedMention(name) {
			t.Errorf("IsReservedMention(%q) = false, want true", name)
		}
	}
	for _, name := range []string{"codex", "alls", "user", ""} {
		if IsReservedMention(name) {
			t.Errorf("IsReservedMention(%q) = true, want false", name)
		}
	}
}

// FuzzParseMentions checks the parser's invariants on arbitrary text:
// it never panics, every name is a lower-case valid participant id without
// trailing punctuation that appears after the prefix in the text, no name
// repeats, and nothing inside a code span or a fenced block counts.
func FuzzParseMentions(f *testing.F) {
	for _, s := range []string{
		"hello @codex", "@a @b @a", "a@b.com", "`@x` @y", "```\n@x\n```\n@y",
		"@codex... and @claude!", "``@x`` `@y", "@@@", "@é @ü", "`", "```", "@-",
		"@gpt-5.2-codex:", "x\n```go\n@a\n", "(@all)",
	} {
		f.Add(s, "@")
	}
	f.Add("+codex @claude", "+")
	f.Add("hey >>a >>b", ">>")
	f.Fuzz(func(t *testing.T, text, prefix string) {
		if config.ValidMentionPrefix(prefix) != nil {
			prefix = "@"
		}
		names := ParseMentions(text, prefix)
		seen := map[string]bool{}
		lower := strings.ToLower(text)
		for _, n := range names {
			if n != strings.ToLower(n) {
				t.Fatalf("name %q is not lower-case", n)
			}
			if !agentbridge.ParticipantIDPattern.MatchString(n) {
				t.Fatalf("name %q is not a valid participant id", n)
			}
			if strings.ContainsAny(n[len(n)-1:], ".:-@") {
				t.Fatalf("name %q keeps trailing punctuation", n)
			}
			if seen[n] {
				t.Fatalf("name %q repeated in %q", n, names)
			}
			seen[n] = true
			if !strings.Contains(lower, strings.ToLower(prefix)+n) {
				t.Fatalf("name %q does not appear after the prefix in %q", n, text)
			}
		}
		inner := strings.ReplaceAll(text, "`", "")
		if got := ParseMentions("`"+inner+"`", prefix); len(got) != 0 {
			t.Fatalf("mentions inside an inline code span counted: %q", got)
		}
		if got := ParseMentions("```\n"+inner+"\n```", prefix); len(got) != 0 {
			t.Fatalf("mentions inside a fenced block counted: %q", got)
		}
		if got := ParseMentions("before\n```\n"+inner+"\n```\nafter", prefix); len(got) != 0 {
			t.Fatalf("mentions inside a fenced block counted: %q", got)
		}
	})
}

func BenchmarkParseMentions(b *testing.B) {
	text := strings.Repeat("Some prose with an email a@b.com, `@code` and @codex, then @claude-2. ", 20) +
		"```\n@fenced\n```\n@end"
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		ParseMentions(text, "@")
	}
}

// FuzzMayMention: every name the mention parser finds, with any valid
// prefix, is one the bridge's claim check takes for a possible mention
// (agentbridge.MayMention), so that the bridge never refuses a claim the
// rules made (contract 8.3).
func FuzzMayMention(f *testing.F) {
	for _, s := range []string{"@codex hi", "hey !Claude-1. and +x", "a@b.c @@all", "`@x` @y:", "@é @a.b.c- @Ω"} {
		f.Add(s, "@")
		f.Add(s, "!")
		f.Add(s, "+:")
	}
	f.Fuzz(func(t *testing.T, text, prefix string) {
		if config.ValidMentionPrefix(prefix) != nil {
			return
		}
		for _, name := range ParseMentions(text, prefix) {
			if !agentbridge.MayMention(text, name) {
				t.Fatalf("ParseMentions(%q, %q) finds %q, which MayMention does not", text, prefix, name)
			}
		}
	})
}
