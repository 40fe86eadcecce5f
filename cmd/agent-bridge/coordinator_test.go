package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// coordEnv is the scene of a coordinator test: a bridge in-process, a
// config file, a state db and the fake adapter's folder.
type coordEnv struct {
	t          *testing.T
	dir        string
	fakeDir    string
	bridge     *runningBridge
	bridgeAddr string
	cl         *client.Client
	cfgPath    string
	statePath  string
	statusURL  string
}

func newCoordEnv(t *testing.T, fake string) *coordEnv {
	t.Helper()
	dir := t.TempDir()
	e := &coordEnv{t: t, dir: dir, fakeDir: filepath.Join(dir, "fake"), statePath: filepath.Join(dir, "state", "coordinator.db")}
	if err := os.MkdirAll(e.fakeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.startBridge("127.0.0.1:0")
	e.bridgeAddr = strings.TrimPrefix(e.bridge.URL(), "http://")
	e.cl = client.New(e.bridge.URL())
	statusAddr := testutil.FreeAddr(t)
	e.statusURL = "http://" + statusAddr
	e.cfgPath = filepath.Join(dir, "coordinator.config.json")
	cfg := map[string]any{
		"bridge_url":       e.bridge.URL(),
		"status_addr":      statusAddr,
		"startup_mode":     "resume",
		"shutdown_grace_s": 5,
		"agents":           map[string]any{"alice": map[string]any{"command": []string{fake}}},
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(e.cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.stopBridge() })
	return e
}

// setConfig sets key of the coordinator config file at path, before the
// coordinator starts.
func setConfig(t testing.TB, path, key string, v any) { stack.SetConfig(t, path, key, v) }

func (e *coordEnv) startBridge(addr string) {
	e.t.Helper()
	b, err := startBridge(context.Background(), bridgeConfig{Addr: addr, DB: filepath.Join(e.dir, "bridge.db"),
		Humans: agentbridge.DefaultHumans, MaxBody: bridge.DefaultMaxBody, Open: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		e.t.Fatalf("start bridge: %v", err)
	}
	e.bridge = b
}

func (e *coordEnv) stopBridge() {
	if e.bridge == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.bridge.Close(ctx); err != nil {
		e.t.Errorf("close bridge: %v", err)
	}
	e.bridge = nil
}

// startCoordProc runs the coordinator binary and waits until its status
// API says it is following the log.
func (e *coordEnv) startCoordProc(bin string) *stack.Proc {
	e.t.Helper()
	p := stack.StartProc(e.t, "coordinator", e.coordCmd(bin))
	stack.WaitFollowing(e.t, e.statusURL, "the coordinator")
	return p
}

// startStandby runs a second coordinator on the env's config and state
// (a PostgreSQL ledger) and waits until it stands by for the lease.
func (e *coordEnv) startStandby(bin, name string) *stack.Proc {
	e.t.Helper()
	p := stack.StartProc(e.t, name, e.coordCmd(bin))
	testutil.WaitFor(e.t, 30*time.Second, "the "+name+" to stand by", func() bool {
		return strings.Contains(p.Stderr.String(), "standby")
	})
	return p
}

// coordCmd is the command of a coordinator of the env's config and state.
func (e *coordEnv) coordCmd(bin string) *exec.Cmd {
	cmd := exec.Command(bin, "coordinator", "--config", e.cfgPath, "--state", e.statePath, "--startup-mode", "resume")
	cmd.Env = append(os.Environ(), "FAKE_ADAPTER_DIR="+e.fakeDir, "BRIDGE_TOKEN=")
	return cmd
}

func (e *coordEnv) threadWithAlice() string {
	e.t.Helper()
	ctx := context.Background()
	th, err := e.cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "t"})
	if err != nil {
		e.t.Fatal(err)
	}
	inv, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": "alice", "profile": map[string]any{"client": "fake", "model": "m"}}})
	if _, err := e.cl.Append(ctx, th.ID, agentbridge.EventInput{Type: "control", From: "user", Content: inv}, ""); err != nil {
		e.t.Fatal(err)
	}
	return th.ID
}

func (e *coordEnv) say(thread, to, text string) agentbridge.Event {
	e.t.Helper()
	b, _ := json.Marshal(text)
	ev, err := e.cl.Append(context.Background(), thread, agentbridge.EventInput{From: "user", To: to, Content: b}, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

// startRun posts alice a message whose fake adapter sleeps for d and
// returns it once that adapter runs, for a test that stops or kills the
// coordinator mid-run.
func (e *coordEnv) startRun(thread, d string) agentbridge.Event {
	e.t.Helper()
	trig := e.say(thread, "alice", "fake:sleep="+d)
	testutil.WaitFor(e.t, 30*time.Second, "the adapter to start", func() bool { return e.runs(trig.ID) == 1 })
	return trig
}

// replies counts the events answering trigger, reading the bridge's
// database through whichever server is up.
func (e *coordEnv) replies(thread, trigger string) []agentbridge.Event {
	evs, err := e.cl.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		return nil
	}
	var out []agentbridge.Event
	for _, ev := range evs {
		if ev.Meta.ReplyTo == trigger {
			out = append(out, ev)
		}
	}
	return out
}

// runs counts the fake adapter's runs for a trigger.
func (e *coordEnv) runs(trigger string) int {
	b, _ := os.ReadFile(filepath.Join(e.fakeDir, "runs.log"))
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, trigger+" ") {
			n++
		}
	}
	return n
}

// invocationStatus asks the status API for the status of the trigger's
// invocation.
func (e *coordEnv) invocationStatus(trigger string) string {
	resp, err := http.Get(e.statusURL + "/invocations")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out status.InvocationsResponse
	if json.NewDecoder(resp.Body).Decode(&out) != nil {
		return ""
	}
	for _, inv := range out.Invocations {
		if inv.TriggerID == trigger {
			return inv.Status
		}
	}
	return ""
}

// TestCoordinatorKill9ResumeExactlyOnce kills the coordinator with SIGKILL
// while the adapter runs, restarts it with --startup-mode resume, and
// requires exactly one reply; then SIGTERM must exit 0.
func TestCoordinatorKill9ResumeExactlyOnce(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	e := newCoordEnv(t, fake)
	p := e.startCoordProc(bin)
	th := e.threadWithAlice()
	trig := e.startRun(th, "3s")
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Wait(t)
	if got := e.replies(th, trig.ID); len(got) != 0 {
		t.Fatalf("a reply appeared although the coordinator was killed: %+v", got)
	}
	p2 := e.startCoordProc(bin)
	testutil.WaitFor(t, 30*time.Second, "the re-run's reply", func() bool { return len(e.replies(th, trig.ID)) >= 1 })
	testutil.WaitFor(t, 30*time.Second, "the record to be succeeded", func() bool { return e.invocationStatus(trig.ID) == "succeeded" })
	if got := e.replies(th, trig.ID); len(got) != 1 || got[0].From != "alice" {
		t.Errorf("replies = %+v, want exactly one from alice", got)
	}
	if n := e.runs(trig.ID); n != 2 {
		t.Errorf("adapter ran %d times, want 2 (killed, then re-run)", n)
	}
	p2.Terminate(t)
}

// TestCoordinatorBridgeRestart stops the bridge while an adapter runs and
// starts it again on the same address: the reply is delivered once, and
// the coordinator catches up with what follows.
func TestCoordinatorBridgeRestart(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	e := newCoordEnv(t, fake)
	p := e.startCoordProc(bin)
	th := e.threadWithAlice()
	first := e.startRun(th, "1s")
	e.stopBridge()
	e.startBridge(e.bridgeAddr)
	testutil.WaitFor(t, 60*time.Second, "the reply after the bridge restart", func() bool { return len(e.replies(th, first.ID)) >= 1 })
	var later []agentbridge.Event
	for i := range 3 {
		later = append(later, e.say(th, "alice", fmt.Sprintf("after restart %d", i)))
	}
	for _, ev := range later {
		testutil.WaitFor(t, 30*time.Second, "a reply to "+ev.ID, func() bool { return len(e.replies(th, ev.ID)) >= 1 })
	}
	testutil.WaitFor(t, 30*time.Second, "every record final", func() bool {
		for _, ev := range append([]agentbridge.Event{first}, later...) {
			if e.invocationStatus(ev.ID) != "succeeded" {
				return false
			}
		}
		return true
	})
	for _, ev := range append([]agentbridge.Event{first}, later...) {
		if got := e.replies(th, ev.ID); len(got) != 1 {
			t.Errorf("%d replies to %q, want 1", len(got), ev.Text())
		}
		if n := e.runs(ev.ID); n != 1 {
			t.Errorf("adapter ran %d times for %q, want 1", n, ev.Text())
		}
	}
	p.Terminate(t)
}

// TestCoordinatorCommandInProcess runs `coordinator` through Main.Run and
// asks it with `why` and `invocations`, as a person would.
func TestCoordinatorCommandInProcess(t *testing.T) {
	fake := buildFake(t)
	e := newCoordEnv(t, fake)
	t.Setenv("FAKE_ADAPTER_DIR", e.fakeDir)
	var stderr testutil.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
	stop := runInProcess(t, m, "coordinator", "--config", e.cfgPath, "--state", e.statePath, "--log-level", "debug")
	testutil.WaitFor(t, 30*time.Second, "the coordinator to follow the log", func() bool {
		resp, err := http.Get(e.statusURL + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Following bool }
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Following
	})
	th := e.threadWithAlice()
	answered := e.say(th, "alice", "hello")
	ignored := e.say(th, "bob", "hello bob")
	testutil.WaitFor(t, 30*time.Second, "the reply", func() bool { return e.invocationStatus(answered.ID) == "succeeded" })

	run := func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		cm := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		code := exitCode(&errb, cm.Run(context.Background(), args))
		return out.String() + errb.String(), code
	}
	out, code := run("why", answered.ID, "--coordinator-url", e.statusURL)
	if code != 0 || !strings.Contains(out, "rule: to") || !strings.Contains(out, "alice (agent alice)") {
		t.Errorf("why (answered) = %d:\n%s", code, out)
	}
	out, code = run("why", ignored.ID, "--coordinator-url", e.statusURL)
	if code != 0 || !strings.Contains(out, "invoked: nobody") || !strings.Contains(out, "bob: not invited") {
		t.Errorf("why (ignored) = %d:\n%s", code, out)
	}
	out, code = run("why", "01NOSUCHEVENT", "--coordinator-url", e.statusURL)
	if code != 1 || !strings.Contains(out, "no decision") {
		t.Errorf("why (unknown) = %d:\n%s", code, out)
	}
	out, code = run("invocations", "--thread", th, "--coordinator-url", e.statusURL)
	if code != 0 || !strings.Contains(out, "succeeded") || !strings.Contains(out, answered.ID) {
		t.Errorf("invocations = %d:\n%s", code, out)
	}
	// The thread by its name, as the UI and thread list show it: the CLI
	// finds the bridge (BRIDGE_URL) and asks it for the id.
	var byName, byNameErr bytes.Buffer
	nameMain := &Main{Stdin: strings.NewReader(""), Stdout: &byName, Stderr: &byNameErr, Getenv: func(k string) string {
		return map[string]string{"BRIDGE_URL": e.bridge.URL(), "BRIDGE_COORDINATOR_URL": e.statusURL}[k]
	}}
	if code := exitCode(&byNameErr, nameMain.Run(context.Background(), []string{"invocations", "--thread", "t"})); code != 0 || !strings.Contains(byName.String(), answered.ID) {
		t.Errorf("invocations --thread by the thread's name = %d, want its runs:\n%s%s", code, byName.String(), byNameErr.String())
	}
	out, code = run("invocations", "--participant", "alice", "--coordinator-url", e.statusURL)
	if code != 0 || !strings.Contains(out, answered.ID) {
		t.Errorf("invocations --participant alice = %d:\n%s", code, out)
	}
	out, code = run("invocations", "--participant", "bob", "--coordinator-url", e.statusURL)
	if code != 0 || strings.TrimSpace(out) != "no invocations" {
		t.Errorf("invocations --participant bob = %d:\n%s", code, out)
	}
	// Without the flag, env BRIDGE_COORDINATOR_URL names the status API, as for serve.
	var envOut, envErr bytes.Buffer
	envMain := &Main{Stdin: strings.NewReader(""), Stdout: &envOut, Stderr: &envErr, Getenv: func(k string) string {
		if k == "BRIDGE_COORDINATOR_URL" {
			return e.statusURL
		}
		return ""
	}}
	if code := exitCode(&envErr, envMain.Run(context.Background(), []string{"invocations", "--thread", th})); code != 0 || !strings.Contains(envOut.String(), answered.ID) {
		t.Errorf("invocations with env BRIDGE_COORDINATOR_URL = %d:\n%s%s", code, envOut.String(), envErr.String())
	}
	out, code = run("invocations", "--status", "sideways", "--coordinator-url", e.statusURL)
	if code != 2 || !strings.Contains(out, "--status") {
		t.Errorf("invocations --status sideways = %d:\n%s", code, out)
	}
	if err := stop(); err != nil {
		t.Errorf("coordinator returned %v; stderr:\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Bearer") {
		t.Errorf("the log mentions a bearer token")
	}
}

// TestCoordinatorConfigErrors: a bad config or flag exits 2 with one line
// naming the key or flag.
func TestCoordinatorConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"startup_mode": "sideways"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A status API reachable from the network with no token to ask for.
	open := filepath.Join(dir, "open.json")
	if err := os.WriteFile(open, []byte(`{"status_addr": "0.0.0.0:0", "agents": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"coordinator", "--config", bad, "--state", filepath.Join(dir, "s.db")}, "startup_mode"},
		{[]string{"coordinator", "--config", bad, "--startup-mode", "later"}, "--startup-mode"},
		{[]string{"why"}, "event id"},
		{[]string{"coordinator", "--config", open, "--state", filepath.Join(dir, "s.db")}, "status_addr"},
		{[]string{"up", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "b.db"), "--config", open,
			"--state", filepath.Join(dir, "s.db")}, "config: status_addr"},
		// Given as a flag, the refusal names the flag, not a config key
		// the person never wrote.
		{[]string{"up", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "b.db"),
			"--state", filepath.Join(dir, "s.db"), "--status-addr", "0.0.0.0:0"}, "--status-addr: refusing"},
	} {
		var out, errb bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		code := exitCode(&errb, m.Run(context.Background(), tc.args))
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, code, errb.String(), tc.want)
		}
	}
	// up refused its status_addr before it started the bridge.
	if _, err := os.Stat(filepath.Join(dir, "b.db")); err == nil {
		t.Error("up created the bridge's database before refusing its status_addr")
	}
}

// TestUpCommand runs `up` in-process: it prints the UI URL, the bridge and
// the coordinator answer, and cancel stops both.
func TestUpCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "coordinator.config.json")
	if err := os.WriteFile(cfg, []byte(`{"status_addr": "127.0.0.1:0", "agents": {"echo": {"command": ["cat"]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr testutil.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	stop := runInProcess(t, m, "up", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "data", "bridge.db"),
		"--config", cfg, "--state", filepath.Join(dir, "data", "coordinator.db"))
	var uiURL, link string
	testutil.WaitFor(t, 30*time.Second, "up to print the UI URL", func() bool {
		for _, line := range strings.Split(stdout.String(), "\n") {
			if u, ok := strings.CutPrefix(line, "Open the UI at "); ok {
				uiURL, _, _ = strings.Cut(u, "/login#code=")
				link = u
				return true
			}
		}
		return false
	})
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s = %d", uiURL, resp.StatusCode)
	}
	// The UI links to the coordinator's dashboard at its real address.
	resp, err = http.Get(uiURL + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	var uiCfg struct {
		CoordinatorURL string `json:"coordinator_url"`
	}
	err = json.NewDecoder(resp.Body).Decode(&uiCfg)
	resp.Body.Close()
	if err != nil || !strings.HasPrefix(uiCfg.CoordinatorURL, "http://127.0.0.1:") || strings.HasSuffix(uiCfg.CoordinatorURL, ":5112") ||
		!strings.Contains(stdout.String(), "coordinator status "+uiCfg.CoordinatorURL) {
		t.Errorf("UI config names coordinator %q (%v); up printed:\n%s", uiCfg.CoordinatorURL, err, stdout.String())
	}
	if err := stop(); err != nil {
		t.Errorf("up returned %v; stderr:\n%s", err, stderr.String())
	}
}

// TestCoordinatorInterruptSaysWhatItWaitsFor sends SIGINT while an adapter
// runs: the coordinator says how many runs it waits for and that a second
// Ctrl-C stops them at once, lets the run finish (its reply is posted) and
// exits 0.
func TestCoordinatorInterruptSaysWhatItWaitsFor(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	e := newCoordEnv(t, fake)
	p := e.startCoordProc(bin)
	th := e.threadWithAlice()
	trig := e.startRun(th, "2s")
	if err := p.Cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t); code != 0 {
		t.Errorf("exit code after SIGINT = %d, want 0; stderr:\n%s", code, p.Stderr.String())
	}
	if !strings.Contains(p.Stderr.String(), "for 1 running adapter(s) to finish; a second Ctrl-C (or SIGTERM) stops them at once") {
		t.Errorf("the first Ctrl-C did not say what it waits for; stderr:\n%s", p.Stderr.String())
	}
	if got := e.replies(th, trig.ID); len(got) != 1 {
		t.Errorf("replies = %+v, want the finished run's one", got)
	}
}
