package adapters_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// testPayload builds a realistic payload whose message content steers the
// fake adapter.
func testPayload(t testing.TB, content string) (adapters.Payload, []byte) {
	t.Helper()
	trigger := agentbridge.Event{
		ID: "01JD3Q6Y7M8K9N0P1Q2R3S4T5V", Seq: 7, GSeq: 93, TS: "2026-11-21T10:00:00.123456Z",
		Thread: "t1", Type: agentbridge.TypeMessage, From: "user", To: "codex",
		Content: mustJSON(t, content),
	}
	p := adapters.NewPayload("http://127.0.0.1:5111",
		agentbridge.Thread{ID: "t1", Name: "design"}, trigger, "codex",
		agentbridge.Profile{Client: "codex", Model: "gpt-5"}, []agentbridge.Event{trigger}, "primer text")
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, b
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runFake runs the fake adapter with FAKE_ADAPTER_DIR set to a fresh
// directory, which it returns.
func runFake(t *testing.T, ctx context.Context, content string, spec adapters.Spec) (adapters.Result, string) {
	t.Helper()
	dir := t.TempDir()
	p, b := testPayload(t, content)
	spec.Command = []string{fakePath}
	spec.Env = append(append(spec.Env, "FAKE_ADAPTER_DIR="+dir), adapters.BridgeEnv(p)...)
	return adapters.Run(ctx, spec, b, nil), dir
}

// alive reports whether pid is a live process (a zombie counts as dead: in
// a container nobody may reap an orphan).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	if runtime.GOOS != "linux" {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("grandchild pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestRunReplyAndPayloadIntact(t *testing.T) {
	dir := t.TempDir()
	p, b := testPayload(t, "hello there")
	var gotPID, gotPGID int
	res := adapters.Run(context.Background(), adapters.Spec{
		Command: []string{fakePath},
		Env:     append([]string{"FAKE_ADAPTER_DIR=" + dir}, adapters.BridgeEnv(p)...),
	}, b, func(pid, pgid int) { gotPID, gotPGID = pid, pgid })
	if !res.OK() {
		t.Fatalf("not OK: %+v (%s)", res, adapters.ErrorMessage(res, 0))
	}
	if got, want := string(res.Stdout), "codex got: hello there"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if gotPID == 0 || gotPID != res.PID || gotPGID != res.PGID || res.PGID != res.PID {
		t.Errorf("onStart got pid %d pgid %d, result pid %d pgid %d", gotPID, gotPGID, res.PID, res.PGID)
	}
	saved, err := os.ReadFile(filepath.Join(dir, p.EventID+"-codex.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(saved, b) {
		t.Errorf("payload received differs from payload sent:\n got %s\nwant %s", saved, b)
	}
	log, err := os.ReadFile(filepath.Join(dir, "runs.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := p.EventID + " codex " + strconv.Itoa(res.PID) + " 0\n"; string(log) != want {
		t.Errorf("runs.log = %q, want %q", log, want)
	}
	if res.Finished.Before(res.Started) {
		t.Errorf("finished %v before started %v", res.Finished, res.Started)
	}
}

func TestRunEnvAndDir(t *testing.T) {
	t.Setenv("ADAPTER_TEST_INHERITED", "from-coordinator")
	t.Setenv("ADAPTER_TEST_OVERRIDDEN", "from-coordinator")
	dir := t.TempDir()
	p, b := testPayload(t, "hi")
	env := []string{"ADAPTER_TEST_OVERRIDDEN=from-entry", "BRIDGE_URL=http://entry.invalid"}
	env = append(env, adapters.BridgeEnv(p)...)
	res := adapters.Run(context.Background(), adapters.Spec{
		Command: []string{"/bin/sh", "-c", `printf '%s\n' "$ADAPTER_TEST_INHERITED" "$ADAPTER_TEST_OVERRIDDEN" "$BRIDGE_URL" "$BRIDGE_THREAD_ID" "$BRIDGE_EVENT_ID" "$BRIDGE_PARTICIPANT_ID" "$(pwd -P)"`},
		Dir:     dir,
		Env:     env,
	}, b, nil)
	if !res.OK() {
		t.Fatalf("not OK: %s", adapters.ErrorMessage(res, 0))
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{"from-coordinator", "from-entry", "http://127.0.0.1:5111", "t1", p.EventID, "codex", realDir}, "\n") + "\n"
	if string(res.Stdout) != want {
		t.Errorf("adapter saw\n%s\nwant\n%s", res.Stdout, want)
	}
}

// The coordinator's credentials stay out of what an adapter inherits:
// BRIDGE_TOKEN, and any variable holding the coordinator's token under
// another name; the run's own token, given in Env, is what it sees.
func TestRunInheritsNoCredential(t *testing.T) {
	t.Setenv("BRIDGE_TOKEN", "coordinator-secret")
	t.Setenv("ADAPTER_TEST_COPY", " coordinator-secret\n")
	t.Setenv("ADAPTER_TEST_INHERITED", "from-coordinator")
	_, b := testPayload(t, "hi")
	res := adapters.Run(context.Background(), adapters.Spec{
		Command: []string{"/bin/sh", "-c", `env | grep -e coordinator-secret -e BRIDGE_TOKEN -e ADAPTER_TEST_ | sort`},
		Env:     []string{"BRIDGE_TOKEN=run-token"},
		Secrets: []string{"coordinator-secret"},
	}, b, nil)
	if !res.OK() {
		t.Fatalf("not OK: %s", adapters.ErrorMessage(res, 0))
	}
	if want := "ADAPTER_TEST_INHERITED=from-coordinator\nBRIDGE_TOKEN=run-token\n"; string(res.Stdout) != want {
		t.Errorf("adapter saw\n%s\nwant\n%s", res.Stdout, want)
	}
}

func TestRunExitCodeAndStderr(t *testing.T) {
	res, _ := runFake(t, context.Background(), "fake:exit=3 fake:stderr=something_broke", adapters.Spec{})
	if res.OK() || res.ExitCode != 3 || res.Signaled || res.TimedOut || res.Interrupted || res.StartErr != nil {
		t.Fatalf("result = %+v, want exit code 3 only", res)
	}
	if !strings.Contains(string(res.Stdout), "codex got:") {
		t.Errorf("stdout %q lacks the reply printed before exiting", res.Stdout)
	}
	if got := string(res.StderrTail); got != "something broke\n" {
		t.Errorf("stderr tail = %q", got)
	}
	msg := adapters.ErrorMessage(res, time.Minute)
	if !strings.Contains(msg, "exited with code 3") || !strings.Contains(msg, "something broke") {
		t.Errorf("error message %q lacks the code or the stderr", msg)
	}
}

func TestRunStartFailure(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "adapter.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		spec    adapters.Spec
		wantErr error
	}{
		{"missing binary", adapters.Spec{Command: []string{filepath.Join(dir, "nope")}}, fs.ErrNotExist},
		{"missing on PATH", adapters.Spec{Command: []string{"agent-bridge-no-such-adapter"}}, exec.ErrNotFound},
		{"not executable", adapters.Spec{Command: []string{notExec}}, fs.ErrPermission},
		{"bad working dir", adapters.Spec{Command: []string{"/bin/sh", "-c", "true"}, Dir: filepath.Join(dir, "missing")}, fs.ErrNotExist},
		{"empty command", adapters.Spec{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			res := adapters.Run(context.Background(), tt.spec, []byte("{}"), func(int, int) { called = true })
			if res.StartErr == nil || res.OK() {
				t.Fatalf("StartErr = nil, result %+v", res)
			}
			if tt.wantErr != nil && !errors.Is(res.StartErr, tt.wantErr) {
				t.Errorf("StartErr = %v, want one wrapping %v", res.StartErr, tt.wantErr)
			}
			if called || res.PID != 0 || res.ExitCode != -1 {
				t.Errorf("onStart called %v, pid %d, exit %d", called, res.PID, res.ExitCode)
			}
			if msg := adapters.ErrorMessage(res, 0); !strings.Contains(msg, "could not be started") {
				t.Errorf("error message %q", msg)
			}
		})
	}
}

func TestRunTimeoutKillsGroupWithGrandchild(t *testing.T) {
	res, dir := runFake(t, context.Background(), "fake:child", adapters.Spec{Timeout: 2 * time.Second, KillGrace: 5 * time.Second})
	if !res.TimedOut || res.Interrupted || res.OK() {
		t.Fatalf("result = %+v, want timed out", res)
	}
	if !res.Signaled || res.Signal != syscall.SIGTERM {
		t.Errorf("signaled %v by %v, want SIGTERM (the fake does not ignore it)", res.Signaled, res.Signal)
	}
	pid := readPID(t, filepath.Join(dir, "01JD3Q6Y7M8K9N0P1Q2R3S4T5V.child"))
	testutil.WaitFor(t, 10*time.Second, "the grandchild to be killed", func() bool { return !alive(pid) })
	if msg := adapters.ErrorMessage(res, 2*time.Second); !strings.Contains(msg, "did not finish within 2s") {
		t.Errorf("error message %q", msg)
	}
}

func TestRunIgnoreTermEscalatesToKill(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	p, b := testPayload(t, "fake:ignoreterm fake:child")
	done := make(chan adapters.Result, 1)
	go func() {
		done <- adapters.Run(ctx, adapters.Spec{
			Command:   []string{fakePath},
			Env:       append([]string{"FAKE_ADAPTER_DIR=" + dir}, adapters.BridgeEnv(p)...),
			KillGrace: 300 * time.Millisecond,
		}, b, nil)
	}()
	childFile := filepath.Join(dir, p.EventID+".child")
	testutil.WaitFor(t, 10*time.Second, "the fake to start its grandchild", func() bool {
		_, err := os.Stat(childFile)
		return err == nil
	})
	pid := readPID(t, childFile)
	cancel()
	res := <-done
	if !res.Interrupted || res.TimedOut {
		t.Fatalf("result = %+v, want interrupted", res)
	}
	if !res.Signaled || res.Signal != syscall.SIGKILL {
		t.Errorf("signaled %v by %v, want SIGKILL after SIGTERM was ignored", res.Signaled, res.Signal)
	}
	testutil.WaitFor(t, 10*time.Second, "the grandchild that ignores SIGTERM to be killed", func() bool { return !alive(pid) })
}

func TestRunCancelInterrupts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, b := testPayload(t, "fake:hang")
	res := adapters.Run(ctx, adapters.Spec{Command: []string{fakePath}, Env: adapters.BridgeEnv(p)}, b,
		func(int, int) { cancel() })
	if !res.Interrupted || res.TimedOut || res.OK() {
		t.Fatalf("result = %+v, want interrupted", res)
	}
	if msg := adapters.ErrorMessage(res, 0); !strings.Contains(msg, "interrupted") {
		t.Errorf("error message %q", msg)
	}
	// A context already done starts nothing.
	res = adapters.Run(ctx, adapters.Spec{Command: []string{fakePath}}, b, nil)
	if !res.Interrupted || res.PID != 0 {
		t.Errorf("after cancel: result = %+v, want interrupted without a start", res)
	}
}

func TestRunExitLeavesNoGrandchild(t *testing.T) {
	// The adapter exits at once but leaves a background process holding
	// its stdout: Run must return, and the leftover must die.
	res := adapters.Run(context.Background(), adapters.Spec{
		Command: []string{"/bin/sh", "-c", "sleep 1000 & echo $!"},
	}, []byte("{}"), nil)
	if !res.OK() {
		t.Fatalf("not OK: %s", adapters.ErrorMessage(res, 0))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("stdout %q: %v", res.Stdout, err)
	}
	testutil.WaitFor(t, 10*time.Second, "the background sleep to be killed", func() bool { return !alive(pid) })
}

func TestRunStdoutCapped(t *testing.T) {
	const total = 10 << 20
	res, _ := runFake(t, context.Background(), "fake:big="+strconv.Itoa(total), adapters.Spec{})
	if !res.OK() {
		t.Fatalf("not OK: %s", adapters.ErrorMessage(res, 0))
	}
	if res.StdoutBytes != total || !res.StdoutTruncated {
		t.Errorf("StdoutBytes = %d, truncated %v; want %d, true", res.StdoutBytes, res.StdoutTruncated, total)
	}
	if len(res.Stdout) != adapters.DefaultMaxStdout || cap(res.Stdout) != adapters.DefaultMaxStdout {
		t.Errorf("kept %d bytes (cap %d), want exactly %d", len(res.Stdout), cap(res.Stdout), adapters.DefaultMaxStdout)
	}

	res, _ = runFake(t, context.Background(), "fake:big=5000", adapters.Spec{MaxStdout: 1000})
	if len(res.Stdout) != 1000 || res.StdoutBytes != 5000 || !res.StdoutTruncated {
		t.Errorf("small cap: kept %d of %d, truncated %v", len(res.Stdout), res.StdoutBytes, res.StdoutTruncated)
	}
	res, _ = runFake(t, context.Background(), "fake:big=1000", adapters.Spec{MaxStdout: 1000})
	if len(res.Stdout) != 1000 || res.StdoutTruncated {
		t.Errorf("output at the cap: kept %d, truncated %v", len(res.Stdout), res.StdoutTruncated)
	}
}

func TestRunStderrTail(t *testing.T) {
	long := "fake:stderr=" + strings.Repeat("a", 20000) + "THE_END"
	res, _ := runFake(t, context.Background(), long+" fake:exit=1", adapters.Spec{})
	if len(res.StderrTail) != adapters.DefaultMaxStderr {
		t.Fatalf("stderr tail is %d bytes, want %d", len(res.StderrTail), adapters.DefaultMaxStderr)
	}
	if !strings.HasSuffix(string(res.StderrTail), "aaaTHE END\n") {
		t.Errorf("stderr tail ends with %q", res.StderrTail[len(res.StderrTail)-20:])
	}
	res, _ = runFake(t, context.Background(), long, adapters.Spec{MaxStderr: 10})
	if got := string(res.StderrTail); got != "aaTHE END\n" {
		t.Errorf("10-byte tail = %q", got)
	}
}

func TestRunAdapterIgnoresStdin(t *testing.T) {
	// A payload larger than a pipe buffer, to an adapter that never reads.
	big := bytes.Repeat([]byte("x"), 4<<20)
	res := adapters.Run(context.Background(), adapters.Spec{Command: []string{"/bin/sh", "-c", "echo ignored"}}, big, nil)
	if !res.OK() || string(res.Stdout) != "ignored\n" {
		t.Fatalf("result = %+v (%s)", res, adapters.ErrorMessage(res, 0))
	}
}

func TestKillGroup(t *testing.T) {
	start := func() (*exec.Cmd, chan struct{}) {
		cmd := exec.Command("/bin/sh", "-c", "sleep 1000 & wait")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done })
		return cmd, done
	}
	exited := func(done chan struct{}) bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}

	cmd, done := start()
	started := time.Now()
	if err := adapters.KillGroup(cmd.Process.Pid, started); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the group to die", func() bool { return exited(done) })

	if err := adapters.KillGroup(cmd.Process.Pid, started); err != nil {
		t.Errorf("killing a group that is gone: %v", err)
	}
	if err := adapters.KillGroup(0, started); err == nil {
		t.Errorf("pgid 0 accepted")
	}

	// A recorded start an hour away means the id now names another
	// process: nothing is killed (checked on Linux only, see KillGroup).
	if runtime.GOOS != "linux" {
		return
	}
	cmd, done = start()
	if err := adapters.KillGroup(cmd.Process.Pid, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !alive(cmd.Process.Pid) || exited(done) {
		t.Fatalf("a group with another start time was killed")
	}
}

func TestAdapterDiesWithCoordinator(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signal is Linux only")
	}
	dir := t.TempDir()
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), parentHelperEnv+"="+fakePath, "FAKE_ADAPTER_DIR="+dir)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	parentDone := make(chan struct{})
	go func() { _ = parent.Wait(); close(parentDone) }()
	defer func() { _ = parent.Process.Kill(); <-parentDone }()

	childFile := filepath.Join(dir, "ev1.child")
	testutil.WaitFor(t, 10*time.Second, "the adapter to start its grandchild", func() bool {
		_, err := os.Stat(childFile)
		return err == nil
	})
	grandchild := readPID(t, childFile)
	fields := strings.Fields(readLogFile(t, filepath.Join(dir, "runs.log")))
	adapterPID, err := strconv.Atoi(fields[2])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-adapterPID, syscall.SIGKILL) })

	// kill -9 of the "coordinator": the adapter gets its parent-death
	// signal; its grandchild survives, orphaned, in the adapter's group.
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the adapter to die with its parent", func() bool { return !alive(adapterPID) })
	if !alive(grandchild) {
		t.Fatalf("the grandchild died too; this test no longer exercises start-up reaping")
	}
	// A restarted coordinator reaps the group from its ledger.
	if err := adapters.KillGroup(adapterPID, started); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the orphaned grandchild to be reaped by KillGroup", func() bool { return !alive(grandchild) })
}

func readLogFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRunEscapedProcessDoesNotHoldRun(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	// The adapter starts a process in a new session (out of its group,
	// beyond the group kill) that keeps stdout open: Run stops draining
	// after a bounded wait and returns what was printed.
	// The adapter waits until the escaped process has its new session.
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	script := `setsid /bin/sh -c 'echo $$ > "$0"; exec sleep 1000' "$1" &
while [ ! -s "$1" ]; do :; done
cat "$1"`
	res := adapters.Run(context.Background(), adapters.Spec{
		Command: []string{"/bin/sh", "-c", script, "sh", pidFile},
	}, []byte("{}"), nil)
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("stdout %q: %v", res.Stdout, err)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
	if !res.OK() {
		t.Fatalf("not OK: %s", adapters.ErrorMessage(res, 0))
	}
	if !alive(pid) {
		t.Fatalf("the escaped process %d is gone; this test no longer exercises the bounded drain", pid)
	}
}

// Adapter output is stored as a reply: NUL and the C0 controls but newline
// and tab never reach it (contract 6.2), whatever the adapter printed.
func TestRunStripsControlCharacters(t *testing.T) {
	res, _ := runFake(t, context.Background(), "a\x00b\x1b]0;PWNED\x07\x1b[2Jc\r\nd\te\x7f", adapters.Spec{})
	if !res.OK() {
		t.Fatalf("not OK: %+v", res)
	}
	if got, want := string(res.Stdout), "codex got: ab]0;PWNED[2Jc\nd\te\x7f"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
}

// A person token exported under another name stays out too: a copy of
// BRIDGE_TOKEN's value, the state folder's token file (BRIDGE_DB's
// folder) and the token file of a running up (its runtime file) are found
// the way the CLI finds them, whatever the variable holding them is
// called; BRIDGE_TOKEN=none (an agent without a token) leaves out nothing.
func TestRunInheritsNoPersonToken(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("state-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	upToken := filepath.Join(dir, "up.token")
	if err := os.WriteFile(upToken, []byte("up-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	runDir := t.TempDir()
	if err := client.WriteRuntime(client.RuntimePath(func(string) string { return runDir }), client.Runtime{PID: os.Getpid(), TokenFile: upToken}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", runDir)
	t.Setenv("BRIDGE_DB", filepath.Join(dir, "bridge.db"))
	t.Setenv("BRIDGE_TOKEN", "person-secret")
	t.Setenv("MY_BRIDGE", "person-secret")
	t.Setenv("AGENT_BRIDGE_TOKEN", "state-secret")
	t.Setenv("ADAPTER_TEST_UP", "up-secret")
	t.Setenv("ADAPTER_TEST_INHERITED", "from-coordinator")
	_, b := testPayload(t, "hi")
	spec := adapters.Spec{
		Command: []string{"/bin/sh", "-c", `env | grep -e secret -e none -e BRIDGE_TOKEN -e ADAPTER_TEST_ | sort`},
		Env:     []string{"BRIDGE_TOKEN=run-token"},
	}
	res := adapters.Run(context.Background(), spec, b, nil)
	if !res.OK() {
		t.Fatalf("not OK: %s", adapters.ErrorMessage(res, 0))
	}
	if want := "ADAPTER_TEST_INHERITED=from-coordinator\nBRIDGE_TOKEN=run-token\n"; string(res.Stdout) != want {
		t.Errorf("adapter saw\n%s\nwant\n%s", res.Stdout, want)
	}
	t.Setenv("BRIDGE_TOKEN", adapters.NoToken)
	t.Setenv("ADAPTER_TEST_INHERITED", adapters.NoToken)
	res = adapters.Run(context.Background(), spec, b, nil)
	if want := "ADAPTER_TEST_INHERITED=none\nBRIDGE_TOKEN=run-token\nMY_BRIDGE=person-secret\n"; string(res.Stdout) != want {
		t.Errorf("with BRIDGE_TOKEN=none the adapter saw\n%s\nwant\n%s", res.Stdout, want)
	}
}
