package stack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// Machine is one `agent-bridge coordinator` standing in for a machine: its
// own HOME, config, ledger, status port, coordinator token and fake
// adapter folder, started and stopped as a process.
type Machine struct {
	t testing.TB
	// ID is the coordinator_id (and host) of its config.
	ID string
	// Dir holds its config, HOME, ledger and fake adapter folder.
	Dir string
	// ConfigPath is its config file.
	ConfigPath string
	// StatusURL is its status API.
	StatusURL string
	// FakeDir is FAKE_ADAPTER_DIR: the fake adapter's payloads and runs.log.
	FakeDir string
	// Token is its coordinator token, in its config.
	Token string
	// State is the --state ledger: Dir/state/coordinator.db unless set
	// (a PostgreSQL ledger several machines share).
	State string
	// Bin is the agent-bridge binary Start runs.
	Bin string
	// Proc is the running process, since the last Start.
	Proc *Proc
}

// NewMachine writes the config of coordinator id (host id) against the
// bridge at bridgeURL, with a coordinator token of its own made by person
// (contract 7.3), serving each of agents with the fake adapter at fake;
// Start runs bin. Set changes the config before Start.
func NewMachine(t testing.TB, person *client.Client, bridgeURL, bin, fake, id string, agents ...string) *Machine {
	t.Helper()
	tok, err := person.CreateToken(context.Background(), agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: id})
	if err != nil {
		t.Fatalf("coordinator token for %s: %v", id, err)
	}
	dir := t.TempDir()
	m := &Machine{t: t, ID: id, Bin: bin, Token: tok.Secret, Dir: dir, ConfigPath: filepath.Join(dir, "coordinator.config.json"), FakeDir: filepath.Join(dir, "fake")}
	for _, d := range []string{m.FakeDir, filepath.Join(dir, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	addr := testutil.FreeAddr(t)
	m.StatusURL = "http://" + addr
	b, _ := json.Marshal(map[string]any{
		"bridge_url": bridgeURL, "bridge_token": tok.Secret, "coordinator_id": id, "host": id, "status_addr": addr,
		"startup_mode": "resume", "shutdown_grace_s": 2, "claim_ttl_s": 3, "agents": FakeAgents(fake, agents...),
	})
	if err := os.WriteFile(m.ConfigPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}

// FakeAgents is the config's agents map with each of agents running the
// fake adapter at fake.
func FakeAgents(fake string, agents ...string) map[string]any {
	entries := map[string]any{}
	for _, a := range agents {
		entries[a] = map[string]any{"command": []string{fake}}
	}
	return entries
}

// Set sets key of the machine's config; before Start, or for a reload.
func (m *Machine) Set(key string, v any) {
	m.t.Helper()
	SetConfig(m.t, m.ConfigPath, key, v)
}

// SetConfig sets key of the JSON config file at path, written whole in
// one rename so that a coordinator watching it never reads half of it.
func SetConfig(t testing.TB, path, key string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg[key] = v
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Start runs `agent-bridge coordinator` for the machine and waits until it
// follows the log. It is killed when the test ends, and its stderr logged
// if the test failed.
func (m *Machine) Start() {
	m.t.Helper()
	state := m.State
	if state == "" {
		state = filepath.Join(m.Dir, "state", "coordinator.db")
	}
	for try := 1; ; try++ {
		cmd := exec.Command(m.Bin, "coordinator", "--config", m.ConfigPath, "--state", state)
		cmd.Env = append(os.Environ(), "HOME="+filepath.Join(m.Dir, "home"), "FAKE_ADAPTER_DIR="+m.FakeDir, "BRIDGE_TOKEN=", "BRIDGE_URL=")
		m.Proc = StartProc(m.t, "coordinator "+m.ID, cmd)
		if m.waitFollowing() {
			return
		}
		// While the machine was down (a restart after a kill), another
		// process may have taken its status port as one of its own:
		// the coordinator refuses to start, and gets a new port.
		if try == 3 || !strings.Contains(m.Proc.Stderr.String(), "address already in use") {
			m.t.Fatalf("coordinator %s exited before it followed the log:\n%s", m.ID, m.Proc.Stderr.String())
		}
		addr := testutil.FreeAddr(m.t)
		m.Set("status_addr", addr)
		m.StatusURL = "http://" + addr
	}
}

// waitFollowing waits until the coordinator follows the log (true) or
// its process exits (false); the test fails after 30 s of neither.
func (m *Machine) waitFollowing() bool {
	m.t.Helper()
	var exited bool
	testutil.WaitFor(m.t, 30*time.Second, "coordinator "+m.ID+" to follow the log", func() bool {
		select {
		case err := <-m.Proc.Done:
			m.Proc.Done <- err // Kill and Stop read it too
			exited = true
			return true
		default:
		}
		return Following(m.StatusURL)
	})
	return !exited
}

// Stop stops the coordinator as a person does (SIGTERM) and waits for it
// to exit.
func (m *Machine) Stop() {
	m.t.Helper()
	_ = m.Proc.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.Proc.Done:
	case <-time.After(30 * time.Second):
		m.t.Fatalf("coordinator %s did not stop within 30 s", m.ID)
	}
}

// Kill kills the coordinator (kill -9) and waits for it to be gone.
func (m *Machine) Kill() {
	m.t.Helper()
	if err := m.Proc.Cmd.Process.Kill(); err != nil {
		m.t.Fatal(err)
	}
	<-m.Proc.Done
}

// Following reports whether the coordinator's status API says it follows
// the bridge's log.
func (m *Machine) Following() bool { return Following(m.StatusURL) }

// RunsOf counts the adapter runs the machine made, per trigger, from the
// fake adapter's runs.log.
func (m *Machine) RunsOf() map[string]int {
	out := map[string]int{}
	b, err := os.ReadFile(filepath.Join(m.FakeDir, "runs.log"))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out[f[0]]++
		}
	}
	return out
}

// Started reports whether the machine's adapter started a run for event
// (the fake adapter saves each payload as it starts).
func (m *Machine) Started(event, participant string) bool {
	_, err := os.Stat(filepath.Join(m.FakeDir, event+"-"+participant+".json"))
	return err == nil
}

// Proc is a running process of a stack: its command, its stderr so far,
// and Done, which receives Wait's error once it exits.
type Proc struct {
	Cmd    *exec.Cmd
	Stderr *testutil.Buffer
	Done   chan error
}

// StartProc starts cmd with its stderr kept, kills it when the test ends,
// and logs its stderr then if the test failed.
func StartProc(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Stderr: &testutil.Buffer{}, Done: make(chan error, 1)}
	cmd.Stderr = p.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.Done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, p.Stderr.String())
		}
	})
	return p
}

// Wait waits for the process to exit and returns its exit code.
func (p *Proc) Wait(t testing.TB) int {
	t.Helper()
	select {
	case err := <-p.Done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(30 * time.Second):
		t.Fatalf("the process did not exit; stderr:\n%s", p.Stderr.String())
		return -1
	}
}

// Terminate sends SIGTERM and requires a clean exit.
func (p *Proc) Terminate(t testing.TB) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0; stderr:\n%s", code, p.Stderr.String())
	}
}

// Following reports whether the coordinator whose status API is at
// statusURL says it follows the bridge's log.
func Following(statusURL string) bool {
	// Bounded: whatever holds the port may never answer.
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(statusURL + "/healthz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct{ Following bool }
	return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Following
}

// WaitFollowing waits until the coordinator at statusURL follows the log.
func WaitFollowing(t testing.TB, statusURL, name string) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, name+" to follow the log", func() bool { return Following(statusURL) })
}
