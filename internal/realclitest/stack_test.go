package realclitest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
	kit "github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// envCLIBin names the folder holding the claude and codex programs
// (.ci/install-clis prints it).
const envCLIBin = "AGENT_BRIDGE_CLI_BIN"

// goodKey is the key every fake model server accepts.
const goodKey = "sk-fake-good"

var (
	// bin is the agent-bridge binary, built once by TestMain.
	bin string
	// root is the module root (the shipped adapters are under it).
	root string
	// cliDir holds claude and codex; skipWhy says why the tests cannot
	// run ("" when they can).
	cliDir, skipWhy string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	var err error
	if root, err = testutil.ModuleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cliDir = os.Getenv(envCLIBin)
	if cliDir == "" {
		skipWhy = envCLIBin + " is not set: run .ci/install-clis and export the line it prints"
	}
	for _, name := range []string{"claude", "codex"} {
		if _, err := os.Stat(filepath.Join(cliDir, name)); skipWhy == "" && err != nil {
			skipWhy = fmt.Sprintf("%s=%s has no %s: %v", envCLIBin, cliDir, name, err)
		}
	}
	if skipWhy == "" {
		dir, err := os.MkdirTemp("", "realcli-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if bin, err = kit.NewPrograms(dir).Path(ctx, kit.AgentBridge); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// need skips the test when the CLIs are absent, and fails it in CI, where
// they must be there.
func need(t *testing.T) {
	t.Helper()
	if skipWhy == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("the real CLIs are required when CI=true: %s", skipWhy)
	}
	t.Skip(skipWhy)
}

// agent is one participant served by a shipped adapter and its own fake
// model server.
type agent struct {
	id     string
	cli    string // "claude" or "codex"
	model  string
	key    string // the key the CLI sends; goodKey unless testing a bad one
	fake   *fakemodel.Server
	home   string // HOME (claude keeps its sessions there)
	codex  string // CODEX_HOME
	work   string // the adapter's cwd
	extras map[string]string
	// fallback is the agent entry's fallback chain (contract 8.5).
	fallback []string
	// profile, when set, is the agent entry's profile.
	profile map[string]any
}

// newAgent makes an agent whose fake model server accepts goodKey.
func newAgent(t testing.TB, id, cli string) *agent {
	t.Helper()
	dir := t.TempDir()
	a := &agent{id: id, cli: cli, key: goodKey, fake: fakemodel.Start(t, goodKey),
		home: filepath.Join(dir, "home"), codex: filepath.Join(dir, "codex-home"), work: filepath.Join(dir, "work"), extras: map[string]string{}}
	a.model = "claude-sonnet-4-5"
	if cli == "codex" {
		a.model = "gpt-5.1-codex"
	}
	for _, d := range []string{a.home, a.codex, a.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if cli == "codex" {
		a.writeCodexConfig(t, "")
	}
	return a
}

// env is the environment the agent's CLI runs with (besides the
// coordinator's own).
func (a *agent) env(t testing.TB) map[string]string {
	t.Helper()
	env := map[string]string{
		"PATH":             cliDir + string(os.PathListSeparator) + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"AGENT_BRIDGE_BIN": bin,
		"HOME":             a.home,
	}
	if a.cli == "claude" {
		for _, kv := range a.fake.ClaudeEnv(a.key) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	} else {
		env["CODEX_HOME"] = a.codex
		env["FAKE_OPENAI_KEY"] = a.key
	}
	for k, v := range a.extras {
		env[k] = v
	}
	return env
}

// writeCodexConfig points codex at the fake through a custom provider,
// with no update check or analytics, plus extra TOML.
func (a *agent) writeCodexConfig(t testing.TB, extra string) {
	t.Helper()
	cfg := a.fake.CodexConfig(a.model, "FAKE_OPENAI_KEY") + extra
	if err := os.WriteFile(filepath.Join(a.codex, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// entry is the agent's entry in a coordinator's config.
func (a *agent) entry(t testing.TB) map[string]any {
	e := map[string]any{"command": []string{a.adapter()}, "cwd": a.work, "env": a.env(t)}
	if len(a.fallback) > 0 {
		e["fallback"] = a.fallback
	}
	if a.profile != nil {
		e["profile"] = a.profile
	}
	return e
}

// adapter is the path of the shipped adapter script for the agent's CLI.
func (a *agent) adapter() string {
	script := "claude_code.sh"
	if a.cli == "codex" {
		script = "codex.sh"
	}
	return filepath.Join(root, "adapters", script)
}

// runAdapter runs the shipped adapter once, outside any coordinator, on a
// payload asking the agent "hello".
func (a *agent) runAdapter(ctx context.Context, t testing.TB) adapters.Result {
	t.Helper()
	p := adapters.NewPayload("http://127.0.0.1:1", agentbridge.Thread{ID: "t1", Name: "direct"},
		agentbridge.Event{ID: "e1", Seq: 2, Thread: "t1", Type: "message", From: "user", To: a.id, Content: json.RawMessage(`"hello"`)},
		a.id, agentbridge.Profile{Client: a.cli, Model: a.model}, nil, "primer")
	payload, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for k, v := range a.env(t) {
		env = append(env, k+"="+v)
	}
	return adapters.Run(ctx, adapters.Spec{Command: []string{a.adapter()}, Dir: a.work, Env: env}, payload, nil)
}

// eachCLI runs f as a subtest for a claude and a codex agent, both served
// by one stack.
func eachCLI(t *testing.T, f func(t *testing.T, s *stack, a *agent)) {
	t.Helper()
	need(t)
	claude, codex := newAgent(t, "claude", "claude"), newAgent(t, "codex", "codex")
	s := newStack(t, claude, codex)
	for _, a := range []*agent{claude, codex} {
		t.Run(a.cli, func(t *testing.T) { f(t, s.with(t), a) })
	}
}

// command runs the CLI directly with the agent's environment.
func (a *agent) command(ctx context.Context, t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(cliDir, a.cli), args...)
	cmd.Dir = a.work
	cmd.Env = os.Environ()
	for k, v := range a.env(t) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// stack is a real "agent-bridge serve" and "agent-bridge coordinator",
// each its own process, whose agents are the shipped adapters.
type stack struct {
	t         testing.TB
	dir       string
	bridgeURL string
	statusURL string
	cl        *client.Client
	// token is serve's person token; coord is the coordinator's own,
	// "" when it uses the person's.
	token, coord string
	agents       []*agent
}

// startProc starts bin with args and env (over the test's own, without
// its BRIDGE_TOKEN), stopped (SIGTERM, then kill) when the test ends; its
// stderr is logged when the test failed.
func startProc(t testing.TB, name string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "BRIDGE_TOKEN=", "BRIDGE_LOG_LEVEL=warn"), env...)
	var stderr testutil.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, stderr.String())
		}
	})
}

func newStack(t testing.TB, agents ...*agent) *stack {
	t.Helper()
	return newStackWith(t, false, agents...)
}

// newStackWith is newStack with, when coordToken, the coordinator holding
// a coordinator token made with the person's (stack.coord) in its
// BRIDGE_TOKEN, as deployed with a token of its own, instead of the
// person's as bridge_token.
func newStackWith(t testing.TB, coordToken bool, agents ...*agent) *stack {
	t.Helper()
	return newStackEdit(t, coordToken, nil, agents...)
}

// newStackEdit is newStackWith whose coordinator config edit changes
// before the coordinator starts (nil: none).
func newStackEdit(t testing.TB, coordToken bool, edit func(cfg map[string]any), agents ...*agent) *stack {
	t.Helper()
	s := &stack{t: t, dir: t.TempDir(), agents: agents}
	statusAddr := testutil.FreeAddr(t)
	s.statusURL = "http://" + statusAddr
	// serve makes the person token next to its database, for the test's
	// client and, as bridge_token, the coordinator (its status API then
	// asks for it too).
	br := kit.Serve(t, bin, filepath.Join(s.dir, "bridge.db"))
	s.bridgeURL, s.token = br.URL, br.Token
	s.cl = client.New(s.bridgeURL, client.WithToken(s.token))
	bridgeToken, coordEnv := s.token, []string(nil)
	if coordToken {
		ct, err := s.cl.CreateToken(t.Context(), agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: "coordinator", Participant: "bridge-coordinator"})
		if err != nil {
			t.Fatal(err)
		}
		s.coord, bridgeToken, coordEnv = ct.Secret, "", []string{"BRIDGE_TOKEN=" + ct.Secret}
	}
	entries := map[string]any{}
	for _, a := range agents {
		entries[a.id] = a.entry(t)
	}
	cfgMap := map[string]any{
		"bridge_url": s.bridgeURL, "bridge_token": bridgeToken, "status_addr": statusAddr, "startup_mode": "resume", "shutdown_grace_s": 5,
		"adapter_timeout_s": 120, "primer_path": filepath.Join(root, "docs", "bridge-agent-primer.md"), "agents": entries,
	}
	if edit != nil {
		edit(cfgMap)
	}
	cfg, _ := json.Marshal(cfgMap)
	cfgPath := filepath.Join(s.dir, "coordinator.config.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	startProc(t, "coordinator", coordEnv, "coordinator", "--config", cfgPath, "--state", filepath.Join(s.dir, "coordinator.db"))
	testutil.WaitFor(t, 30*time.Second, "the coordinator to follow the log", func() bool {
		var h struct{ Following bool }
		return s.getJSON("/healthz", &h) == nil && h.Following
	})
	return s
}

// with is the stack for a subtest: the same processes, with failures
// reported to t.
func (s *stack) with(t testing.TB) *stack {
	c := *s
	c.t = t
	return &c
}

// getJSON decodes a status API answer.
func (s *stack) getJSON(path string, v any) error {
	resp, err := s.getStatus(path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// getStatus asks the coordinator's status API with the person's token.
func (s *stack) getStatus(path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(s.t.Context(), http.MethodGet, s.statusURL+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	return http.DefaultClient.Do(req)
}

// thread creates a thread with every agent of the stack invited.
func (s *stack) thread(name string) string {
	s.t.Helper()
	th, err := s.cl.CreateThread(s.t.Context(), agentbridge.CreateThreadRequest{Name: name})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, a := range s.agents {
		ctl, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": a.id,
			"profile": map[string]any{"client": a.cli, "model": a.model}}})
		if _, err := s.cl.Append(s.t.Context(), th.ID, agentbridge.EventInput{Type: "control", From: "user", Content: ctl}, ""); err != nil {
			s.t.Fatal(err)
		}
	}
	return th.ID
}

// ask posts a message from user to the agent and returns it.
func (s *stack) ask(thread string, a *agent, text string) agentbridge.Event {
	s.t.Helper()
	content, _ := json.Marshal(text)
	ev, err := s.cl.Append(s.t.Context(), thread, agentbridge.EventInput{Type: "message", From: "user", To: a.id, Content: content}, "")
	if err != nil {
		s.t.Fatal(err)
	}
	return ev
}

// answers returns the messages that reply to the trigger.
func (s *stack) answers(thread, trigger string) []agentbridge.Event {
	s.t.Helper()
	evs, err := s.cl.ThreadEvents(s.t.Context(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		s.t.Fatal(err)
	}
	var out []agentbridge.Event
	for _, e := range evs {
		if e.Type == "message" && e.Meta.ReplyTo == trigger {
			out = append(out, e)
		}
	}
	return out
}

// answer waits for the one message replying to the trigger (a reply or
// an error notice).
func (s *stack) answer(thread string, trigger agentbridge.Event, timeout time.Duration) agentbridge.Event {
	s.t.Helper()
	var got []agentbridge.Event
	testutil.WaitFor(s.t, timeout, "an answer to "+string(trigger.Content), func() bool {
		got = s.answers(thread, trigger.ID)
		return len(got) > 0
	})
	return got[0]
}

// text is a message's content as a string.
func text(e agentbridge.Event) string {
	var s string
	_ = json.Unmarshal(e.Content, &s)
	return s
}

// invocations lists the thread's invocations of the agent, oldest first.
func (s *stack) invocations(thread, participant string) []ledger.Invocation {
	s.t.Helper()
	var resp struct {
		Invocations []ledger.Invocation `json:"invocations"`
	}
	if err := s.getJSON("/invocations?thread="+thread+"&participant="+participant, &resp); err != nil {
		s.t.Fatal(err)
	}
	slices.SortFunc(resp.Invocations, func(a, b ledger.Invocation) int { return int(a.ID - b.ID) })
	return resp.Invocations
}

// finished waits until the thread's n-th invocation of the agent ends and
// returns it.
func (s *stack) finished(thread, participant string, n int) ledger.Invocation {
	s.t.Helper()
	var inv ledger.Invocation
	testutil.WaitFor(s.t, 60*time.Second, fmt.Sprintf("invocation %d of %s to end", n, participant), func() bool {
		invs := s.invocations(thread, participant)
		if len(invs) < n {
			return false
		}
		inv = invs[n-1]
		return inv.FinishedAt != ""
	})
	return inv
}

// progress returns the invocation's progress records.
func (s *stack) progress(id int64) []ledger.Progress {
	s.t.Helper()
	var resp struct {
		Progress []ledger.Progress `json:"progress"`
	}
	if err := s.getJSON("/invocations/"+strconv.FormatInt(id, 10), &resp); err != nil {
		s.t.Fatal(err)
	}
	return resp.Progress
}

// sessionOf is the CLI session the coordinator keeps for the agent in the
// thread, "" for none.
func (s *stack) sessionOf(thread, participant string) (string, int) {
	s.t.Helper()
	var resp struct {
		Sessions []ledger.Session `json:"sessions"`
	}
	if err := s.getJSON("/sessions?thread="+thread, &resp); err != nil {
		s.t.Fatal(err)
	}
	for _, x := range resp.Sessions {
		if x.Participant == participant {
			return x.ID, x.Turns
		}
	}
	return "", 0
}

// metric reads one sample of the coordinator's /metrics, 0 when absent.
func (s *stack) metric(name string, labels ...string) float64 {
	s.t.Helper()
	resp, err := s.getStatus("/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			s.t.Fatalf("metric line %q: %v", line, err)
		}
		return v
	}
	return 0
}

// hasTag reports whether the event carries the tag.
func hasTag(e agentbridge.Event, tag string) bool { return slices.Contains(e.Meta.Tags, tag) }
