package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agent-bridge/agent-bridge/adapters"
)

// cliEnv is scriptEnv with the fake claude and codex on PATH; it returns the
// environment and the file the fakes log their argv and stdin to.
func cliEnv(t *testing.T) ([]string, string) {
	t.Helper()
	fakeCLI := buildFakeCLI(t)
	env, logDir := scriptEnv(t, nil)
	var bin string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "AGENT_BRIDGE_BIN="); ok {
			bin = filepath.Dir(v)
		}
	}
	for _, name := range []string{"claude", "codex"} {
		if err := os.Symlink(fakeCLI, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	fixtures, err := filepath.Abs(filepath.Join("..", "..", "adapters", "testdata", "cli"))
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(logDir, "cli.log")
	return append(env, "FAKE_CLI_LOG="+log, "FAKE_CLI_FIXTURES="+fixtures), log
}

// cliCall is one logged run of a fake CLI.
type cliCall struct {
	Argv  []string `json:"argv"`
	Stdin string   `json:"stdin"`
}

func cliCalls(t *testing.T, log string) []cliCall {
	t.Helper()
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []cliCall
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c cliCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		c.Argv[0] = filepath.Base(c.Argv[0])
		out = append(out, c)
	}
	return out
}

// scriptPayload is the test payload whose message asks the fake for a
// fixture, with session.id set when session is not empty.
func scriptPayload(t *testing.T, fixture, session string) (adapters.Payload, []byte) {
	t.Helper()
	p, _ := promptTestPayload(t)
	p.Content += " fixture:" + fixture
	p.Trigger.Content = p.Content
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["session"] = map[string]any{"id": session, "turns": 1}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// runScriptProgress runs a shipped script, collecting its progress records.
func runScriptProgress(t *testing.T, script string, env []string, payload []byte) (adapters.Result, []adapters.ProgressRecord) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "adapters", script))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var recs []adapters.ProgressRecord
	res := adapters.Run(context.Background(), adapters.Spec{Command: []string{path}, Env: env, Progress: func(r adapters.ProgressRecord) {
		mu.Lock()
		defer mu.Unlock()
		recs = append(recs, r)
	}}, payload, nil)
	return res, recs
}

func hasRecord(recs []adapters.ProgressRecord, kind, status string) bool {
	return slices.ContainsFunc(recs, func(r adapters.ProgressRecord) bool { return r.Kind == kind && r.Status == status })
}

// sessionOf is the last session the records reported.
func sessionOf(recs []adapters.ProgressRecord) string {
	var s string
	for _, r := range recs {
		if r.Session != "" {
			s = r.Session
		}
	}
	return s
}

func TestClaudeScript(t *testing.T) {
	t.Parallel()
	env, log := cliEnv(t)
	p, b := scriptPayload(t, "normal", "")
	res, recs := runScriptProgress(t, "claude_code.sh", env, b)
	if !res.OK() || string(res.Stdout) != "The test fails because Count subtracts one.\nRemove the `- 1` in parse.go and it passes." {
		t.Fatalf("claude_code.sh: %s, stdout %q", adapters.ErrorMessage(res, 0), res.Stdout)
	}
	calls := cliCalls(t, log)
	if got, want := strings.Join(calls[0].Argv, " "), "claude -p --output-format stream-json --verbose --model gpt-5-codex"; got != want {
		t.Errorf("argv %q, want %q", got, want)
	}
	if calls[0].Stdin != adapters.RenderPrompt(p) {
		t.Errorf("stdin is not the rendered prompt:\n%s", calls[0].Stdin)
	}
	if !hasRecord(recs, "tool", "Bash: grep -n 'n - 1' parse.go") || !hasRecord(recs, "tool", "Read: /tmp/agent-bridge-fixtures/project/parse.go") ||
		sessionOf(recs) != recordedSession(t, "claude") || res.ProgressBad != 0 {
		t.Errorf("progress records (%d bad):\n%s", res.ProgressBad, recordLines(recs))
	}
	if last := recs[len(recs)-1]; last.Usage == nil || last.Usage.CostUSD != 0.01644 {
		t.Errorf("last record %+v, want the run's usage and cost", last)
	}

	// A session in the payload is resumed, with extra flags.
	_, b = scriptPayload(t, "unknown", "sess-42")
	res, recs = runScriptProgress(t, "claude_code.sh", append(env, "AGENT_BRIDGE_CLAUDE_ARGS=--permission-mode acceptEdits"), b)
	if !res.OK() || string(res.Stdout) != "All three files are formatted." {
		t.Fatalf("resume: %s, stdout %q", adapters.ErrorMessage(res, 0), res.Stdout)
	}
	calls = cliCalls(t, log)
	if got, want := strings.Join(calls[1].Argv, " "), "claude -p --output-format stream-json --verbose --model gpt-5-codex --resume sess-42 --permission-mode acceptEdits"; got != want {
		t.Errorf("argv %q, want %q", got, want)
	}
	if sessionOf(recs) != "sess-42" || !hasRecord(recs, "other", "rate_limit_event") {
		t.Errorf("progress records:\n%s", recordLines(recs))
	}

	// A session claude no longer knows: one retry as a new session.
	_, b = scriptPayload(t, "normal", "gone-7")
	res, recs = runScriptProgress(t, "claude_code.sh", env, b)
	if !res.OK() || !strings.Contains(string(res.StderrTail), "could not resume session gone-7") {
		t.Fatalf("rejected resume: %s, stdout %q", adapters.ErrorMessage(res, 0), res.Stdout)
	}
	calls = cliCalls(t, log)
	if len(calls) != 4 || !slices.Contains(calls[2].Argv, "--resume") || slices.Contains(calls[3].Argv, "--resume") {
		t.Errorf("calls after a rejected resume: %+v", calls[2:])
	}
	if sessionOf(recs) != recordedSession(t, "claude") {
		t.Errorf("the new session was not reported:\n%s", recordLines(recs))
	}

	// A run that fails half way fails, with claude's error; no retry.
	_, b = scriptPayload(t, "failed", "sess-42")
	res, recs = runScriptProgress(t, "claude_code.sh", env, b)
	if res.OK() || !strings.Contains(string(res.StderrTail), "API Error: 529 overloaded.") {
		t.Fatalf("failed run: exit %d, stderr %q", res.ExitCode, res.StderrTail)
	}
	if n := len(cliCalls(t, log)); n != 5 {
		t.Errorf("%d claude runs, want 5 (a failure half way is not retried)", n)
	}
	if !hasRecord(recs, "tool", "Bash: make deploy") {
		t.Errorf("progress records:\n%s", recordLines(recs))
	}
}

func TestCodexScript(t *testing.T) {
	t.Parallel()
	env, log := cliEnv(t)
	p, b := scriptPayload(t, "normal", "")
	res, recs := runScriptProgress(t, "codex.sh", env, b)
	if !res.OK() || string(res.Stdout) != "Fixed: Count no longer subtracts one; the tests pass." {
		t.Fatalf("codex.sh: %s, stdout %q", adapters.ErrorMessage(res, 0), res.Stdout)
	}
	calls := cliCalls(t, log)
	if got, want := strings.Join(calls[0].Argv, " "), "codex exec --json --skip-git-repo-check --disable unbounded_connection_retries -m gpt-5-codex -"; got != want {
		t.Errorf("argv %q, want %q", got, want)
	}
	if calls[0].Stdin != adapters.RenderPrompt(p) {
		t.Errorf("stdin is not the rendered prompt:\n%s", calls[0].Stdin)
	}
	if !hasRecord(recs, "tool", `$ /bin/bash -lc "grep -n 'n - 1' parse.go"`) || sessionOf(recs) != recordedSession(t, "codex") {
		t.Errorf("progress records:\n%s", recordLines(recs))
	}

	// Resuming: codex exec … resume ID -, without -m (the session keeps its
	// model); no state folder is written.
	_, b = scriptPayload(t, "unknown", "sess-9")
	res, recs = runScriptProgress(t, "codex.sh", append(env, "AGENT_BRIDGE_CODEX_ARGS=--sandbox workspace-write"), b)
	if !res.OK() || string(res.Stdout) != "Done; nothing needed changing." {
		t.Fatalf("resume: %s, stdout %q", adapters.ErrorMessage(res, 0), res.Stdout)
	}
	calls = cliCalls(t, log)
	if got, want := strings.Join(calls[1].Argv, " "), "codex exec --json --skip-git-repo-check --disable unbounded_connection_retries --sandbox workspace-write resume sess-9 -"; got != want {
		t.Errorf("argv %q, want %q", got, want)
	}
	if sessionOf(recs) != "sess-9" || !hasRecord(recs, "other", "hologram") {
		t.Errorf("progress records:\n%s", recordLines(recs))
	}
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "XDG_STATE_HOME="); ok {
			if _, err := os.Stat(filepath.Join(v, "agent-bridge")); err == nil {
				t.Errorf("codex.sh still keeps state under %s", v)
			}
		}
	}

	// A session codex no longer knows: one retry as a new session.
	_, b = scriptPayload(t, "normal", "gone-1")
	res, _ = runScriptProgress(t, "codex.sh", env, b)
	if !res.OK() || string(res.Stdout) != "Fixed: Count no longer subtracts one; the tests pass." {
		t.Fatalf("rejected resume: %s, stdout %q", adapters.ErrorMessage(res, 0), res.Stdout)
	}
	calls = cliCalls(t, log)
	if len(calls) != 4 || !slices.Contains(calls[2].Argv, "resume") || slices.Contains(calls[3].Argv, "resume") {
		t.Errorf("calls after a rejected resume: %+v", calls[2:])
	}

	// A turn that fails half way fails with codex's error.
	_, b = scriptPayload(t, "failed", "")
	res, _ = runScriptProgress(t, "codex.sh", env, b)
	if res.OK() || !strings.Contains(string(res.StderrTail), "last status: 429 Too Many Requests") {
		t.Fatalf("failed run: exit %d, stderr %q", res.ExitCode, res.StderrTail)
	}
}

func recordLines(recs []adapters.ProgressRecord) string {
	var b strings.Builder
	for _, r := range recs {
		line, _ := json.Marshal(r)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestAdapterStreamCommand(t *testing.T) {
	t.Parallel()
	run := func(stdin string, args ...string) (string, string, int) {
		var stdout, stderr strings.Builder
		m := &Main{Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
		code := exitCode(&stderr, m.Run(context.Background(), append([]string{"adapter-stream"}, args...)))
		return stdout.String(), stderr.String(), code
	}
	// Without BRIDGE_PROGRESS_FD only the reply is written.
	out, _, code := run(`{"type":"thread.started","thread_id":"t"}`+"\n"+`{"type":"item.completed","item":{"type":"agent_message","text":"hi"}}`+"\n"+`{"type":"turn.completed","usage":{}}`, "codex")
	if code != 0 || out != "hi" {
		t.Errorf("codex: exit %d, stdout %q", code, out)
	}
	// Nothing at all: the CLI never started (exit 3, for the scripts' retry).
	if _, stderr, code := run("", "claude"); code != 3 || !strings.Contains(stderr, "without a result") {
		t.Errorf("empty: exit %d, stderr %q", code, stderr)
	}
	// A failure after the start: exit 1.
	if _, stderr, code := run(`{"type":"thread.started","thread_id":"t"}`+"\n"+`{"type":"turn.failed","error":{"message":"boom"}}`, "codex"); code != 1 || !strings.Contains(stderr, "boom") {
		t.Errorf("failed: exit %d, stderr %q", code, stderr)
	}
	if _, _, code := run("", "gemini"); code != 2 {
		t.Errorf("unknown CLI: exit %d, want 2", code)
	}
}

// recordedSession is the session id the CLI's normal fixture was recorded
// with (adapters/testdata/cli/<cli>/normal.jsonl, from the pinned CLI).
func recordedSession(t *testing.T, cli string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "adapters", "testdata", "cli", cli, "normal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"(?:session_id|thread_id)":"([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no session id in %s's normal fixture", cli)
	}
	return string(m[1])
}
