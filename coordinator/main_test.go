package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
	kit "github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testbridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// progs are the programs the tests run (the fake adapter, the fake ACP
// agent, agent-bridge), each built at most once per test binary on first
// use, so a fuzzing run that needs none builds none, into a folder TestMain
// removes; fakePath is the fake adapter, once ensureFake built it.
var (
	progs    *kit.Programs
	fakeOnce sync.Once
	fakePath string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "coordinator-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	progs = kit.NewPrograms(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// ensureFake builds the fake adapter once and sets fakePath, once: the
// parallel tests read it.
func ensureFake(t testing.TB) {
	t.Helper()
	path := progs.Build(t, kit.FakeAdapter)
	fakeOnce.Do(func() { fakePath = path })
}

const waitLong = 30 * time.Second

// waitReal is how long a test of a real CLI waits for what the CLI does:
// a real agent starts node, loads its tools and talks to the fake model,
// which on a machine loaded by other builds takes far more than waitLong.
// The waits poll, so a generous bound costs nothing when all goes well.
const waitReal = 5 * time.Minute

func quietLogger() *slog.Logger {
	if os.Getenv("COORDINATOR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// stack is a bridge and a coordinator running in-process.
type stack struct {
	t       testing.TB
	dir     string
	fakeDir string
	bridge  *testbridge.Bridge
	cl      *client.Client
	cfg     config.Config
	cfgPath string
	db      *ledger.DB
	coord   *coordinator.Coordinator
	cancel  context.CancelFunc
	done    chan error
	// logger is the coordinator's logger; nil is quietLogger.
	logger *slog.Logger
	// exe is the coordinator's Executable; "" is the fake adapter.
	exe string
	// ledgerPath is the ledger's file; "" is coordinator.db in dir.
	ledgerPath string
	// patience bounds the stack's waits for replies, records and
	// requests; 0 is waitLong (waitReal for a real CLI's stack).
	patience time.Duration
}

// wait is the bound of the stack's waits.
func (s *stack) wait() time.Duration {
	if s.patience > 0 {
		return s.patience
	}
	return waitLong
}

// ledgerFile is the path of the stack's ledger.
func (s *stack) ledgerFile() string {
	if s.ledgerPath != "" {
		return s.ledgerPath
	}
	return filepath.Join(s.dir, "coordinator.db")
}

// testConfig is the coordinator config of the tests: agents alice, bob and
// carol run the fake adapter; the "claude" entry serves any participant
// invited with client "claude".
func testConfig(bridgeURL string) config.Config {
	cfg := config.Default()
	cfg.BridgeURL = bridgeURL
	cfg.StatusAddr = "127.0.0.1:0"
	cfg.StartupMode = coordinator.StartupResume
	cfg.AdapterTimeout = 30 * time.Second
	cfg.PresenceHeartbeat = time.Second
	cfg.ShutdownGrace = 5 * time.Second
	cfg.PrimerPath = ""
	cfg.Agents = map[string]config.Agent{
		"alice":  {Command: []string{fakePath}},
		"bob":    {Command: []string{fakePath}},
		"carol":  {Command: []string{fakePath}},
		"claude": {Command: []string{fakePath}, Client: "claude"},
	}
	return cfg
}

// startStack starts a bridge and a coordinator; mutate adjusts the config
// before the coordinator starts.
func startStack(t testing.TB, mutate func(*config.Config)) *stack {
	t.Helper()
	s := newStack(t)
	if mutate != nil {
		mutate(&s.cfg)
	}
	s.startCoordinator()
	return s
}

// newStack starts the bridge only; the caller adjusts s.cfg (and
// s.cfgPath) and calls s.startCoordinator.
func newStack(t testing.TB) *stack {
	t.Helper()
	return newTokenStack(t, "")
}

// newTokenStack is newStack with a bridge that requires token (a person's;
// none when ""), which the test's client and the coordinator hold.
func newTokenStack(t testing.TB, token string) *stack {
	t.Helper()
	ensureFake(t)
	// Registered first, so it runs last: after the coordinator and the
	// bridge have stopped, none of their goroutines may be left.
	t.Cleanup(testutil.CheckGoroutines(t))
	dir := t.TempDir()
	s := &stack{t: t, dir: dir, fakeDir: filepath.Join(dir, "fake")}
	if err := os.MkdirAll(s.fakeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.bridge = testbridge.New(t, token)
	s.cl = client.New(s.bridge.URL(), client.WithToken(token))
	s.cfg = testConfig(s.bridge.URL())
	s.cfg.BridgeToken = token
	t.Cleanup(func() {
		s.stopCoordinator()
		s.bridge.Stop()
	})
	return s
}

func (s *stack) startCoordinator() {
	t := s.t
	t.Helper()
	db, err := ledger.Open(context.Background(), s.ledgerFile(), "bridge-coordinator")
	if err != nil {
		t.Fatalf("open state: %v", err)
	}
	logger := s.logger
	if logger == nil {
		logger = quietLogger()
	}
	exe := s.exe
	if exe == "" {
		exe = fakePath
	}
	// The fake adapters write into this test's folder: the variable is in
	// each agent's env rather than the process's, so that tests run in
	// parallel.
	for name, a := range s.cfg.Agents {
		if _, ok := a.Env["FAKE_ADAPTER_DIR"]; !ok {
			a.Env = maps.Clone(a.Env)
			if a.Env == nil {
				a.Env = map[string]string{}
			}
			a.Env["FAKE_ADAPTER_DIR"] = s.fakeDir
			s.cfg.Agents[name] = a
		}
	}
	c, err := coordinator.New(coordinator.Options{Config: s.cfg, ConfigPath: s.cfgPath, State: db, Logger: logger, Executable: exe,
		AttachmentDir: filepath.Join(s.dir, "attachments"), WorktreeDir: filepath.Join(s.dir, "worktrees")})
	if err != nil {
		t.Fatalf("new coordinator: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.db, s.coord, s.cancel, s.done = db, c, cancel, make(chan error, 1)
	go func() { s.done <- c.Run(ctx) }()
	// Wait until the coordinator follows the log, as its status API says.
	testutil.WaitFor(t, waitLong, "the coordinator to start following", func() bool {
		resp, err := http.Get(c.StatusURL() + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Following bool }
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Following
	})
}

// stopCoordinator cancels the coordinator and waits for Run to return.
func (s *stack) stopCoordinator() {
	t := s.t
	t.Helper()
	if s.coord == nil {
		return
	}
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("coordinator Run: %v", err)
		}
	case <-time.After(waitLong):
		t.Fatalf("coordinator did not stop")
	}
	if err := s.db.Close(); err != nil {
		t.Errorf("close state: %v", err)
	}
	s.coord = nil
}

// withLedger runs fn on the ledger while the coordinator is stopped: a
// test's edit of what a crash or a restore would have left.
func (s *stack) withLedger(fn func(*ledger.DB) error) {
	s.t.Helper()
	db, err := ledger.Open(context.Background(), s.ledgerFile(), "bridge-coordinator")
	if err != nil {
		s.t.Fatal(err)
	}
	defer db.Close()
	if err := fn(db); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) thread(name string) string {
	s.t.Helper()
	th, err := s.cl.CreateThread(context.Background(), agentbridge.CreateThreadRequest{Name: name})
	if err != nil {
		s.t.Fatalf("create thread: %v", err)
	}
	return th.ID
}

func (s *stack) post(thread string, in agentbridge.EventInput) agentbridge.Event {
	s.t.Helper()
	if in.From == "" {
		in.From = "user"
	}
	e, err := s.cl.Append(context.Background(), thread, in, "")
	if err != nil {
		s.t.Fatalf("post %+v: %v", in, err)
	}
	return e
}

func (s *stack) say(thread, to, text string) agentbridge.Event {
	s.t.Helper()
	return s.post(thread, agentbridge.EventInput{To: to, Content: jsonString(text)})
}

func (s *stack) control(thread, from string, c any) agentbridge.Event {
	s.t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.post(thread, agentbridge.EventInput{Type: agentbridge.TypeControl, From: from, Content: b})
}

func (s *stack) invite(thread, id string, p agentbridge.Profile) {
	s.t.Helper()
	if p.Client == "" {
		p.Client = "fake"
	}
	if p.Model == "" {
		p.Model = "m1"
	}
	s.control(thread, "user", map[string]any{"invite": map[string]any{"participant_id": id, "profile": p}})
}

func (s *stack) events(thread string) []agentbridge.Event {
	s.t.Helper()
	evs, err := s.cl.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		s.t.Fatalf("read events: %v", err)
	}
	return evs
}

// repliesTo returns the events replying to trigger.
func (s *stack) repliesTo(thread, trigger string) []agentbridge.Event {
	var out []agentbridge.Event
	for _, e := range s.events(thread) {
		if e.Meta.ReplyTo == trigger {
			out = append(out, e)
		}
	}
	return out
}

// waitReplies waits until trigger has n replies and returns them.
func (s *stack) waitReplies(thread, trigger string, n int) []agentbridge.Event {
	s.t.Helper()
	var got []agentbridge.Event
	testutil.WaitFor(s.t, s.wait(), fmt.Sprintf("%d replies to %s", n, trigger), func() bool {
		got = s.repliesTo(thread, trigger)
		return len(got) >= n
	})
	return got
}

// waitTagged waits for the first reply to event id tagged tag and returns
// it.
func (s *stack) waitTagged(thread, id, tag, what string) agentbridge.Event {
	s.t.Helper()
	var n agentbridge.Event
	testutil.WaitFor(s.t, waitLong, what, func() bool {
		for _, e := range s.repliesTo(thread, id) {
			if e.Meta.HasTag(tag) {
				n = e
				return true
			}
		}
		return false
	})
	return n
}

// decision waits for the recorded decision of an event, read through the
// status API as `agent-bridge why` does.
func (s *stack) decision(eventID string) rules.Decision {
	s.t.Helper()
	var d rules.Decision
	testutil.WaitFor(s.t, waitLong, "decision for "+eventID, func() bool {
		resp, err := http.Get(s.coord.StatusURL() + "/decisions?event=" + eventID)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		var rec ledger.DecisionRecord
		if json.NewDecoder(resp.Body).Decode(&rec) != nil {
			return false
		}
		return json.Unmarshal(rec.Decision, &d) == nil
	})
	return d
}

// invocations returns the ledger's records for a trigger.
func (s *stack) invocations(trigger string) []ledger.Invocation {
	s.t.Helper()
	all, err := s.db.Invocations(context.Background(), ledger.Filter{Limit: 10000})
	if err != nil {
		s.t.Fatalf("list invocations: %v", err)
	}
	var out []ledger.Invocation
	for _, inv := range all {
		if inv.TriggerID == trigger {
			out = append(out, inv)
		}
	}
	return out
}

// waitStatus waits until the pair's invocation has the given status and
// no post pending (its reply or error message is recorded).
func (s *stack) waitStatus(trigger, participant, status string) ledger.Invocation {
	s.t.Helper()
	var got ledger.Invocation
	testutil.WaitFor(s.t, s.wait(), fmt.Sprintf("invocation %s/%s to be %s", trigger, participant, status), func() bool {
		for _, inv := range s.invocations(trigger) {
			if inv.Participant == participant && inv.Status == status && len(inv.PendingPost) == 0 {
				got = inv
				return true
			}
		}
		return false
	})
	return got
}

// runCount counts the fake's runs for a (trigger, participant) pair.
func (s *stack) runCount(trigger, participant string) int {
	b, _ := os.ReadFile(filepath.Join(s.fakeDir, "runs.log"))
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == trigger && f[1] == participant {
			n++
		}
	}
	return n
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func participants(ts []rules.Target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Participant)
	}
	slices.Sort(out)
	return out
}

func skipped(sk []rules.Skip) map[string]string {
	out := map[string]string{}
	for _, s := range sk {
		out[s.Participant] = s.Reason
	}
	return out
}

// waitPresence waits until the participant's presence in the thread is
// state.
func (s *stack) waitPresence(thread, participant, want string) {
	s.t.Helper()
	testutil.WaitFor(s.t, waitLong, participant+" to be "+want, func() bool {
		ps, err := s.cl.Presence(context.Background(), thread)
		if err != nil {
			return false
		}
		for _, p := range ps {
			if p.ID == participant {
				return p.State == want
			}
		}
		return false
	})
}
