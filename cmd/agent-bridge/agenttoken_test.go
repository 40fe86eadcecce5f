package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// tokenStack is a real `agent-bridge serve` holding a person token and a
// real `agent-bridge coordinator` holding a coordinator token, each its
// own process (contract 7.3): what a person runs when agents must not be
// the person.
type tokenStack struct {
	t                 *testing.T
	dir, fakeDir      string
	url, statusURL    string
	person, coord     string
	state             string         // the person token serve made in its state folder
	cl                *client.Client // the person's
	coordinatorStderr *testutil.Buffer
	// stopCoordinator stops the coordinator (SIGTERM) and waits for it.
	stopCoordinator func()
}

// newTokenStack starts serve with a person token, mints a coordinator
// token with it, and starts the coordinator with the given agents and
// config keys, its token in BRIDGE_TOKEN and, under another name, in
// COORD_COPY (as a person who exported it twice would); with viaFile, its
// token in --token-file instead, and the person's in BRIDGE_TOKEN and
// MY_BRIDGE (as a person who exported their own would). Either way
// BRIDGE_DB names serve's database, and AGENT_BRIDGE_TOKEN holds the
// person token serve made in its state folder.
func newTokenStack(t *testing.T, viaFile bool, agents map[string]any, extra map[string]any) *tokenStack {
	t.Helper()
	bin := buildServeBinary(t)
	s := &tokenStack{t: t, dir: t.TempDir()}
	s.fakeDir = filepath.Join(s.dir, "fake")
	if err := os.MkdirAll(s.fakeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.person = "person-secret-" + strings.Repeat("p", 24)
	personFile := filepath.Join(s.dir, "person.token")
	if err := os.WriteFile(personFile, []byte(s.person+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, statusAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	s.url, s.statusURL = "http://"+addr, "http://"+statusAddr
	_, _ = s.start(bin, nil, "serve", "--addr", addr, "--db", filepath.Join(s.dir, "bridge.db"), "--token-file", personFile)
	s.cl = client.New(s.url, client.WithToken(s.person))
	testutil.WaitFor(t, 30*time.Second, "the bridge to answer", func() bool {
		_, err := s.cl.Ping(t.Context())
		return err == nil
	})
	ct, err := s.cl.CreateToken(t.Context(), agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: "coordinator", Participant: "bridge-coordinator"})
	if err != nil {
		t.Fatal(err)
	}
	s.coord = ct.Secret
	state, err := os.ReadFile(filepath.Join(s.dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	s.state = strings.TrimSpace(string(state))
	cfg := map[string]any{"bridge_url": s.url, "status_addr": statusAddr, "startup_mode": "resume",
		"shutdown_grace_s": 5, "agents": agents}
	for k, v := range extra {
		cfg[k] = v
	}
	raw, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(s.dir, "coordinator.config.json")
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"BRIDGE_TOKEN=" + s.coord, "COORD_COPY=" + s.coord, "FAKE_ADAPTER_DIR=" + s.fakeDir,
		"BRIDGE_DB=" + filepath.Join(s.dir, "bridge.db"), "AGENT_BRIDGE_TOKEN=" + s.state}
	args := []string{"coordinator", "--config", cfgPath, "--state", filepath.Join(s.dir, "state", "coordinator.db")}
	if viaFile {
		coordFile := filepath.Join(s.dir, "coordinator.token")
		if err := os.WriteFile(coordFile, []byte(s.coord), 0o600); err != nil {
			t.Fatal(err)
		}
		env[0] = "BRIDGE_TOKEN=" + s.person
		env = append(env, "MY_BRIDGE="+s.person)
		args = append(args, "--token-file", coordFile)
	}
	s.coordinatorStderr, s.stopCoordinator = s.start(bin, env, args...)
	testutil.WaitFor(t, 30*time.Second, "the coordinator to follow the log", func() bool {
		resp, err := http.Get(s.statusURL + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Following bool }
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Following
	})
	return s
}

// start runs bin with args and env (over the test's environment, without
// its BRIDGE_TOKEN), stopped with SIGTERM by stop or when the test ends;
// its stderr is logged when the test failed.
func (s *tokenStack) start(bin string, env []string, args ...string) (stderr *testutil.Buffer, stop func()) {
	s.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "BRIDGE_TOKEN=", "BRIDGE_LOG_LEVEL=info"), env...)
	stderr = &testutil.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", args[0], err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				s.t.Errorf("%s did not stop within 15 s of SIGTERM", args[0])
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	s.t.Cleanup(func() {
		stop()
		if s.t.Failed() {
			s.t.Logf("%s stderr:\n%s", args[0], stderr.String())
		}
	})
	return stderr, stop
}

// thread creates a thread with alice invited, and the permission request
// the coordinator would post for one of alice's tool calls; it returns
// the thread and the request's id.
func (s *tokenStack) thread() (string, string) {
	s.t.Helper()
	ctx := s.t.Context()
	th, err := s.cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "agents are not the person"})
	if err != nil {
		s.t.Fatal(err)
	}
	inv, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": "alice", "profile": map[string]any{"client": "fake", "model": "m"}}})
	if _, err := s.cl.Append(ctx, th.ID, agentbridge.EventInput{Type: "control", From: "user", Content: inv}, ""); err != nil {
		s.t.Fatal(err)
	}
	coord := client.New(s.url, client.WithToken(s.coord))
	req, err := coord.Append(ctx, th.ID, agentbridge.EventInput{From: "bridge-coordinator", To: "user",
		Content: json.RawMessage(`"alice asks to run rm -rf demo"`),
		Meta: agentbridge.Meta{Tags: []string{"coordinator", "permission"}, Extra: map[string]json.RawMessage{agentbridge.MetaPermission: json.RawMessage(
			`{"invocation":1,"tool_call":{"title":"rm -rf demo","kind":"execute"},"options":[{"id":"allow","name":"Allow","kind":"allow_once"}]}`)}}}, "")
	if err != nil {
		s.t.Fatal(err)
	}
	return th.ID, req.ID
}

// post sends body to the thread's events with token (none when empty)
// and returns the answer's status and error code.
func (s *tokenStack) post(token, thread, body string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), http.MethodPost, s.url+"/threads/"+thread+"/events", strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error.Code
}

// tokenWorks reports whether token still reads the thread (401 once it
// is revoked).
func (s *tokenStack) tokenWorks(token, thread string) bool {
	s.t.Helper()
	_, err := client.New(s.url, client.WithToken(token)).ThreadEvents(s.t.Context(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	var ae *agentbridge.Error
	if err != nil && !(errors.As(err, &ae) && ae.Status == http.StatusUnauthorized) {
		s.t.Fatalf("read with the agent token: %v", err)
	}
	return err == nil
}

// attack uses token as an agent would with what it found: every write
// that is not alice's own message is refused with 403 forbidden_sender;
// alice's own message is stored; a request with no token is 401.
func (s *tokenStack) attack(token, thread, permission string) {
	s.t.Helper()
	forbidden := map[string]string{
		"a message as user":            `{"type":"message","from":"user","content":"forged by alice"}`,
		"a pause as user":              `{"type":"control","from":"user","content":{"pause":{"on":true}}}`,
		"a pause as alice":             `{"type":"control","from":"alice","content":{"pause":{"on":true}}}`,
		"an answer to the permission":  `{"type":"control","from":"user","content":{"permission":{"event":"` + permission + `","option":"allow"}}}`,
		"an answer as alice":           `{"type":"control","from":"alice","content":{"permission":{"event":"` + permission + `","option":"allow"}}}`,
		"a message as the coordinator": `{"type":"message","from":"bridge-coordinator","content":"forged by alice"}`,
	}
	for what, body := range forbidden {
		if status, code := s.post(token, thread, body); status != http.StatusForbidden || code != agentbridge.ECodeForbiddenSender {
			s.t.Errorf("%s with the agent token: %d %s, want 403 %s", what, status, code, agentbridge.ECodeForbiddenSender)
		}
	}
	if status, code := s.post("", thread, forbidden["a pause as user"]); status != http.StatusUnauthorized {
		s.t.Errorf("a pause with no token: %d %s, want 401", status, code)
	}
	if status, code := s.post(token, thread, `{"type":"message","from":"alice","content":"alice posts herself"}`); status != http.StatusOK {
		s.t.Errorf("alice's own message with her token: %d %s, want 200", status, code)
	}
}

// unharmed checks the thread after attacks: not paused, nothing forged
// stored, the permission request unanswered, alice's own message there
// once per attack.
func (s *tokenStack) unharmed(thread string, attacks int) {
	s.t.Helper()
	evs, err := s.cl.ThreadEvents(s.t.Context(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		s.t.Fatal(err)
	}
	own := 0
	for _, e := range evs {
		c := string(e.Content)
		switch {
		case strings.Contains(c, "forged"):
			s.t.Errorf("a forged event was stored: %+v", e)
		case e.Type == agentbridge.TypeControl && (strings.Contains(c, "pause") || strings.Contains(c, "permission")):
			s.t.Errorf("a control from the agent was stored: %+v", e)
		case e.From == "alice" && strings.Contains(c, "alice posts herself"):
			own++
		}
	}
	if own != attacks {
		s.t.Errorf("alice's own message stored %d times, want %d", own, attacks)
	}
}

// envOf reads a KEY=VALUE file (an environment, one variable a line).
func envOf(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env
}

// noCredential fails when raw (what an agent was given) holds the person's
// or the coordinator's token.
func (s *tokenStack) noCredential(what string, raw []byte) {
	s.t.Helper()
	for name, secret := range map[string]string{"person": s.person, "coordinator": s.coord, "state folder's person": s.state} {
		if bytes.Contains(raw, []byte(secret)) {
			s.t.Errorf("%s holds the %s token", what, name)
		}
	}
}

// An adapter's environment holds no person or coordinator token, only its
// run's agent token as BRIDGE_TOKEN; with it the adapter cannot post as
// anyone else, pause the thread or answer a permission request (403), and
// can post as itself; the token is revoked when the run ends (401). The
// next run gets another token (the one minted ahead for it), and the
// coordinator's shutdown leaves no agent token valid.
func TestAdapterHoldsOnlyItsAgentToken(t *testing.T) {
	t.Parallel()
	fake := buildFake(t)
	s := newTokenStack(t, false, map[string]any{"alice": map[string]any{"command": []string{fake}}}, nil)
	thread, permission := s.thread()
	first, _ := s.adapterRun(thread, permission)
	testutil.WaitFor(t, 10*time.Second, "the next run's token to be made ahead", func() bool { return s.agentTokens() == 2 })
	second, trig := s.adapterRun(thread, permission)
	if first.secret == second.secret {
		t.Errorf("two runs got the same token")
	}
	s.unharmed(thread, 2)
	s.stopCoordinator()
	list, err := s.cl.Tokens(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	agents := 0
	for _, tok := range list {
		if tok.ID == second.id && tok.CreatedAt >= trig.TS {
			t.Errorf("the second run's token was made at %s, after its trigger (%s): want it made ahead, when the first run ended", tok.CreatedAt, trig.TS)
		}
		if tok.Scope == agentbridge.ScopeAgent {
			agents++
			if tok.RevokedAt == "" {
				t.Errorf("agent token %s (%s) outlived the coordinator's shutdown unrevoked", tok.ID, tok.Name)
			}
		}
	}
	if agents < 2 {
		t.Errorf("%d agent tokens were made, want one per run at least", agents)
	}
}

// agentTokens counts the agent tokens the bridge has made.
func (s *tokenStack) agentTokens() int {
	s.t.Helper()
	list, err := s.cl.Tokens(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for _, tok := range list {
		if tok.Scope == agentbridge.ScopeAgent {
			n++
		}
	}
	return n
}

// runToken is an agent token an agent was given: its secret and id.
type runToken struct{ secret, id string }

// adapterRun has alice's adapter save its environment and wait, checks
// that it holds only its agent token, attacks with it, lets the run end
// and waits for the token to be refused; it returns the token and the
// trigger.
func (s *tokenStack) adapterRun(thread, permission string) (runToken, agentbridge.Event) {
	t := s.t
	t.Helper()
	trig, err := s.cl.Append(t.Context(), thread, agentbridge.EventInput{From: "user", To: "alice", Content: json.RawMessage(`"fake:env fake:wait"`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(s.fakeDir, trig.ID+"-alice.env")
	testutil.WaitFor(t, 30*time.Second, "the adapter to save its environment", func() bool {
		_, err := os.Stat(envFile)
		return err == nil
	})
	raw, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	s.noCredential("the adapter's environment", raw)
	env := envOf(t, envFile)
	token := env["BRIDGE_TOKEN"]
	if !strings.HasPrefix(token, agentbridge.TokenPrefix) || env["BRIDGE_URL"] != s.url || env["COORD_COPY"] != "" {
		t.Fatalf("the adapter's BRIDGE_TOKEN %q, BRIDGE_URL %q, COORD_COPY %q: want an agent token, the bridge, nothing",
			token, env["BRIDGE_URL"], env["COORD_COPY"])
	}
	who, err := client.New(s.url, client.WithToken(token)).Whoami(t.Context())
	if err != nil || who.Scope != agentbridge.ScopeAgent || who.Thread != thread || who.Participant != "alice" {
		t.Fatalf("the adapter's token is %+v (%v), want an agent token bound to alice in the thread", who, err)
	}
	s.attack(token, thread, permission)
	if err := os.WriteFile(filepath.Join(s.fakeDir, trig.ID+".release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "alice's reply", func() bool {
		evs, _ := s.cl.ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
		for _, e := range evs {
			if e.Meta.ReplyTo == trig.ID && e.From == "alice" {
				return true
			}
		}
		return false
	})
	testutil.WaitFor(t, 10*time.Second, "the run's token to be revoked", func() bool { return !s.tokenWorks(token, thread) })
	return runToken{token, who.ID}, trig
}

// An ACP agent's environment and the MCP server it is given hold no
// person or coordinator token (the coordinator's in --token-file, the
// person's in its BRIDGE_TOKEN), only the agent's own token; with it the
// agent cannot answer its own permission request, pause the thread or post
// as anyone else (403), and can post as itself; a person's answer is what
// the agent gets; the token is revoked when the idle agent is closed.
func TestACPAgentHoldsOnlyItsAgentToken(t *testing.T) {
	t.Parallel()
	fakeACP := bins.Build(t, stack.FakeACP)
	dir := t.TempDir()
	envFile := filepath.Join(dir, "acp.env")
	s := newTokenStack(t, true, map[string]any{"alice": map[string]any{"acp": []string{fakeACP},
		"env": map[string]string{"FAKE_ACP_ENV": envFile, "BRIDGE_TOKEN": "from-the-entry"}, "workdir": filepath.Join(dir, "work")}},
		map[string]any{"acp_idle_s": 1})
	thread, _ := s.thread()
	trig, err := s.cl.Append(t.Context(), thread, agentbridge.EventInput{From: "user", To: "alice", Content: json.RawMessage(`"PERMISSION please"`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	var request agentbridge.Event
	testutil.WaitFor(t, 30*time.Second, "the agent's permission request", func() bool {
		evs, _ := s.cl.ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
		for _, e := range evs {
			if _, ok := e.Meta.Extra[agentbridge.MetaPermission]; ok && e.Meta.ReplyTo == trig.ID {
				request = e
				return true
			}
		}
		return false
	})
	raw, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	s.noCredential("the ACP agent's environment and MCP servers", raw)
	env := envOf(t, envFile)
	token := env["BRIDGE_TOKEN"]
	if !strings.HasPrefix(token, agentbridge.TokenPrefix) || env["COORD_COPY"] != "" {
		t.Fatalf("the agent's BRIDGE_TOKEN %q, COORD_COPY %q: want an agent token and nothing", token, env["COORD_COPY"])
	}
	if !bytes.Contains(raw, []byte("\nmcp-env BRIDGE_TOKEN="+token+"\n")) {
		t.Errorf("the agent's MCP server does not carry its token:\n%s", raw)
	}
	s.attack(token, thread, request.ID)
	// The person answers; the agent gets that answer.
	answer, _ := json.Marshal(map[string]any{"permission": map[string]string{"event": request.ID, "option": "allow"}})
	if _, err := s.cl.Append(t.Context(), thread, agentbridge.EventInput{Type: "control", From: "user", Content: answer}, ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "alice's reply", func() bool {
		evs, _ := s.cl.ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
		for _, e := range evs {
			if e.Meta.ReplyTo == trig.ID && e.From == "alice" {
				if string(e.Content) != `"permission: allow"` {
					t.Fatalf("alice replied %s, want the person's answer", e.Content)
				}
				return true
			}
		}
		return false
	})
	testutil.WaitFor(t, 30*time.Second, "the idle agent's token to be revoked", func() bool { return !s.tokenWorks(token, thread) })
	evs, err := s.cl.ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	answers := 0
	for _, e := range evs {
		if e.Type == agentbridge.TypeControl && strings.Contains(string(e.Content), "permission") {
			answers++
			if e.From != "user" {
				t.Errorf("a permission answer from %s was stored", e.From)
			}
		}
	}
	if answers != 1 {
		t.Errorf("%d permission answers stored, want the person's one", answers)
	}
	if !strings.Contains(s.coordinatorStderr.String(), "agents.alice.env.BRIDGE_TOKEN is ignored") {
		t.Errorf("the coordinator did not warn of the entry's BRIDGE_TOKEN; stderr:\n%s", s.coordinatorStderr.String())
	}
}

// up gives its coordinator a coordinator token of its own, made with the
// person's, and revokes it when it stops.
func TestUpGivesItsCoordinatorATokenOfItsOwn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "coordinator.config.json")
	if err := os.WriteFile(cfg, []byte(`{"status_addr": "127.0.0.1:0", "agents": {"echo": {"command": ["cat"]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "data", "bridge.db")
	var stdout, stderr testutil.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	stop := runInProcess(t, m, "up", "--addr", "127.0.0.1:0", "--db", db, "--config", cfg, "--state", filepath.Join(dir, "data", "coordinator.db"))
	var bridgeURL string
	testutil.WaitFor(t, 30*time.Second, "up to be up", func() bool {
		_, rest, ok := strings.Cut(stdout.String(), "agent-bridge is up: bridge ")
		bridgeURL, _, _ = strings.Cut(rest, ",")
		return ok && strings.Contains(stdout.String(), "Open the UI at ")
	})
	person, err := os.ReadFile(filepath.Join(dir, "data", "token"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := client.New(bridgeURL, client.WithToken(strings.TrimSpace(string(person)))).Tokens(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var coord []agentbridge.Token
	for _, tok := range list {
		if tok.Scope == agentbridge.ScopeCoordinator {
			coord = append(coord, tok)
		}
	}
	if len(coord) != 1 || coord[0].Name != "up-coordinator" || coord[0].Participant != "bridge-coordinator" || coord[0].RevokedAt != "" {
		t.Fatalf("coordinator tokens while up runs: %+v, want one valid up-coordinator bound to bridge-coordinator", coord)
	}
	if err := stop(); err != nil {
		t.Fatalf("up returned %v; stderr:\n%s", err, stderr.String())
	}
	store, err := sqlite.Open(t.Context(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	after, err := store.Tokens(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range after {
		if tok.ID == coord[0].ID && tok.RevokedAt == "" {
			t.Errorf("up's coordinator token outlived up: %+v", tok)
		}
	}
}
