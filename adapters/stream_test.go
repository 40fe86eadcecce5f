package adapters_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-bridge/agent-bridge/adapters"
)

func convertFixture(t *testing.T, format, name string) (adapters.StreamOutcome, []adapters.ProgressRecord) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "cli", format, name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []adapters.ProgressRecord
	out, err := adapters.ConvertStream(format, bytes.NewReader(b), func(r adapters.ProgressRecord) {
		// Every record must be a valid progress line.
		line, err := json.Marshal(r)
		if err != nil || len(line) > adapters.MaxProgressLine {
			t.Errorf("record %+v does not fit a progress line (%d bytes, %v)", r, len(line), err)
		}
		if _, err := adapters.ParseProgress(line); err != nil {
			t.Errorf("record %s does not parse: %v", line, err)
		}
		recs = append(recs, r)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, recs
}

// statuses joins the records as "kind:status" lines, for comparing.
func statuses(recs []adapters.ProgressRecord) string {
	var b strings.Builder
	for _, r := range recs {
		b.WriteString(r.Kind + ": " + r.Status + "\n")
	}
	return b.String()
}

func TestConvertStream(t *testing.T) {
	const claudeSession = "5b6f0a3e-0c1d-4a57-9a0e-2f1f6c7b9d10"
	const codexSession = "0199a213-81c0-7800-8aa1-bbab2a035a53"
	for _, tc := range []struct {
		format, name string
		reply        string
		failed       string
		usage        adapters.Usage
		bad          int
		records      string
	}{
		{format: "claude", name: "normal",
			reply: "The test fails because Count subtracts one.\nRemove the `- 1` in parse.go and it passes.",
			usage: adapters.Usage{InputTokens: 13450, OutputTokens: 120, CostUSD: 0.0231},
			records: `session: session ` + claudeSession + ` (claude-sonnet-4-5)
thinking: thinking
usage: 4200 tokens in, 40 out
tool: Bash: go test ./...
usage: 4200 tokens in, 60 out
tool_result: tool done
tool: Read: /work/project/parse.go
usage: 8900 tokens in, 85 out
tool_result: tool done
text: The test fails because Count subtracts one.
usage: 13450 tokens in, 120 out
usage: done: 13450 tokens in, 120 out, $0.0231
`},
		{format: "claude", name: "failed", failed: "API Error: 529 overloaded",
			usage: adapters.Usage{InputTokens: 900, OutputTokens: 20, CostUSD: 0.004},
			records: `session: session ` + claudeSession + ` (claude-sonnet-4-5)
tool: Bash: make deploy
usage: 900 tokens in, 20 out
tool_result: tool failed: make: *** No rule to make target 'deploy'.  Stop.
error: failed: API Error: 529 overloaded
`},
		{format: "claude", name: "unknown", reply: "All three files are formatted.", bad: 1,
			usage: adapters.Usage{InputTokens: 400, OutputTokens: 12, CostUSD: 0.0012},
			records: `session: session ` + claudeSession + ` (claude-sonnet-4-5)
other: rate_limit_event
text: All three files are formatted.
usage: 400 tokens in, 12 out
usage: done: 400 tokens in, 12 out, $0.0012
`},
		{format: "codex", name: "normal", reply: "Fixed: Count no longer subtracts one; the tests pass.",
			usage: adapters.Usage{InputTokens: 24763, OutputTokens: 122},
			records: `session: session ` + codexSession + `
turn: working
thinking: thinking
tool: $ bash -lc 'go test ./...'
tool_result: $ bash -lc 'go test ./...' → exit 1
tool: edit: update /work/project/parse.go
tool_result: edit: update /work/project/parse.go
plan: plan: 2 items
text: Fixed: Count no longer subtracts one; the tests pass.
usage: done: 24763 tokens in, 122 out
`},
		{format: "codex", name: "failed", failed: "stream disconnected before completion: rate limit reached",
			records: `session: session ` + codexSession + `
turn: working
tool: $ bash -lc 'make deploy'
tool_result: $ bash -lc 'make deploy' → exit 2
error: failed: stream disconnected before completion: rate limit reached
error: failed: stream disconnected before completion: rate limit reached
`},
		{format: "codex", name: "unknown", reply: "Done; nothing needed changing.", bad: 1,
			usage: adapters.Usage{InputTokens: 5000, OutputTokens: 30},
			records: `session: session ` + codexSession + `
other: session.configured
turn: working
other: hologram
text: Done; nothing needed changing.
usage: done: 5000 tokens in, 30 out
`},
	} {
		t.Run(tc.format+"/"+tc.name, func(t *testing.T) {
			out, recs := convertFixture(t, tc.format, tc.name)
			if got := statuses(recs); got != tc.records {
				t.Errorf("records:\n%s\nwant:\n%s", got, tc.records)
			}
			if out.Reply != tc.reply && tc.failed == "" {
				t.Errorf("reply %q, want %q", out.Reply, tc.reply)
			}
			if out.Failed != (tc.failed != "") || out.Error != tc.failed {
				t.Errorf("failed %v %q, want %q", out.Failed, out.Error, tc.failed)
			}
			if !out.Started || out.Session == "" || out.Bad != tc.bad {
				t.Errorf("started %v session %q bad %d", out.Started, out.Session, out.Bad)
			}
			if tc.usage != (adapters.Usage{}) && (out.Usage == nil || *out.Usage != tc.usage) {
				t.Errorf("usage %+v, want %+v", out.Usage, tc.usage)
			}
			if s := recs[0].Session; s != out.Session {
				t.Errorf("first record's session %q, want %q", s, out.Session)
			}
		})
	}
}

func TestConvertStreamEdges(t *testing.T) {
	// No events at all: failed, never started (a rejected resume).
	for _, f := range []string{adapters.StreamClaude, adapters.StreamCodex} {
		out, err := adapters.ConvertStream(f, strings.NewReader(""), nil)
		if err != nil || !out.Failed || out.Started {
			t.Errorf("%s, empty stream: %+v %v", f, out, err)
		}
	}
	if _, err := adapters.ConvertStream("gemini", strings.NewReader(""), nil); err == nil {
		t.Error("an unknown format was accepted")
	}
	// A line beyond the cap is skipped; the stream goes on.
	huge := `{"type":"user","message":{"content":"` + strings.Repeat("x", 33<<20) + `"}}` + "\n"
	in := huge + `{"type":"thread.started","thread_id":"t"}` + "\n" + `{"type":"turn.completed","usage":{}}`
	out, err := adapters.ConvertStream(adapters.StreamCodex, strings.NewReader(in), nil)
	if err != nil || out.Bad != 1 || out.Lines != 3 || out.Failed || out.Session != "t" {
		t.Errorf("huge line: %+v %v", out, err)
	}
	// A long tool argument and text are clipped in the record.
	long := strings.Repeat("é", 5000)
	in = `{"type":"assistant","session_id":"s","message":{"id":"m","content":[{"type":"tool_use","name":"Bash","input":{"command":"` + long + `"}},{"type":"text","text":"` + long + `"}]}}`
	var recs []adapters.ProgressRecord
	if _, err := adapters.ConvertStream(adapters.StreamClaude, strings.NewReader(in), func(r adapters.ProgressRecord) { recs = append(recs, r) }); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		b, _ := json.Marshal(r)
		if len(b) > 4<<10 {
			t.Errorf("record of %d bytes: %.80s…", len(b), b)
		}
	}
}

func FuzzConvertStream(f *testing.F) {
	for _, format := range []string{"claude", "codex"} {
		for _, name := range []string{"normal", "failed", "unknown"} {
			b, err := os.ReadFile(filepath.Join("testdata", "cli", format, name+".jsonl"))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(format == "claude", b)
		}
	}
	f.Add(true, []byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","input":null}]}}`))
	f.Add(false, []byte(`{"type":"item.completed","item":{"type":"command_execution","exit_code":"x"}}`))
	f.Fuzz(func(t *testing.T, claude bool, in []byte) {
		format := adapters.StreamCodex
		if claude {
			format = adapters.StreamClaude
		}
		out, err := adapters.ConvertStream(format, bytes.NewReader(in), func(r adapters.ProgressRecord) {
			line, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("marshal %+v: %v", r, err)
			}
			if _, err := adapters.ParseProgress(line); err != nil {
				t.Fatalf("record %s is not a progress line: %v", line, err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if out.Bad > out.Lines || (out.Failed && out.Error == "") {
			t.Fatalf("outcome %+v", out)
		}
	})
}
