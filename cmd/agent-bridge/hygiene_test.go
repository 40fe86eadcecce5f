package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// hostile is a message that, printed raw, retitles the terminal (OSC 0)
// and clears it (CSI 2J), with a C1 CSI and a carriage return for good
// measure.
const hostile = "\u001b]0;PWNED\u0007\u001b[2J and \u009b31m red\r over"

// TestTailEscapesControls posts a message full of terminal controls and
// checks that tail shows every one as a visible escape, that no control
// byte reaches stdout, and that --json still carries the content exactly.
func TestTailEscapesControls(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "t", "--id", "T")
	c.ok("post", "T", hostile)

	var out, errb testutil.Buffer
	stop := runTailAsync(t, c.env, &out, &errb, "T")
	testutil.WaitFor(t, 20*time.Second, "tail to print the message", func() bool { return strings.Contains(out.String(), "over") })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{`\x1b]0;PWNED\x07\x1b[2J`, `\u009b31m red\x0d over`} {
		if !strings.Contains(got, want) {
			t.Errorf("tail output lacks %q:\n%s", want, got)
		}
	}
	if hasControl(got) {
		t.Errorf("tail wrote a control character: %q", got)
	}

	var jout, jerr testutil.Buffer
	stop = runTailAsync(t, c.env, &jout, &jerr, "T", "--json")
	testutil.WaitFor(t, 20*time.Second, "tail --json to print the message", func() bool { return strings.Contains(jout.String(), "over") })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(jout.String()), "\n") {
		var e agentbridge.Event
		if err := jsonUnmarshal(line, &e); err != nil {
			t.Fatalf("tail --json line %q: %v", line, err)
		}
		found = found || e.Text() == hostile
	}
	if !found {
		t.Errorf("tail --json did not carry the content unchanged:\n%s", jout.String())
	}

	// The other text outputs go through the same writer.
	c.ok("thread", "rename", "T", "\u001b[2Jnamed")
	if out := c.ok("thread", "list"); hasControl(out) || !strings.Contains(out, `\x1b[2Jnamed`) {
		t.Errorf("thread list = %q; want the name escaped", out)
	}
}

// hasControl reports a control character other than newline and tab.
func hasControl(s string) bool {
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}

// TestEscaper checks the escaping writer byte by byte, including a UTF-8
// sequence split across two writes and bytes that are not UTF-8.
func TestEscaper(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := newEscaper(&buf)
	for _, p := range [][]byte{[]byte("a\tb\nc\x00d\x7fé "), {0xc2}, {0x9b, 'x', ' ', 0xff, ' '}, []byte("→ ok")} {
		if n, err := w.Write(p); err != nil || n != len(p) {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if got, want := buf.String(), "a\tb\nc\\x00d\\x7fé \\u009bx \\xff → ok"; got != want {
		t.Errorf("escaped %q, want %q", got, want)
	}
}

// TestMaskURL checks that database URLs lose their secrets in messages and
// logs, and that everything else is left as it is.
func TestMaskURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://user:secret@db:5432/ab?sslmode=disable":    "postgres://user:xxxxx@db:5432/ab?sslmode=disable",
		"postgresql://user@db/ab?password=secret&sslmode=none": "postgresql://user@db/ab?password=xxxxx&sslmode=none",
		"postgres://db/ab": "postgres://db/ab",
		"./data/bridge.db": "./data/bridge.db",
	} {
		if got := maskURL(in); got != want {
			t.Errorf("maskURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestServeLogsNoPassword starts serve on an unreachable PostgreSQL URL
// with a password: neither its log nor its error may show the password.
func TestServeLogsNoPassword(t *testing.T) {
	t.Parallel()
	var stdout, stderr testutil.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	err := m.Run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--db", "postgres://ab:hunter2@127.0.0.1:1/ab?connect_timeout=1"})
	code := exitCode(&stderr, err)
	if code == 0 {
		t.Fatal("serve started on an unreachable database")
	}
	if strings.Contains(stderr.String(), "hunter2") || strings.Contains(stdout.String(), "hunter2") {
		t.Errorf("the password reached the output:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "xxxxx") {
		t.Errorf("the error does not name the (masked) URL:\n%s", stderr.String())
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// TestDiscoveryOrder checks where a command sends its requests: the flag,
// then the environment, then a running up's runtime file, then the
// default.
func TestDiscoveryOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := map[string]string{"XDG_RUNTIME_DIR": dir}
	m := &Main{Getenv: func(k string) string { return env[k] }}
	if got := m.bridgeEndpoint("", false).url; got != agentbridge.DefaultBridgeURL {
		t.Errorf("nothing set: %q", got)
	}
	rt := client.Runtime{PID: os.Getpid(), BridgeURL: "http://127.0.0.1:18301", StatusURL: "http://127.0.0.1:18302", TokenFile: "/t"}
	if err := client.WriteRuntime(client.RuntimePath(m.Getenv), rt); err != nil {
		t.Fatal(err)
	}
	if got := m.bridgeEndpoint("", false); got.url != rt.BridgeURL || got.tokenFile != "/t" {
		t.Errorf("runtime file: %+v", got)
	}
	if got := m.statusURL("", false); got != rt.StatusURL {
		t.Errorf("runtime file status URL: %q", got)
	}
	env[agentbridge.EnvBridgeURL], env[agentbridge.EnvCoordinatorURL] = "http://127.0.0.1:1", "http://127.0.0.1:2"
	if got := m.bridgeEndpoint("", false); got.url != "http://127.0.0.1:1" || got.tokenFile != "" {
		t.Errorf("environment: %+v", got)
	}
	if got := m.statusURL("", false); got != "http://127.0.0.1:2" {
		t.Errorf("environment status URL: %q", got)
	}
	if got := m.bridgeEndpoint("http://127.0.0.1:3", true).url; got != "http://127.0.0.1:3" {
		t.Errorf("flag: %q", got)
	}
}

// TestUnwritableDB checks that a --db whose folder cannot be made is named
// as the mistake it is.
func TestUnwritableDB(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := cli{t: t, env: map[string]string{}}
	_, errOut, code := c.run("serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(file, "bridge.db"))
	if code != 2 || !strings.Contains(errOut, "--db: cannot create the folder") {
		t.Errorf("serve with a --db below a file: exit %d, stderr %q", code, errOut)
	}
}

// TestSecondUpSameData checks that up refuses to share a running up's
// databases: two coordinators on one log would answer everything twice.
func TestSecondUpSameData(t *testing.T) {
	t.Parallel()
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	dir := t.TempDir()
	env := map[string]string{"XDG_RUNTIME_DIR": dir}
	db, _ := filepath.Abs(filepath.Join(dir, "data", "bridge.db"))
	rt := client.Runtime{PID: other.Process.Pid, Dir: dir, DB: db, State: filepath.Join(dir, "data", "coordinator.db"), BridgeURL: "http://127.0.0.1:18301"}
	if err := client.WriteRuntime(client.RuntimePath(func(k string) string { return env[k] }), rt); err != nil {
		t.Fatal(err)
	}
	c := cli{t: t, env: env}
	_, errOut, code := c.run("up", "--addr", "127.0.0.1:0", "--status-addr", "127.0.0.1:0", "--db", db, "--state", filepath.Join(dir, "other.db"))
	if code != 2 || !strings.Contains(errOut, "another agent-bridge up") {
		t.Errorf("a second up on the same database: exit %d, stderr %q", code, errOut)
	}
}

// TestUpTokenFileDiscovered runs up in-process with --token-file and
// --humans: a command with no flag and no environment finds it through the
// runtime file, token included, and the bridge counts the given humans.
func TestUpTokenFileDiscovered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"XDG_RUNTIME_DIR": dir}
	var stdout, stderr testutil.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return env[k] }}
	// A named config that does not exist is refused before anything starts.
	c := cli{t: t, env: env}
	if _, errOut, code := c.run("up", "--addr", "127.0.0.1:0", "--config", filepath.Join(dir, "none.json")); code != 2 || !strings.Contains(errOut, "does not exist") {
		t.Fatalf("up --config none.json: exit %d, stderr %q; want 2", code, errOut)
	}
	runInProcess(t, m, "up", "--addr", "127.0.0.1:0", "--status-addr", "127.0.0.1:0", "--token-file", tokenFile, "--humans", "alice,user",
		"--db", filepath.Join(dir, "data", "bridge.db"), "--state", filepath.Join(dir, "data", "coordinator.db"))
	testutil.WaitFor(t, 30*time.Second, "up to say it is up", func() bool { return strings.Contains(stdout.String(), "agent-bridge is up") })
	c.ok("thread", "new", "t", "--id", "T")
	if _, errOut, code := c.run("pause", "T", "on", "--from", "alice"); code != 0 || errOut != "" {
		t.Errorf("pause from alice (a human by --humans): exit %d, stderr %q", code, errOut)
	}
	if _, _, code := c.run("thread", "list", "--token-file", filepath.Join(dir, "none")); code != 2 {
		t.Errorf("an explicit unreadable --token-file: exit %d, want 2", code)
	}
}

// TestAgentsCommand checks that agents lists a config's agents with their
// commands, and refuses a named config that does not exist.
func TestAgentsCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := cli{t: t, env: map[string]string{}}
	if _, errOut, code := c.run("agents", "--config", filepath.Join(dir, "x.json")); code != 2 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("agents with a named config that does not exist: exit %d, stderr %q", code, errOut)
	}
	// Named by the environment, as up and doctor see it: the same refusal,
	// not the built-in defaults.
	byEnv := cli{t: t, env: map[string]string{agentbridge.EnvCoordinatorConfig: filepath.Join(dir, "x.json")}}
	if _, errOut, code := byEnv.run("agents"); code != 2 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("agents with env BRIDGE_COORDINATOR_CONFIG naming a file that does not exist: exit %d, stderr %q", code, errOut)
	}
	cfg := filepath.Join(dir, "c.json")
	if err := os.WriteFile(cfg, []byte(`{"agents": {"codex": {"command": ["./codex.sh"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("agents", "--config", cfg); !strings.Contains(out, "codex") || !strings.Contains(out, "codex.sh") {
		t.Errorf("agents --config c.json:\n%s", out)
	}
	if out := c.ok("agents", "--config", cfg, "--json"); !strings.HasPrefix(out, `{"codex":`) || strings.Count(out, "\n") != 1 {
		t.Errorf("agents --json:\n%s", out)
	}
}

// TestCoordinatorBesideUpWarns starts a coordinator against the bridge a
// running up serves: it must say that both will answer.
func TestCoordinatorBesideUpWarns(t *testing.T) {
	t.Parallel()
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	dir := t.TempDir()
	env := map[string]string{"XDG_RUNTIME_DIR": dir}
	bridgeURL := "http://" + testutil.FreeAddr(t)
	rt := client.Runtime{PID: other.Process.Pid, BridgeURL: bridgeURL, State: "/elsewhere/coordinator.db"}
	if err := client.WriteRuntime(client.RuntimePath(func(k string) string { return env[k] }), rt); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "c.json")
	if err := os.WriteFile(cfg, []byte(`{"bridge_url": "`+bridgeURL+`", "status_addr": "", "agents": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr testutil.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return env[k] }}
	stop := runInProcess(t, m, "coordinator", "--config", cfg, "--state", filepath.Join(dir, "c.db"))
	testutil.WaitFor(t, 20*time.Second, "the warning", func() bool {
		return strings.Contains(stderr.String(), "an agent-bridge up already runs a coordinator against this bridge")
	})
	_ = stop()
}
