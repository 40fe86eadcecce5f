package adapters_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
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
	out, err := convertStream(format, bytes.NewReader(b), func(r adapters.ProgressRecord) {
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

// fakePort matches the fake model server's address in recorded messages.
var fakePort = regexp.MustCompile(`127\.0\.0\.1:\d+`)

func TestConvertStream(t *testing.T) {
	for _, tc := range []struct {
		format, name string
		reply        string
		failed       string
		usage        adapters.Usage
		bad          int
		records      string
	}{
		// normal and failed were recorded from the pinned CLIs
		// (testdata/cli/README.md); SESSION stands for their session id,
		// PORT for the fake model server's port.
		{format: "claude", name: "normal",
			reply: "The test fails because Count subtracts one.\nRemove the `- 1` in parse.go and it passes.",
			usage: adapters.Usage{InputTokens: 3600, OutputTokens: 102, CostUSD: 0.01644},
			records: `session: started (claude-opus-5-5)
other: system: thinking_tokens
thinking: thinking
usage: 1200 tokens in
tool: Bash: grep -n 'n - 1' parse.go
tool_result: tool done
tool: Read: /tmp/agent-bridge-fixtures/project/parse.go
usage: 2400 tokens in
tool_result: tool done
text: The test fails because Count subtracts one.
usage: 3600 tokens in
usage: done: 3600 tokens in, 102 out, $0.0164
`},
		{format: "claude", name: "failed", failed: "API Error: 529 overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:PORT).",
			usage: adapters.Usage{InputTokens: 1200, OutputTokens: 34, CostUSD: 0.00548},
			records: `session: started (claude-opus-5-5)
tool: Bash: make deploy
usage: 1200 tokens in
tool_result: tool failed: Exit code 2
text: API Error: 529 overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, chec…
error: failed: API Error: 529 overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persis…
`},
		{format: "claude", name: "unknown", reply: "All three files are formatted.", bad: 1,
			usage: adapters.Usage{InputTokens: 400, OutputTokens: 12, CostUSD: 0.0012},
			records: `session: started (claude-sonnet-4-5)
other: rate_limit_event
text: All three files are formatted.
usage: 400 tokens in
usage: done: 400 tokens in, 12 out, $0.0012
`},
		{format: "codex", name: "normal", reply: "Fixed: Count no longer subtracts one; the tests pass.",
			usage: adapters.Usage{InputTokens: 2400, OutputTokens: 68},
			records: `session: started
warning: warning: Model metadata for ` + "`gpt-5.1-codex`" + ` not found. Defaulting to fallback metadata; this can degrade performance an…
turn: working
thinking: thinking
tool: $ /bin/bash -lc "grep -n 'n - 1' parse.go"
tool_result: $ /bin/bash -lc "grep -n 'n - 1' parse.go" → exit 0
text: Fixed: Count no longer subtracts one; the tests pass.
usage: done: 2400 tokens in, 68 out
`},
		{format: "codex", name: "failed", failed: "exceeded retry limit, last status: 429 Too Many Requests",
			records: `session: started
warning: warning: Model metadata for ` + "`gpt-5.1-codex`" + ` not found. Defaulting to fallback metadata; this can degrade performance an…
turn: working
tool: $ /bin/bash -lc 'make deploy'
tool_result: $ /bin/bash -lc 'make deploy' → exit 2
error: failed: exceeded retry limit, last status: 429 Too Many Requests
error: failed: exceeded retry limit, last status: 429 Too Many Requests
`},
		{format: "codex", name: "unknown", reply: "Done; nothing needed changing.", bad: 1,
			usage: adapters.Usage{InputTokens: 5000, OutputTokens: 30},
			records: `session: started
other: session.configured
turn: working
other: hologram
text: Done; nothing needed changing.
usage: done: 5000 tokens in, 30 out
`},
	} {
		t.Run(tc.format+"/"+tc.name, func(t *testing.T) {
			out, recs := convertFixture(t, tc.format, tc.name)
			// What differs between recordings: the session and the
			// fake server's port.
			norm := func(s string) string {
				if out.Session != "" {
					s = strings.ReplaceAll(s, out.Session, "SESSION")
				}
				return fakePort.ReplaceAllString(s, "127.0.0.1:PORT")
			}
			want := tc.records
			if tc.name == "unknown" {
				norm = func(s string) string { return s }
			}
			if got := norm(statuses(recs)); got != want {
				t.Errorf("records:\n%s\nwant:\n%s", got, want)
			}
			if out.Reply != tc.reply && tc.failed == "" {
				t.Errorf("reply %q, want %q", out.Reply, tc.reply)
			}
			if out.Failed != (tc.failed != "") || norm(out.Error) != tc.failed {
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
			// The session's id is in the record, never in a status: a
			// status is what a person reads while the agent thinks.
			if strings.Contains(statuses(recs), out.Session) {
				t.Errorf("a status shows the session id %s:\n%s", out.Session, statuses(recs))
			}
		})
	}
}

func TestConvertStreamEdges(t *testing.T) {
	// No events at all: failed, never started (a rejected resume).
	for _, f := range []string{adapters.StreamClaude, adapters.StreamCodex} {
		out, err := convertStream(f, strings.NewReader(""), nil)
		if err != nil || !out.Failed || out.Started {
			t.Errorf("%s, empty stream: %+v %v", f, out, err)
		}
	}
	if _, err := convertStream("gemini", strings.NewReader(""), nil); err == nil {
		t.Error("an unknown format was accepted")
	}
	// A line beyond the cap is skipped; the stream goes on.
	huge := `{"type":"user","message":{"content":"` + strings.Repeat("x", 33<<20) + `"}}` + "\n"
	in := huge + `{"type":"thread.started","thread_id":"t"}` + "\n" + `{"type":"turn.completed","usage":{}}`
	out, err := convertStream(adapters.StreamCodex, strings.NewReader(in), nil)
	if err != nil || out.Bad != 1 || out.Lines != 3 || out.Failed || out.Session != "t" {
		t.Errorf("huge line: %+v %v", out, err)
	}
	// A long tool argument and text are clipped in the record.
	long := strings.Repeat("é", 5000)
	in = `{"type":"assistant","session_id":"s","message":{"id":"m","content":[{"type":"tool_use","name":"Bash","input":{"command":"` + long + `"}},{"type":"text","text":"` + long + `"}]}}`
	var recs []adapters.ProgressRecord
	if _, err := convertStream(adapters.StreamClaude, strings.NewReader(in), func(r adapters.ProgressRecord) { recs = append(recs, r) }); err != nil {
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
		out, err := convertStream(format, bytes.NewReader(in), func(r adapters.ProgressRecord) {
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

// recordedRecords runs a fixture recorded from the pinned CLI (see
// testdata/cli/README.md) and returns the outcome and the records' lines.
func recordedRecords(t *testing.T, format, name string, opts adapters.StreamOptions) (adapters.StreamOutcome, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "cli", format, name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []adapters.ProgressRecord
	out, err := adapters.ConvertStreamWith(format, bytes.NewReader(b), func(r adapters.ProgressRecord) { recs = append(recs, r) }, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out, statuses(recs)
}

// Three turns of one claude session, as claude 2.1.328 printed them: each
// run books its own usage and cost, never the session's running total
// (total_cost_usd), so equal turns cost the same (defect 2 of issue 19).
func TestConvertClaudeResumedRunsBookTheirOwnCost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply string
		usage adapters.Usage
	}{
		{"turn1", "turn one answer", adapters.Usage{InputTokens: 1200, OutputTokens: 34, CostUSD: 0.00548}},
		{"turn2-resumed-bash", "turn two answer", adapters.Usage{InputTokens: 2400, OutputTokens: 68, CostUSD: 0.01096}},
		{"turn3-resumed", "turn three", adapters.Usage{InputTokens: 1200, OutputTokens: 34, CostUSD: 0.00548}},
	} {
		out, recs := recordedRecords(t, "claude", tc.name, adapters.StreamOptions{})
		if out.Failed || out.Reply != tc.reply || !out.Started || out.Usage == nil {
			t.Fatalf("%s: %+v", tc.name, out)
		}
		if u := *out.Usage; u.InputTokens != tc.usage.InputTokens || u.OutputTokens != tc.usage.OutputTokens || math.Abs(u.CostUSD-tc.usage.CostUSD) > 1e-9 {
			t.Errorf("%s: usage %+v, want %+v", tc.name, u, tc.usage)
		}
		// The assistant event's placeholder output_tokens (1) is not
		// reported as the run's output (defect 6).
		if strings.Contains(recs, ", 1 out") {
			t.Errorf("%s: a placeholder output count was reported:\n%s", tc.name, recs)
		}
	}
	_, recs := recordedRecords(t, "claude", "turn2-resumed-bash", adapters.StreamOptions{})
	if !strings.Contains(recs, "tool: Bash: echo hi-from-bash\n") || !strings.Contains(recs, "tool_result: tool done\n") {
		t.Errorf("records:\n%s", recs)
	}
}

// claude --resume of a session it does not have prints one failed result
// carrying the dead id: the run never started, so the adapter starts a
// fresh session (defects 1 and 6).
func TestConvertClaudeLostSession(t *testing.T) {
	out, recs := recordedRecords(t, "claude", "lost-session", adapters.StreamOptions{})
	if !out.Failed || out.Started || out.Session != "" {
		t.Errorf("outcome %+v: want failed, not started, no session", out)
	}
	if want := "No conversation found with session ID: 11111111-2222-3333-4444-555555555555"; out.Error != want {
		t.Errorf("error %q, want %q", out.Error, want)
	}
	if strings.Contains(recs, "session:") {
		t.Errorf("the dead session was reported:\n%s", recs)
	}
}

// A bad key: claude's retries show as progress with the status and the
// attempt, and the failure carries claude's reason (defect 5).
func TestConvertClaudeRetriesAndBadKey(t *testing.T) {
	out, recs := recordedRecords(t, "claude", "bad-key", adapters.StreamOptions{})
	if !out.Failed || out.Error != "Invalid API key · Fix external API key" {
		t.Errorf("outcome %+v", out)
	}
	for _, want := range []string{"retry: retrying after 401 (attempt 2 of 3)\n", "retry: retrying after 401 (attempt 3 of 3)\n"} {
		if !strings.Contains(recs, want) {
			t.Errorf("records lack %q:\n%s", want, recs)
		}
	}
}

// codex reports a resumed thread's usage from the thread's start: with the
// previous run's total as baseline, the run books its own (defect 3). Its
// warning item for a model it has no metadata for is no error (defect 6).
func TestConvertCodexResumedRunBooksItsOwnUsage(t *testing.T) {
	first, recs := recordedRecords(t, "codex", "turn1", adapters.StreamOptions{})
	if first.Failed || first.Reply != "turn one answer" || first.Usage == nil || *first.Usage != (adapters.Usage{InputTokens: 1200, OutputTokens: 34}) {
		t.Fatalf("turn 1: %+v", first)
	}
	if strings.Contains(recs, "error:") || !strings.Contains(recs, "warning: warning: Model metadata for `gpt-5.1-codex` not found.") {
		t.Errorf("turn 1 records:\n%s", recs)
	}
	if first.SessionTotal == nil || *first.SessionTotal != *first.Usage {
		t.Fatalf("turn 1 session total %+v", first.SessionTotal)
	}
	var asked string
	second, recs := recordedRecords(t, "codex", "turn2-resumed-command", adapters.StreamOptions{Baseline: func(s string) adapters.Usage {
		asked = s
		return *first.SessionTotal
	}})
	if asked != first.Session || second.Session != first.Session {
		t.Errorf("baseline asked for %q, sessions %q and %q", asked, first.Session, second.Session)
	}
	if second.Usage == nil || *second.Usage != (adapters.Usage{InputTokens: 2400, OutputTokens: 68}) || *second.SessionTotal != (adapters.Usage{InputTokens: 3600, OutputTokens: 102}) {
		t.Errorf("turn 2: usage %+v, total %+v", second.Usage, second.SessionTotal)
	}
	if !strings.Contains(recs, "tool: $ /bin/bash -lc 'echo hi-from-bash'\n") {
		t.Errorf("turn 2 records:\n%s", recs)
	}
	// Without a baseline (none kept) the thread's total is all there is.
	if alone, _ := recordedRecords(t, "codex", "turn2-resumed-command", adapters.StreamOptions{}); *alone.Usage != (adapters.Usage{InputTokens: 3600, OutputTokens: 102}) {
		t.Errorf("turn 2 without baseline: %+v", alone.Usage)
	}
}

// codex's reconnects are retries in progress, with the status and attempt;
// the run fails with codex's reason (defect 5).
func TestConvertCodexRetries(t *testing.T) {
	out, recs := recordedRecords(t, "codex", "bad-key", adapters.StreamOptions{})
	if !out.Failed || !strings.HasPrefix(out.Error, "unexpected status 401 Unauthorized: invalid x-api-key") {
		t.Errorf("bad key: %+v", out)
	}
	if !strings.Contains(recs, "retry: retrying after 401 (attempt 2 of 6)\n") || !strings.Contains(recs, "retry: retrying after 401 (attempt 6 of 6)\n") {
		t.Errorf("bad key records:\n%s", recs)
	}
	out, recs = recordedRecords(t, "codex", "server-error", adapters.StreamOptions{})
	if !out.Failed || out.Error != "We’re currently experiencing high demand, which may cause temporary errors." {
		t.Errorf("server error: %+v", out)
	}
	if !strings.Contains(recs, "retry: retrying after We’re currently experiencing high demand, which may cause t… (attempt 2 of 2)\n") {
		t.Errorf("server error records:\n%s", recs)
	}
}

func TestConvertClaudeMCPToolStatus(t *testing.T) {
	in := `{"type":"system","subtype":"init","session_id":"s"}
{"type":"assistant","session_id":"s","message":{"id":"m","content":[{"type":"tool_use","name":"mcp__bridge__post","input":{"thread":"t1","content":"hello from claude"}},{"type":"tool_use","name":"mcp__bridge__thread_state","input":{"limit":3}}]}}`
	var recs []adapters.ProgressRecord
	if _, err := convertStream(adapters.StreamClaude, strings.NewReader(in), func(r adapters.ProgressRecord) { recs = append(recs, r) }); err != nil {
		t.Fatal(err)
	}
	got := statuses(recs)
	for _, want := range []string{"tool: bridge.post: hello from claude\n", `tool: bridge.thread_state: {"limit":3}` + "\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("records lack %q:\n%s", want, got)
		}
	}
}

// MCP tool calls as the pinned CLIs printed them: server.tool and the
// argument that says most (defect 6).
func TestConvertRecordedMCPCalls(t *testing.T) {
	_, recs := recordedRecords(t, "codex", "mcp-post", adapters.StreamOptions{})
	if !strings.Contains(recs, "tool: bridge.post: hello from codex over MCP\n") {
		t.Errorf("codex records:\n%s", recs)
	}
	_, recs = recordedRecords(t, "claude", "mcp-post", adapters.StreamOptions{})
	if !strings.Contains(recs, "tool: bridge.post: hello from claude over MCP\n") {
		t.Errorf("claude records:\n%s", recs)
	}
}

func TestSessionTotals(t *testing.T) {
	st := adapters.SessionTotals{Dir: filepath.Join(t.TempDir(), "usage")}
	if u := st.Load("s1"); u != (adapters.Usage{}) {
		t.Errorf("nothing kept yet: %+v", u)
	}
	want := adapters.Usage{InputTokens: 3600, OutputTokens: 102}
	if err := st.Save("s1", want); err != nil {
		t.Fatal(err)
	}
	if u := st.Load("s1"); u != want {
		t.Errorf("kept %+v, want %+v", u, want)
	}
	// Ids that are no file name are neither kept nor read.
	for _, bad := range []string{"", "../s1", "a/b", ".hidden"} {
		if err := st.Save(bad, want); err != nil {
			t.Errorf("save %q: %v", bad, err)
		}
		if u := st.Load(bad); u != (adapters.Usage{}) {
			t.Errorf("load %q: %+v", bad, u)
		}
	}
	if entries, _ := os.ReadDir(st.Dir); len(entries) != 1 {
		t.Errorf("files kept: %v", entries)
	}
}

// Item kinds of codex's exec events (exec_events.rs) that the fake model
// does not make codex print; written by hand from the format.
func TestConvertCodexOtherItemKinds(t *testing.T) {
	in := `{"type":"thread.started","thread_id":"th"}
{"type":"item.started","item":{"id":"i1","type":"file_change","changes":[{"path":"parse.go","kind":"update"}],"status":"in_progress"}}
{"type":"item.completed","item":{"id":"i1","type":"file_change","changes":[{"path":"parse.go","kind":"update"}],"status":"completed"}}
{"type":"item.started","item":{"id":"i2","type":"web_search","query":"go slices"}}
{"type":"item.updated","item":{"id":"i3","type":"todo_list","items":[{"text":"a","completed":true},{"text":"b","completed":false}]}}
{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}`
	var recs []adapters.ProgressRecord
	out, err := convertStream(adapters.StreamCodex, strings.NewReader(in), func(r adapters.ProgressRecord) { recs = append(recs, r) })
	if err != nil || out.Failed {
		t.Fatalf("%+v %v", out, err)
	}
	want := `session: started
tool: edit: update parse.go
tool_result: edit: update parse.go
tool: search: go slices
plan: plan: 2 items
usage: done: 10 tokens in, 2 out
`
	if got := statuses(recs); got != want {
		t.Errorf("records:\n%s\nwant:\n%s", got, want)
	}
}

// codex 0.169 waiting for an unreachable model address: a retry, not a
// failure (seen with the pinned codex against a closed port).
func TestConvertCodexWaitingForNetwork(t *testing.T) {
	in := `{"type":"thread.started","thread_id":"th"}
{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}
{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}`
	var recs []adapters.ProgressRecord
	out, err := convertStream(adapters.StreamCodex, strings.NewReader(in), func(r adapters.ProgressRecord) { recs = append(recs, r) })
	if err != nil || out.Failed {
		t.Fatalf("%+v %v", out, err)
	}
	if got := statuses(recs); !strings.Contains(got, "retry: retrying: waiting for network (Connection failed: error sending request)\n") {
		t.Errorf("records:\n%s", got)
	}
}

// convertStream is ConvertStreamWith without options.
func convertStream(format string, r io.Reader, emit func(adapters.ProgressRecord)) (adapters.StreamOutcome, error) {
	return adapters.ConvertStreamWith(format, r, emit, adapters.StreamOptions{})
}
