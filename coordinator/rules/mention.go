package rules

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// maxMentionLen is the longest name a mention can carry: a participant id
// is at most 128 characters, so anything longer names nobody.
const maxMentionLen = 128

// IsReservedMention reports whether name (lower-case, without the prefix) is
// a group mention people type out of habit: @all, @everyone or @here. The
// coordinator does not fan out on them (that is what invited_auto and
// broadcast are for); it answers with a clarification instead.
func IsReservedMention(name string) bool {
	switch name {
	case "all", "everyone", "here":
		return true
	}
	return false
}

// ParseMentions returns the names mentioned in text with the given prefix:
// lower-cased, in order of first appearance, without duplicates. A mention is
// the prefix followed by [A-Za-z0-9][A-Za-z0-9._@:-]*, with trailing
// punctuation (. : - @) stripped. The prefix counts only at the start of the
// text or after a character that is not a letter, digit or underscore, so an
// e-mail address is not a mention. Nothing inside an inline code span or a
// fenced code block counts: people quote commands and logs there. An empty
// prefix means config.DefaultMentionPrefix.
func ParseMentions(text, prefix string) []string {
	if prefix == "" {
		prefix = config.DefaultMentionPrefix
	}
	var names []string
	seen := make(map[string]bool)
	for i := 0; i < len(text); {
		if text[i] == '`' {
			i = skipCode(text, i)
			continue
		}
		if !strings.HasPrefix(text[i:], prefix) || !mentionBoundary(text[:i]) {
			i++
			continue
		}
		start := i + len(prefix)
		end := start
		for end < len(text) && nameByte(text[end], end == start) {
			end++
		}
		if end == start {
			i++
			continue
		}
		name := strings.ToLower(strings.TrimRight(text[start:end], ".:-@"))
		if name != "" && len(name) <= maxMentionLen && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
		i = end
	}
	return names
}

// skipCode returns the index just past the code span or fence that opens
// with the backtick run at i. A run closes at the next run of exactly the
// same length (CommonMark's rule for code spans, which also covers fenced
// blocks). An unclosed run of three or more is an open fence, which runs to
// the end of the text; an unclosed shorter run is a literal backtick.
func skipCode(text string, i int) int {
	n := 0
	for i+n < len(text) && text[i+n] == '`' {
		n++
	}
	for j := i + n; j < len(text); {
		if text[j] != '`' {
			j++
			continue
		}
		m := 0
		for j+m < len(text) && text[j+m] == '`' {
			m++
		}
		if m == n {
			return j + m
		}
		j += m
	}
	if n >= 3 {
		return len(text)
	}
	return i + n
}

// mentionBoundary reports whether a mention may start after before: at the
// start of the text or after a character that cannot be part of a word.
func mentionBoundary(before string) bool {
	if before == "" {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(before)
	return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_')
}

// nameByte reports whether b may appear in a mentioned name; the first byte
// must be a letter or digit, as in a participant id.
func nameByte(b byte, first bool) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	case first:
		return false
	}
	return b == '.' || b == '_' || b == '@' || b == ':' || b == '-'
}
