package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// cliRig is a coordinator process whose agents are the shipped
// claude_code.sh and codex.sh over the fake claude and codex CLIs.
type cliRig struct {
	*coordEnv
	bin    string
	proc   *stack.Proc
	log    string
	forget string
	thread string
}

func newCLIRig(t *testing.T) *cliRig {
	t.Helper()
	bin, fake := buildCoordBinaries(t)
	fakeCLI := buildFakeCLI(t)
	e := newCoordEnv(t, fake)
	clis := filepath.Join(e.dir, "clis")
	if err := os.Mkdir(clis, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"claude", "codex"} {
		if err := os.Symlink(fakeCLI, filepath.Join(clis, name)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	r := &cliRig{coordEnv: e, bin: bin, log: filepath.Join(e.dir, "cli.log"), forget: filepath.Join(e.dir, "forget")}
	env := map[string]string{
		"PATH":                  clis + string(os.PathListSeparator) + os.Getenv("PATH"),
		"FAKE_CLI_LOG":          r.log,
		"FAKE_CLI_FIXTURES":     filepath.Join(root, "adapters", "testdata", "cli"),
		"FAKE_CLI_NEW_SESSIONS": "1",
		"FAKE_CLI_FORGET":       r.forget,
		"CODEX_HOME":            filepath.Join(e.dir, "codex-home"),
	}
	b, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["primer_path"] = filepath.Join(root, "docs", "bridge-agent-primer.md")
	cfg["agents"] = map[string]any{
		"claude-code": map[string]any{"command": []string{filepath.Join(root, "adapters", "claude_code.sh")}, "client": "claude", "env": env},
		"codex":       map[string]any{"command": []string{filepath.Join(root, "adapters", "codex.sh")}, "client": "codex", "env": env},
	}
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(e.cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r.proc = e.startCoordProc(bin)
	th, err := e.cl.CreateThread(context.Background(), agentbridge.CreateThreadRequest{Name: "review"})
	if err != nil {
		t.Fatal(err)
	}
	r.thread = th.ID
	for _, p := range [][2]string{{"claude-a", "claude"}, {"claude-b", "claude"}, {"codex", "codex"}} {
		ctl, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": p[0], "profile": map[string]any{"client": p[1], "model": "m"}}})
		if _, err := e.cl.Append(context.Background(), r.thread, agentbridge.EventInput{Type: "control", From: "user", Content: ctl}, ""); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// turn asks participant and returns the CLI runs it caused (one, or two
// when a resume was refused) once its reply is in.
func (r *cliRig) turn(participant, text string) []cliCall {
	r.t.Helper()
	before := 0
	if _, err := os.Stat(r.log); err == nil {
		before = len(cliCalls(r.t, r.log))
	}
	ev := r.say(r.thread, participant, text)
	testutil.WaitFor(r.t, 60*time.Second, participant+"'s reply to "+text, func() bool { return len(r.replies(r.thread, ev.ID)) == 1 })
	if got := r.replies(r.thread, ev.ID)[0]; got.From != participant {
		r.t.Fatalf("the answer to %q came from %s: %s", text, got.From, got.Text())
	}
	return cliCalls(r.t, r.log)[before:]
}

// resumed is the session a CLI run resumed ("" for a new one).
func resumed(c cliCall) string {
	for i, a := range c.Argv {
		if (a == "--resume" || a == "resume") && i+1 < len(c.Argv) {
			return c.Argv[i+1]
		}
	}
	return ""
}

// sessionOfRig reads the session the coordinator keeps for participant.
func (r *cliRig) session(participant string) (string, int) {
	r.t.Helper()
	out, stderr, code := r.cli(r.bin, "sessions", "--thread", r.thread, "--json", "--coordinator-url", r.statusURL)
	if code != 0 {
		r.t.Fatalf("sessions: exit %d: %s", code, stderr)
	}
	var list []struct {
		Participant string `json:"participant"`
		ID          string `json:"session_id"`
		Turns       int    `json:"turns"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		r.t.Fatalf("sessions --json: %v\n%s", err, out)
	}
	for _, s := range list {
		if s.Participant == participant {
			return s.ID, s.Turns
		}
	}
	return "", 0
}

// TestShippedAdaptersResumeSessions drives the shipped claude_code.sh and
// codex.sh with the real binary and the fake CLIs: sessions are resumed
// (also after kill -9 of the coordinator), two claude participants keep
// separate sessions, a resumed turn after 50 messages is sent only what is
// new, a refused session is replaced by the new id the CLI reports, and
// reset_session starts afresh.
func TestShippedAdaptersResumeSessions(t *testing.T) {
	stack.Heavy(t)
	r := newCLIRig(t)
	for i := range 50 {
		// To the person: stored, wakes nobody.
		r.say(r.thread, "user", fmt.Sprintf("backlog note %d", i))
	}
	a1 := r.turn("claude-a", "first look, please")
	if len(a1) != 1 || resumed(a1[0]) != "" || !strings.Contains(a1[0].Stdin, "backlog note 49") || !strings.Contains(a1[0].Stdin, "[PASS]") {
		t.Fatalf("claude-a's first turn: %d runs, resumed %q; a new session must get the primer and the window:\n%s", len(a1), resumed(a1[0]), a1[0].Stdin)
	}
	sa, turns := r.session("claude-a")
	if sa == "" || turns != 1 {
		t.Fatalf("claude-a's session after one turn: %q, %d turns", sa, turns)
	}
	b1 := r.turn("claude-b", "and you?")
	sb, _ := r.session("claude-b")
	if resumed(b1[0]) != "" || sb == "" || sb == sa {
		t.Fatalf("claude-b's session %q (resumed %q) is not its own (claude-a has %q)", sb, resumed(b1[0]), sa)
	}

	r.say(r.thread, "user", "a new note after the first look")
	a2 := r.turn("claude-a", "second look")
	if len(a2) != 1 || resumed(a2[0]) != sa {
		t.Fatalf("claude-a's second turn resumed %q, want %q", resumed(a2[0]), sa)
	}
	for _, want := range []string{"a new note after the first look", "second look", "since your last turn", "@claude-b"} {
		if !strings.Contains(a2[0].Stdin, want) {
			t.Errorf("the resumed prompt lacks %q:\n%s", want, a2[0].Stdin)
		}
	}
	for _, old := range []string{"backlog note", "first look, please", "[PASS]"} {
		if strings.Contains(a2[0].Stdin, old) {
			t.Errorf("the resumed prompt repeats %q, which the session has seen:\n%s", old, a2[0].Stdin)
		}
	}
	if len(a2[0].Stdin)*4 > len(a1[0].Stdin) {
		t.Errorf("the resumed prompt is %d bytes, the first one %d: not much smaller", len(a2[0].Stdin), len(a1[0].Stdin))
	}

	// kill -9 and a restart: the session is still there.
	if err := r.proc.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.proc.Wait(t)
	r.proc = r.startCoordProc(r.bin)
	if a3 := r.turn("claude-a", "after the restart"); resumed(a3[0]) != sa {
		t.Fatalf("after kill -9 claude-a resumed %q, want %q", resumed(a3[0]), sa)
	}
	if _, turns := r.session("claude-a"); turns != 3 {
		t.Errorf("claude-a's session has %d turns, want 3", turns)
	}

	// codex: codex exec … resume ID.
	c1 := r.turn("codex", "your view?")
	sc, _ := r.session("codex")
	c2 := r.turn("codex", "and now?")
	if resumed(c1[0]) != "" || sc == "" || resumed(c2[0]) != sc || !slices.Contains(c2[0].Argv, "exec") {
		t.Fatalf("codex runs %v then %v, kept session %q", c1[0].Argv, c2[0].Argv, sc)
	}

	// The CLI lost its sessions: claude-b's resume is refused, the script
	// starts afresh with the whole conversation, and the new id is kept.
	if err := os.WriteFile(r.forget, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b2 := r.turn("claude-b", "still with us?")
	if err := os.Remove(r.forget); err != nil {
		t.Fatal(err)
	}
	if len(b2) != 2 || resumed(b2[0]) != sb || resumed(b2[1]) != "" ||
		!strings.Contains(b2[1].Stdin, "## Conversation so far") || !strings.Contains(b2[1].Stdin, "[PASS]") {
		t.Fatalf("a refused resume: %d runs (%v), want the refused resume of %s then a new session with the primer and the whole window", len(b2), b2, sb)
	}
	sb2, turns := r.session("claude-b")
	if sb2 == "" || sb2 == sb || turns != 1 {
		t.Fatalf("after the refused resume claude-b keeps %q (%d turns), want a new id", sb2, turns)
	}
	if b3 := r.turn("claude-b", "good"); resumed(b3[0]) != sb2 {
		t.Fatalf("claude-b resumed %q, want the new session %q", resumed(b3[0]), sb2)
	}

	// reset_session (here from claude-b, a participant) forgets claude-a's.
	if out, stderr, code := r.cli(r.bin, "sessions", "reset", r.thread, "claude-a", "--from", "claude-b"); code != 0 {
		t.Fatalf("sessions reset: exit %d\n%s%s", code, out, stderr)
	}
	if a4 := r.turn("claude-a", "start over"); resumed(a4[0]) != "" {
		t.Fatalf("after reset_session claude-a resumed %q", resumed(a4[0]))
	}
	if s, turns := r.session("claude-a"); s == "" || s == sa || turns != 1 {
		t.Errorf("after the reset claude-a keeps %q (%d turns), want a new session", s, turns)
	}
	r.proc.Terminate(t)
}
