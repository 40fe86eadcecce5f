package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// withSessions makes alice's adapter act as a CLI that keeps sessions.
func (e *coordEnv) withSessions() {
	e.t.Helper()
	b, err := os.ReadFile(e.cfgPath)
	if err != nil {
		e.t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		e.t.Fatal(err)
	}
	alice := cfg["agents"].(map[string]any)["alice"].(map[string]any)
	alice["env"] = map[string]string{"FAKE_ADAPTER_SESSION": "keep"}
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(e.cfgPath, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// turn posts to alice, waits for her reply, and returns the trigger's id
// and the payload the adapter got.
func (e *coordEnv) turn(thread, text string) (string, []byte) {
	e.t.Helper()
	ev := e.say(thread, "alice", text)
	testutil.WaitFor(e.t, 30*time.Second, "alice's reply to "+text, func() bool { return len(e.replies(thread, ev.ID)) == 1 })
	b, err := os.ReadFile(filepath.Join(e.fakeDir, ev.ID+"-alice.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	return ev.ID, b
}

// TestSessionsRealBinary: with the real binary, a session survives a
// kill -9 of the coordinator, `sessions` lists it, `prompt` renders only
// what is new for the resumed turn, and `sessions reset` forgets it.
func TestSessionsRealBinary(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	e := newCoordEnv(t, fake)
	e.withSessions()
	p := e.startCoordProc(bin)
	th := e.threadWithAlice()
	first, _ := e.turn(th, "the first question")
	session := "s-alice-" + first

	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait(t)
	p = e.startCoordProc(bin)
	e.say(th, "user", "a note for the humans")
	_, payload := e.turn(th, "the second question")
	var got struct {
		Session struct {
			ID    string `json:"id"`
			Turns int    `json:"turns"`
		} `json:"session"`
	}
	if err := json.Unmarshal(payload, &got); err != nil {
		t.Fatal(err)
	}
	if got.Session.ID != session || got.Session.Turns != 1 {
		t.Fatalf("after kill -9 and restart: session %+v, want %s after 1 turn", got.Session, session)
	}

	out, stderr, code := e.cli(bin, "sessions", "--thread", th, "--coordinator-url", e.statusURL)
	if code != 0 || !strings.Contains(out, "alice") || !strings.Contains(out, session) || !strings.Contains(out, "TURNS") {
		t.Errorf("sessions: exit %d\n%s%s", code, out, stderr)
	}

	cmd := exec.Command(bin, "prompt")
	cmd.Stdin = strings.NewReader(string(payload))
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("prompt: %v", err)
	}
	prompt := string(b)
	for _, want := range []string{"## Who is in this thread", "- @alice (you): fake, model m", "- user: a person", "since your last turn", "a note for the humans", "the second question"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the resumed prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, "the first question") {
		t.Errorf("the resumed prompt repeats what the session has seen:\n%s", prompt)
	}

	if out, stderr, code := e.cli(bin, "sessions", "reset", th, "alice", "--from", "alice"); code != 0 {
		t.Fatalf("sessions reset: exit %d\n%s%s", code, out, stderr)
	}
	_, payload = e.turn(th, "after the reset")
	if err := json.Unmarshal(payload, &got); err != nil {
		t.Fatal(err)
	}
	if got.Session.ID != "" {
		t.Errorf("after sessions reset the run got session %+v, want a new one", got.Session)
	}
	if out, _, code := e.cli(bin, "sessions", "--coordinator-url", e.statusURL, "--bogus"); code != 2 {
		t.Errorf("sessions with an unknown flag: exit %d, want 2\n%s", code, out)
	}
	p.Terminate(t)
}
