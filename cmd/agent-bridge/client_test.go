package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

// testBridge is a real bridge server over a SQLite file, which a test can
// stop and start again on the same file and port.
type testBridge struct {
	t     *testing.T
	db    string
	addr  string
	token string
	srv   *bridge.Server
	store *sqlite.Store
}

func startTestBridge(t *testing.T) *testBridge {
	t.Helper()
	return startTokenBridge(t, "")
}

// startTokenBridge starts a bridge that requires the bearer token ("" for
// none).
func startTokenBridge(t *testing.T, token string) *testBridge {
	t.Helper()
	b := &testBridge{t: t, db: filepath.Join(t.TempDir(), "bridge.db"), addr: "127.0.0.1:0", token: token}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *testBridge) start() {
	b.t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := sqlite.Open(b.t.Context(), b.db, sqlite.Options{Logger: quiet})
	if err != nil {
		b.t.Fatal(err)
	}
	srv, err := bridge.NewServer(st, bridge.Options{Addr: b.addr, Token: b.token, Logger: quiet})
	if err != nil {
		b.t.Fatal(err)
	}
	if err := srv.Open(); err != nil {
		b.t.Fatal(err)
	}
	u, err := url.Parse(srv.URL())
	if err != nil {
		b.t.Fatal(err)
	}
	b.srv, b.store, b.addr = srv, st, u.Host
}

func (b *testBridge) stop() {
	if b.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Close(ctx); err != nil {
		b.t.Errorf("close server: %v", err)
	}
	if err := b.store.Close(); err != nil {
		b.t.Errorf("close store: %v", err)
	}
	b.srv, b.store = nil, nil
}

func (b *testBridge) url() string { return "http://" + b.addr }

func (b *testBridge) client() *client.Client {
	return client.New(b.url(), client.WithToken(b.token))
}

// cli runs one subcommand in-process and returns its output and exit code.
type cli struct {
	t     *testing.T
	env   map[string]string
	stdin string
}

func (c cli) run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	var out, errb testutil.Buffer
	m := &Main{Stdin: strings.NewReader(c.stdin), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return c.env[k] }}
	err := m.Run(c.t.Context(), args)
	code = exitCode(&errb, err)
	return out.String(), errb.String(), code
}

// ok runs a subcommand that must succeed and returns its stdout.
func (c cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
	}
	return out
}

func newCLI(t *testing.T, b *testBridge) cli {
	return cli{t: t, env: map[string]string{"BRIDGE_URL": b.url()}}
}

func TestThreadCommands(t *testing.T) {
	b := startTestBridge(t)
	c := newCLI(t, b)

	id := strings.TrimSpace(c.ok("thread", "new", "design", "review"))
	if id == "" || strings.ContainsAny(id, " \n") {
		t.Fatalf("thread new printed %q, want just the id", id)
	}
	var th agentbridge.Thread
	if err := json.Unmarshal([]byte(c.ok("thread", "new", "planning", "--id", "plan", "--json")), &th); err != nil || th.ID != "plan" || th.Name != "planning" {
		t.Fatalf("thread new --json = %+v, %v", th, err)
	}

	out := c.ok("thread", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(out, "design review") || !strings.Contains(out, "plan ") {
		t.Fatalf("thread list =\n%s", out)
	}

	if got := c.ok("thread", "rename", "plan", "the", "plan"); !regexp.MustCompile(`^\S+ seq 2\n$`).MatchString(got) {
		t.Fatalf("thread rename printed %q, want \"<id> seq 2\"", got)
	}
	var list []agentbridge.Thread
	if err := json.Unmarshal([]byte(c.ok("thread", "list", "--json", "--limit", "1")), &list); err != nil || len(list) != 1 {
		t.Fatalf("thread list --json --limit 1 = %+v, %v", list, err)
	}
	got, err := b.client().Thread(t.Context(), "plan")
	if err != nil || got.Name != "the plan" {
		t.Fatalf("after rename the thread is %+v, %v", got, err)
	}
}

func TestPostCommand(t *testing.T) {
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "t", "--id", "T")

	first := c.ok("post", "T", "hello @codex", "--to", "codex")
	if !regexp.MustCompile(`^\S+ seq 2\n$`).MatchString(first) {
		t.Fatalf("post printed %q", first)
	}
	firstID := strings.Fields(first)[0]

	var e agentbridge.Event
	out := c.ok("post", "--json", "T", "a", "reply", "--from", "codex", "--reply-to", firstID)
	if err := json.Unmarshal([]byte(out), &e); err != nil || e.Seq != 3 || e.From != "codex" || e.Meta.ReplyTo != firstID || e.Text() != "a reply" {
		t.Fatalf("post --json = %+v, %v", e, err)
	}

	c.stdin = "line one\nline two\n"
	c.ok("post", "T", "-")
	c.stdin = ""
	evs, err := b.client().ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: "T", After: 3})
	if err != nil || len(evs) != 1 || evs[0].Text() != "line one\nline two" {
		t.Fatalf("post - stored %+v, %v", evs, err)
	}

	k1 := c.ok("post", "T", "once", "--idempotency-key", "abc")
	k2 := c.ok("post", "T", "once", "--idempotency-key", "abc")
	if k1 != k2 {
		t.Fatalf("idempotent posts printed %q and %q", k1, k2)
	}

	c.ok("post", "T", `{"pause":{"on":true}}`, "--type", "control")
	st, _, err := b.client().State(t.Context(), "T", 0)
	if err != nil || !st.Paused {
		t.Fatalf("after a pause control the state is %+v, %v", st, err)
	}
}

func TestInviteStateAndControls(t *testing.T) {
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "t", "--id", "T")

	c.ok("invite", "T", "codex", "--client", "codex", "--model", "gpt-5", "--nickname", "cx", "--role", "reviewer", "--role", "tester")
	c.ok("invite", "T", "claude", "--client", "claude", "--model", "opus")
	c.ok("mute", "T", "claude")
	c.ok("discussion", "T", "on", "--agent-mentions=false")
	c.ok("auto", "T", "on")
	c.ok("prod", "T", "codex")

	out := c.ok("state", "T")
	for _, want := range []string{
		"thread T at seq 7", "paused:       off", "muted:        claude",
		"discussion:   on (agent mentions off)", "invited_auto: on",
		"codex", "client=codex", "model=gpt-5", "nickname=cx", "roles=reviewer,tester", "(invited by user)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("state output lacks %q:\n%s", want, out)
		}
	}

	var raw struct {
		Thread string                  `json:"thread"`
		Seq    int64                   `json:"seq"`
		State  agentbridge.ThreadState `json:"state"`
	}
	if err := json.Unmarshal([]byte(c.ok("state", "T", "--json", "--at", "3")), &raw); err != nil || raw.Seq != 3 || len(raw.State.Participants.Invited) != 2 || len(raw.State.Muted) != 0 {
		t.Fatalf("state --json --at 3 = %+v, %v", raw, err)
	}

	c.ok("unmute", "T", "claude")
	c.ok("uninvite", "T", "claude")
	c.ok("pause", "T", "on")
	st, _, err := b.client().State(t.Context(), "T", 0)
	if err != nil || !st.Paused || len(st.Muted) != 0 || len(st.Participants.Invited) != 1 {
		t.Fatalf("state after unmute, uninvite, pause = %+v, %v", st, err)
	}

	// A refusal comes back as the server's own sentence, exit 1.
	_, errOut, code := c.run("post", "T", "hi", "--from", "codex")
	if code != 1 || !strings.HasPrefix(errOut, "agent-bridge: ") || !strings.Contains(errOut, "paused") || strings.Contains(errOut, "thread_paused:") {
		t.Fatalf("post while paused: exit %d, stderr %q", code, errOut)
	}
	c.ok("pause", "T", "off")
	c.ok("post", "T", "hi", "--from", "codex")
}

func TestServerErrorsAreSentences(t *testing.T) {
	b := startTestBridge(t)
	c := newCLI(t, b)
	_, _, want := b.client().State(t.Context(), "missing", 0)
	var e *agentbridge.Error
	if !errors.As(want, &e) {
		t.Fatalf("state of a missing thread = %v", want)
	}
	for _, args := range [][]string{
		{"state", "missing"},
		{"post", "missing", "hi"},
		{"tail", "missing"},
		{"invite", "missing", "codex", "--client", "c", "--model", "m"},
	} {
		_, errOut, code := c.run(args...)
		if code != 1 || !strings.HasPrefix(errOut, "agent-bridge: ") || !strings.Contains(errOut, "missing") || strings.Contains(errOut, "thread_not_found") {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and the server's sentence", args, code, errOut)
		}
	}
	_, errOut, code := c.run("state", "missing")
	if errOut != "agent-bridge: "+e.Message+"\n" || code != 1 {
		t.Errorf("state of a missing thread printed %q, want the server's sentence %q", errOut, e.Message)
	}

	c.ok("thread", "new", "t", "--id", "T")
	_, errOut, code = c.run("invite", "T", "codex", "--client", "c", "--model", "m", "--from", "bad id")
	if code != 1 || !strings.Contains(errOut, "bad id") {
		t.Errorf("invalid --from: exit %d, stderr %q", code, errOut)
	}

	b.stop()
	_, errOut, code = c.run("thread", "list")
	if code != 1 || !strings.Contains(errOut, "is the bridge running") {
		t.Errorf("bridge down: exit %d, stderr %q", code, errOut)
	}
}

func TestTokenFlags(t *testing.T) {
	b := startTokenBridge(t, "s3cret")
	c := newCLI(t, b)
	_, errOut, code := c.run("thread", "list")
	if code != 1 || !strings.HasPrefix(errOut, "agent-bridge: ") || strings.Contains(errOut, "s3cret") {
		t.Fatalf("no token: exit %d, stderr %q", code, errOut)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.ok("thread", "new", "t", "--token-file", file)
	c.env["BRIDGE_TOKEN"] = "s3cret"
	if out := c.ok("thread", "list", "--json"); !strings.Contains(out, `"name":"t"`) {
		t.Fatalf("thread list with BRIDGE_TOKEN = %q", out)
	}
}

func TestUsageErrors(t *testing.T) {
	c := cli{t: t, env: map[string]string{"BRIDGE_URL": "http://127.0.0.1:1"}}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"thread"}, "thread: give a subcommand"},
		{[]string{"thread", "destroy"}, "unknown subcommand"},
		{[]string{"thread", "new"}, "NAME"},
		{[]string{"thread", "list", "--limit", "-1"}, "--limit"},
		{[]string{"thread", "list", "--limit", "many"}, "-limit"},
		{[]string{"thread", "rename", "T"}, "NAME"},
		{[]string{"post", "T"}, "THREAD and TEXT"},
		{[]string{"post", "T", "hi", "--bogus"}, "bogus"},
		{[]string{"invite", "T", "codex", "--model", "m"}, "--client"},
		{[]string{"invite", "T", "codex", "--client", "c"}, "--model"},
		{[]string{"invite", "T"}, "participant ID"},
		{[]string{"uninvite", "T"}, "participant ID"},
		{[]string{"mute", "T"}, "participant IDs"},
		{[]string{"mute", "T", "x", "--mode", "loud"}, "--mode"},
		{[]string{"pause", "T", "maybe"}, "on or off"},
		{[]string{"discussion", "T", "on", "--agent-mentions", "perhaps"}, "--agent-mentions"},
		{[]string{"state"}, "THREAD"},
		{[]string{"state", "T", "--at", "x"}, "-at"},
		{[]string{"tail"}, "THREAD, or --all"},
		{[]string{"tail", "T", "--all"}, "not both"},
		{[]string{"state", "T", "--url", "ftp://x"}, "--url"},
		{[]string{"state", "T", "--token-file", "/nonexistent/token"}, "--token-file"},
	}
	for _, tt := range tests {
		_, errOut, code := c.run(tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tt.args, code, errOut, tt.want)
		}
	}
}

// tailLines returns the event lines tail printed (those starting "[").
func tailLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "[") {
			lines = append(lines, l)
		}
	}
	return lines
}

// runTailAsync starts tail in a goroutine writing to out and errb; the
// returned function stops it and returns its error.
func runTailAsync(t *testing.T, env map[string]string, out, errb *testutil.Buffer, args ...string) func() error {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	m := &Main{Stdin: strings.NewReader(""), Stdout: out, Stderr: errb, Getenv: func(k string) string { return env[k] }}
	go func() { done <- m.Run(ctx, append([]string{"tail"}, args...)) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatalf("tail did not stop; stderr %q", errb.String())
			return nil
		}
	}
}

func TestTailResumesAcrossRestart(t *testing.T) {
	b := startTestBridge(t)
	c := newCLI(t, b)
	cl := b.client()
	c.ok("thread", "new", "t", "--id", "T")
	post := func(text string) {
		t.Helper()
		b, _ := json.Marshal(text)
		if _, err := cl.Append(t.Context(), "T", agentbridge.EventInput{From: "user", Content: b}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 12; i++ {
		post("m" + strconv.Itoa(i))
	}

	var out, errb testutil.Buffer
	stop := runTailAsync(t, c.env, &out, &errb, "T")
	waitLines := func(n int) {
		t.Helper()
		testutil.WaitFor(t, 20*time.Second, strconv.Itoa(n)+" tail lines", func() bool { return len(tailLines(out.String())) >= n })
	}
	waitLines(10) // the last 10 of 13 events: seq 4..13
	post("m13")
	post("m14")
	waitLines(12)

	b.stop()
	if _, err := cl.Append(t.Context(), "T", agentbridge.EventInput{From: "user", Content: []byte(`"lost"`)}, ""); err == nil {
		t.Fatal("posted to a stopped bridge")
	}
	b.start()
	for i := 15; i <= 18; i++ {
		post("m" + strconv.Itoa(i))
	}
	waitLines(16)
	if err := stop(); err != nil {
		t.Fatalf("tail returned %v after its context ended, want nil", err)
	}

	if !strings.Contains(errb.String(), "reconnecting") {
		t.Errorf("tail logged no reconnect; stderr %q", errb.String())
	}
	lines := tailLines(out.String())
	if len(lines) != 16 {
		t.Fatalf("tail printed %d event lines, want 16:\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		seq := i + 4
		want := "m" + strconv.Itoa(seq-1)
		if !strings.HasPrefix(l, "["+strconv.Itoa(seq)+"] ") || !strings.HasSuffix(l, "user → all: "+want) {
			t.Errorf("line %d = %q, want seq %d with %q", i, l, seq, want)
		}
	}
}

func TestTailAllJSON(t *testing.T) {
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "a", "--id", "A")
	c.ok("thread", "new", "b", "--id", "B")

	var out, errb testutil.Buffer
	stop := runTailAsync(t, c.env, &out, &errb, "--all", "--json", "--after", "1", "--presence")
	c.ok("post", "A", "one")
	c.ok("post", "B", "two", "--from", "codex")
	// Presence is not replayed: a stream sees only changes made after it
	// connected. Once tail has printed an event, its stream has connected.
	testutil.WaitFor(t, 20*time.Second, "tail to print the first events", func() bool {
		return strings.Count(out.String(), "\n") >= 2
	})
	if err := b.client().SetPresence(t.Context(), "B", agentbridge.PresenceInput{From: "codex", State: "typing"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "three events and a presence line", func() bool {
		return strings.Count(out.String(), "\n") >= 4
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var gseqs []int64
	var presence int
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var v struct {
			GSeq     int64                 `json:"gseq"`
			Presence *agentbridge.Presence `json:"presence"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		if v.Presence != nil {
			presence++
			continue
		}
		gseqs = append(gseqs, v.GSeq)
	}
	if len(gseqs) != 3 || gseqs[0] != 2 || gseqs[1] != 3 || gseqs[2] != 4 || presence != 1 {
		t.Fatalf("tail --all --json: gseqs %v, %d presence lines:\n%s", gseqs, presence, out.String())
	}
}

func TestFormatEvent(t *testing.T) {
	e := agentbridge.Event{Seq: 3, GSeq: 9, Thread: "T", TS: "2026-11-21T10:00:00.000000Z", Type: "message", From: "user", To: "codex", Content: json.RawMessage(`"hi\nthere\n"`)}
	if got, want := formatEvent(e, false), "[3] 2026-11-21T10:00:00.000000Z user → codex: hi\n    there"; got != want {
		t.Errorf("formatEvent = %q, want %q", got, want)
	}
	e.Type, e.Content = "control", json.RawMessage(`{"pause":{"on":true}}`)
	if got, want := formatEvent(e, true), `[9] T#3 2026-11-21T10:00:00.000000Z user → codex (control): {"pause":{"on":true}}`; got != want {
		t.Errorf("formatEvent global = %q, want %q", got, want)
	}
}

// TestTailReceipts checks that tail prints receipt changes as lines of
// their own (no ANSI codes when stdout is not a terminal) and that
// --no-receipts leaves them out.
func TestTailReceipts(t *testing.T) {
	b := startTestBridge(t)
	c := newCLI(t, b)
	cl := b.client()
	c.ok("thread", "new", "t", "--id", "T")
	ev, err := cl.Append(t.Context(), "T", agentbridge.EventInput{From: "user", To: "codex", Content: []byte(`"hi"`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb, quiet, qerr testutil.Buffer
	stop := runTailAsync(t, c.env, &out, &errb, "T")
	stopQuiet := runTailAsync(t, c.env, &quiet, &qerr, "T", "--no-receipts")
	testutil.WaitFor(t, 20*time.Second, "both tails to print the history", func() bool {
		return len(tailLines(out.String())) >= 2 && len(tailLines(quiet.String())) >= 2
	})
	// A receipt is sent only to subscribers connected when it changes; put
	// it again (as a new state) until the tail has seen one.
	states := []string{agentbridge.ReceiptQueued, agentbridge.ReceiptRunning}
	i := 0
	testutil.WaitFor(t, 20*time.Second, "tail to print a receipt", func() bool {
		in := agentbridge.ReceiptInput{Thread: "T", Event: ev.ID, Participant: "codex", From: "bridge-coordinator", State: states[i%2], Invocation: strconv.Itoa(i)}
		i++
		if _, _, err := cl.PutReceipt(t.Context(), in); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out.String(), "↳ codex: ")
	})
	if _, err := cl.Append(t.Context(), "T", agentbridge.EventInput{From: "user", Content: []byte(`"after"`)}, ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the quiet tail to print the next event", func() bool {
		return strings.Contains(quiet.String(), "after")
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := stopQuiet(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Errorf("tail wrote ANSI codes to a non-terminal:\n%q", out.String())
	}
	if !strings.Contains(out.String(), " for "+ev.ID) {
		t.Errorf("receipt line does not name its event:\n%s", out.String())
	}
	if strings.Contains(quiet.String(), "↳") {
		t.Errorf("tail --no-receipts printed a receipt:\n%s", quiet.String())
	}

	// A new tail prints the backlog's current receipts under their events.
	var late, lerr testutil.Buffer
	stopLate := runTailAsync(t, c.env, &late, &lerr, "T")
	testutil.WaitFor(t, 20*time.Second, "a new tail to print the history with its receipt", func() bool {
		return strings.Contains(late.String(), "after")
	})
	if err := stopLate(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(late.String(), "\n")
	hi := slices.IndexFunc(lines, func(l string) bool { return strings.HasSuffix(l, ": hi") })
	if hi < 0 || hi+1 >= len(lines) || !strings.HasPrefix(lines[hi+1], "  ↳ codex: ") {
		t.Errorf("a new tail did not print the receipt under its event:\n%s", late.String())
	}
}

func TestFormatReceipt(t *testing.T) {
	r := agentbridge.Receipt{Thread: "T", Event: "E", Participant: "gemini", State: "skipped", Reason: "no adapter"}
	if got, want := formatReceipt(r, false), "  ↳ gemini: skipped — no adapter for E"; got != want {
		t.Errorf("formatReceipt = %q, want %q", got, want)
	}
	r = agentbridge.Receipt{Thread: "T", Event: "E", Participant: "codex", State: "succeeded", Invocation: "4", Reply: "R"}
	if got, want := formatReceipt(r, true), "  ↳ codex: succeeded (invocation 4) reply R for T/E"; got != want {
		t.Errorf("formatReceipt = %q, want %q", got, want)
	}
}
