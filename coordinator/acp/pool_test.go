package acp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/acp"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
)

// fakeACPBin is the project's fake ACP agent, built once by TestMain.
var fakeACPBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeACPBin, err = stack.NewPrograms(dir).Path(context.Background(), stack.FakeACP)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fakeHost is the coordinator's side of the client, recorded: no bridge,
// no ledger.
type fakeHost struct {
	mu      sync.Mutex
	running []int64
	posts   []agentbridge.EventInput
	keys    []string
	tokens  []*fakeToken
	posted  chan agentbridge.Event
	// noticeDelay makes a notice's post (a closing notice: kind ends
	// "-withdrawn" or "-timeout") take that long, as a slow bridge would.
	noticeDelay time.Duration
}

func (h *fakeHost) MarkRunning(_ context.Context, inv acp.Invocation, pid int, _ time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if pid <= 0 {
		panic("marked running without a pid")
	}
	h.running = append(h.running, inv.ID)
}

func (h *fakeHost) Token(_ context.Context, _, participant string) acp.Token {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := &fakeToken{value: "token-of-" + participant}
	h.tokens = append(h.tokens, t)
	return t
}

func (h *fakeHost) Presence(context.Context, string) map[string]string { return nil }

func (h *fakeHost) Recipient(context.Context, string, agentbridge.Event, []agentbridge.Event) string {
	return "alice"
}

func (h *fakeHost) Post(_ context.Context, _ acp.Invocation, in agentbridge.EventInput, trigger, kind string) (agentbridge.Event, error) {
	if strings.HasSuffix(kind, "-withdrawn") || strings.HasSuffix(kind, "-timeout") {
		time.Sleep(h.noticeDelay)
	}
	h.mu.Lock()
	h.posts = append(h.posts, in)
	h.keys = append(h.keys, trigger+" "+kind)
	ev := agentbridge.Event{ID: fmt.Sprintf("ev-%d", len(h.posts)), Type: in.Type, From: in.From, To: in.To, Meta: in.Meta}
	h.mu.Unlock()
	if h.posted != nil {
		h.posted <- ev
	}
	return ev, nil
}

type fakeToken struct {
	value   string
	mu      sync.Mutex
	revoked bool
}

func (t *fakeToken) Value() string   { return t.value }
func (t *fakeToken) LastsTurn() bool { return true }
func (t *fakeToken) Revoke() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.revoked = true
}

// newPool is a pool over h whose agent "acpy" is the fake ACP agent.
func newPool(t *testing.T, h *fakeHost, permissions string) (*acp.Pool, config.Agent) {
	t.Helper()
	cfg := config.Default()
	cfg.CoordinatorID = "coord"
	cfg.HumanIDs = []string{"alice"}
	entry := config.Agent{ACP: []string{fakeACPBin}, Workdir: t.TempDir(), Permissions: permissions,
		Env: map[string]string{"FAKE_ACP_LOG": filepath.Join(t.TempDir(), "calls.log")}}
	p := acp.New(acp.Options{Host: h, Config: func() *config.Config { return &cfg }, Dir: t.TempDir(), Executable: "/bin/true"})
	t.Cleanup(p.Close)
	return p, entry
}

// turn runs one turn answering text, with the session the ledger would
// remember (session), and returns the reply, the why and the session the
// turn reported.
func turn(t *testing.T, p *acp.Pool, entry config.Agent, id int64, text, session string) (string, string, string) {
	t.Helper()
	var mu sync.Mutex
	reported := ""
	trig := agentbridge.Event{ID: fmt.Sprintf("trig-%d", id), From: "alice", Type: agentbridge.TypeMessage}
	res, why := p.Run(context.Background(), acp.Run{
		Invocation: acp.Invocation{ID: id, Thread: "th", Participant: "acpy", TriggerID: trig.ID},
		Entry:      entry,
		Payload:    adapters.Payload{ThreadID: "th", EventID: trig.ID, From: "alice", Content: text, Session: adapters.SessionInfo{ID: session}},
		Trigger:    trig,
		Progress: func(r adapters.ProgressRecord) {
			mu.Lock()
			defer mu.Unlock()
			if r.Session != "" {
				reported = r.Session
			}
		},
	})
	mu.Lock()
	defer mu.Unlock()
	return string(res.Stdout), why, reported
}

var echoRE = regexp.MustCompile(`^fake-acp pid=(\d+) session=(\S+) turn=(\d+) `)

// TestPoolWarmTurns: two turns of a pair run on one process and one
// session, each marked running; the agent gets its own token, revoked
// when the pool closes.
func TestPoolWarmTurns(t *testing.T) {
	h := &fakeHost{}
	p, entry := newPool(t, h, config.PermissionsAsk)
	r1, why, s1 := turn(t, p, entry, 1, "hello", "")
	m1 := echoRE.FindStringSubmatch(r1)
	if why != "" || m1 == nil || m1[3] != "1" || !strings.HasSuffix(r1, "hello") {
		t.Fatalf("first turn: reply %q, why %q", r1, why)
	}
	if s1 != m1[2] {
		t.Errorf("the turn reported session %q, the agent runs %q", s1, m1[2])
	}
	r2, why, _ := turn(t, p, entry, 2, "again", s1)
	m2 := echoRE.FindStringSubmatch(r2)
	if why != "" || m2 == nil || m2[1] != m1[1] || m2[2] != m1[2] || m2[3] != "2" {
		t.Fatalf("second turn %q (why %q) is not on the first's process and session (%q)", r2, why, r1)
	}
	h.mu.Lock()
	running, tokens := fmt.Sprint(h.running), len(h.tokens)
	h.mu.Unlock()
	if running != "[1 2]" || tokens != 1 {
		t.Errorf("marked running %s, tokens made %d; want [1 2] and 1", running, tokens)
	}
	p.Close()
	h.mu.Lock()
	tok := h.tokens[0]
	h.mu.Unlock()
	tok.mu.Lock()
	defer tok.mu.Unlock()
	if !tok.revoked {
		t.Error("the agent's token was not revoked when the pool closed")
	}
}

// TestPoolPermissionAsk: with "ask", the request is posted through the
// host to the recipient it names, and a person's answer (Pool.Answer)
// reaches the agent.
func TestPoolPermissionAsk(t *testing.T) {
	h := &fakeHost{posted: make(chan agentbridge.Event, 4)}
	p, entry := newPool(t, h, config.PermissionsAsk)
	go func() {
		ev := <-h.posted
		var pm acp.PermissionMeta
		if err := json.Unmarshal(ev.Meta.Extra[agentbridge.MetaPermission], &pm); err != nil || ev.To != "alice" {
			t.Errorf("permission request to %q with meta %s: %v", ev.To, ev.Meta.Extra[agentbridge.MetaPermission], err)
		}
		p.Answer(ev.ID, "no-such-option", "alice") // ignored
		p.Answer(ev.ID, "allow", "alice")
	}()
	reply, why, _ := turn(t, p, entry, 1, "PERMISSION please", "")
	if why != "" || !strings.Contains(reply, "permission: allow") {
		t.Fatalf("reply %q, why %q; want the allow option to reach the agent", reply, why)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.keys) != 1 || !strings.HasPrefix(h.keys[0], "trig-1 permission:acpy:") {
		t.Errorf("posts keyed %q, want one permission request keyed by its trigger", h.keys)
	}
}

// TestPoolCancelPostsWithdrawalBeforeTheRunEnds: the fake agent answers
// session/cancel at once, before the permission request's cancelled
// answer; the request's withdrawal notice, slow to post, is still posted
// before Run returns, while the run's claim holds (after it, the bridge
// would refuse it).
func TestPoolCancelPostsWithdrawalBeforeTheRunEnds(t *testing.T) {
	h := &fakeHost{posted: make(chan agentbridge.Event, 4), noticeDelay: 500 * time.Millisecond}
	p, entry := newPool(t, h, config.PermissionsAsk)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-h.posted // the permission request
		cancel(adapters.ErrCancelled)
	}()
	trig := agentbridge.Event{ID: "trig-1", From: "alice", Type: agentbridge.TypeMessage}
	_, why := p.Run(ctx, acp.Run{
		Invocation: acp.Invocation{ID: 1, Thread: "th", Participant: "acpy", TriggerID: trig.ID},
		Entry:      entry,
		Payload:    adapters.Payload{ThreadID: "th", EventID: trig.ID, From: "alice", Content: "PERMISSION then cancel"},
		Trigger:    trig,
		Progress:   func(adapters.ProgressRecord) {},
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.ContainsFunc(h.keys, func(k string) bool { return strings.HasSuffix(k, " permission-withdrawn") }) {
		t.Errorf("Run returned (why %q) before the withdrawal notice was posted; posts keyed %q", why, h.keys)
	}
}

// TestPoolCrashMidTurn: an agent that exits during its turn fails it with
// the exit code and the end of its stderr, and the next turn starts a new
// agent.
func TestPoolCrashMidTurn(t *testing.T) {
	h := &fakeHost{}
	p, entry := newPool(t, h, config.PermissionsDeny)
	_, why, _ := turn(t, p, entry, 1, "CRASH now", "")
	if !strings.Contains(why, "exit code 3") || !strings.Contains(why, "crashing on purpose") {
		t.Fatalf("why %q, want the exit code and the stderr", why)
	}
	if reply, why, _ := turn(t, p, entry, 2, "hello", ""); why != "" || !echoRE.MatchString(reply) {
		t.Errorf("the turn after the crash: reply %q, why %q", reply, why)
	}
}
