package coordinator_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestShutdownGraceLetsAdapterFinish: on shutdown a running adapter may
// finish within shutdown_grace_s, and its reply is posted.
func TestShutdownGraceLetsAdapterFinish(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) { c.ShutdownGrace = 20 * time.Second })
	th := s.thread("grace")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "fake:sleep=500ms")
	s.waitStatus(e.ID, "alice", ledger.StatusRunning)
	s.stopCoordinator()
	if got := s.repliesTo(th, e.ID); len(got) != 1 || got[0].From != "alice" {
		t.Fatalf("replies after graceful shutdown: %+v, want one from alice", got)
	}
}

// TestInterruptedIsRerunOnResume: an adapter still running when the grace
// period ends is interrupted, and the next start runs it again, giving
// exactly one reply.
func TestInterruptedIsRerunOnResume(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) { c.ShutdownGrace = 100 * time.Millisecond })
	th := s.thread("interrupted")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "fake:sleep=2s")
	s.waitStatus(e.ID, "alice", ledger.StatusRunning)
	// The record says running before the adapter process starts; the
	// run to interrupt is the one the adapter has begun.
	testutil.WaitFor(t, waitLong, "the first run to start", func() bool { return s.runCount(e.ID, "alice") == 1 })
	s.stopCoordinator()
	if got := s.repliesTo(th, e.ID); len(got) != 0 {
		t.Fatalf("replies after an interrupted run: %+v", got)
	}
	s.startCoordinator()
	s.waitReplies(th, e.ID, 1)
	s.waitStatus(e.ID, "alice", ledger.StatusSucceeded)
	if got := s.repliesTo(th, e.ID); len(got) != 1 {
		t.Errorf("%d replies, want exactly 1", len(got))
	}
	if n := s.runCount(e.ID, "alice"); n != 2 {
		t.Errorf("adapter ran %d times, want 2 (interrupted, then re-run)", n)
	}
}

// TestRecoveryDoesNotRerunAnsweredPair: a record left unfinished whose
// reply is already in the thread (a crash between the post and its record)
// is closed without running the adapter again.
func TestRecoveryDoesNotRerunAnsweredPair(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("answered")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "hello")
	reply := s.waitReplies(th, e.ID, 1)[0]
	inv := s.waitStatus(e.ID, "alice", ledger.StatusSucceeded)
	s.stopCoordinator()
	s.withLedger(func(db *ledger.DB) error { return db.SetStatus(context.Background(), inv.ID, ledger.StatusRunning, "") })
	s.startCoordinator()
	got := s.waitStatus(e.ID, "alice", ledger.StatusSucceeded)
	if got.ReplyEventID != reply.ID {
		t.Errorf("recovered record's reply = %q, want %s", got.ReplyEventID, reply.ID)
	}
	if n := s.runCount(e.ID, "alice"); n != 1 {
		t.Errorf("adapter ran %d times, want 1", n)
	}
	if r := s.repliesTo(th, e.ID); len(r) != 1 {
		t.Errorf("%d replies, want 1", len(r))
	}
}

// TestStartupModeEnd: with startup_mode end, what was posted while the
// coordinator was down is skipped; with resume it is answered.
func TestStartupModeEnd(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("modes")
	s.invite(th, "alice", agentbridge.Profile{})
	s.stopCoordinator()
	missed := s.say(th, "alice", "while you were out")
	s.cfg.StartupMode = coordinator.StartupEnd
	s.startCoordinator()
	now := s.say(th, "alice", "now")
	s.waitReplies(th, now.ID, 1)
	if got := s.repliesTo(th, missed.ID); len(got) != 0 {
		t.Errorf("startup_mode end answered an event posted while down: %+v", got)
	}
	s.stopCoordinator()
	missed2 := s.say(th, "alice", "while you were out again")
	s.cfg.StartupMode = coordinator.StartupResume
	s.startCoordinator()
	s.waitReplies(th, missed2.ID, 1)
}

// TestFallsBackToLongPoll: when the SSE stream keeps failing (a proxy
// refuses it), the coordinator follows the log by long-polling instead.
func TestFallsBackToLongPoll(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	target, err := url.Parse(s.bridge.URL())
	if err != nil {
		t.Fatal(err)
	}
	var streamTries atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/events/stream" {
			streamTries.Add(1)
			http.Error(w, `{"error":{"code":"unavailable","message":"no streams through this proxy"}}`, http.StatusServiceUnavailable)
			return
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer proxy.Close()
	s.cfg.BridgeURL = proxy.URL
	s.startCoordinator()
	th := s.thread("poll")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "over long-poll")
	if r := s.waitReplies(th, e.ID, 1)[0]; r.From != "alice" {
		t.Errorf("reply from %s", r.From)
	}
	if streamTries.Load() < 3 {
		t.Errorf("%d stream attempts before falling back, want at least 3", streamTries.Load())
	}
	// Stop the coordinator (ending its long-poll) before the proxy closes.
	s.stopCoordinator()
}

// TestSkipGrace: a second stop request interrupts running adapters at
// once instead of waiting for them through the grace period.
func TestSkipGrace(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) { c.ShutdownGrace = time.Minute })
	th := s.thread("skip")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "fake:sleep=20s")
	s.waitStatus(e.ID, "alice", ledger.StatusRunning)
	s.cancel()
	s.coord.SkipGrace()
	s.stopCoordinator()
	db, err := ledger.Open(context.Background(), s.dir+"/coordinator.db", "bridge-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	list, err := db.Invocations(context.Background(), ledger.Filter{Thread: th})
	if err != nil || len(list) != 1 || list[0].Status != ledger.StatusInterrupted {
		t.Fatalf("after SkipGrace: %+v, %v; want one interrupted record", list, err)
	}
}

// TestCursorAheadOfBridge: a ledger cursor past the bridge's head (the
// bridge was restored from an older backup) is moved to the head, and the
// coordinator goes on answering.
func TestCursorAheadOfBridge(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("ahead")
	s.invite(th, "alice", agentbridge.Profile{})
	s.stopCoordinator()
	s.withLedger(func(db *ledger.DB) error { return db.SetCursor(context.Background(), 1_000_000) })
	s.startCoordinator()
	testutil.WaitFor(t, waitLong, "the cursor to move back to the head", func() bool {
		c, _, err := s.db.Cursor(context.Background())
		return err == nil && c < 1_000_000
	})
	e := s.say(th, "alice", "after the restore")
	s.waitReplies(th, e.ID, 1)
}

// TestReplayedLogIsNotDecidedAgain: a global cursor set back (a ledger
// restored from an older copy) makes the coordinator read events it has
// processed; each thread's own cursor stops them being decided, and so run,
// again, while the events after it are answered as usual.
func TestReplayedLogIsNotDecidedAgain(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) { c.StartupMode = coordinator.StartupResume })
	th := s.thread("replayed")
	s.invite(th, "alice", agentbridge.Profile{})
	first := s.say(th, "alice", "one")
	s.waitReplies(th, first.ID, 1)
	second := s.say(th, "alice", "two")
	s.waitReplies(th, second.ID, 1)
	s.stopCoordinator()
	s.withLedger(func(db *ledger.DB) error { return db.SetCursor(context.Background(), 0) })
	s.startCoordinator()
	third := s.say(th, "alice", "three")
	s.waitReplies(th, third.ID, 1)
	for _, e := range []agentbridge.Event{first, second, third} {
		if n := s.runCount(e.ID, "alice"); n != 1 {
			t.Errorf("%q: adapter ran %d times, want 1", e.Text(), n)
		}
		if r := s.repliesTo(th, e.ID); len(r) != 1 {
			t.Errorf("%q: %d replies, want 1", e.Text(), len(r))
		}
	}
}

// TestBacklogCommittedTogether: the events a coordinator finds waiting (it
// was down while they were posted) arrive together, and are decided and
// committed together (their runs share the commit's queued time); each is
// answered once, an event of a thread already in the batch after the
// other.
func TestBacklogCommittedTogether(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) {
		c.StartupMode, c.MaxConcurrency, c.MaxInvocationsPerMinute = coordinator.StartupResume, 10, 0
	})
	threads := make([]string, 10)
	for i := range threads {
		threads[i] = s.thread(fmt.Sprintf("backlog %d", i))
		s.invite(threads[i], "alice", agentbridge.Profile{})
	}
	s.stopCoordinator()
	var triggers []agentbridge.Event
	for _, th := range threads {
		triggers = append(triggers, s.say(th, "alice", "while you were out"))
	}
	again := s.say(threads[0], "alice", "and again")
	s.startCoordinator()
	queuedAt := map[string]int{}
	for _, e := range append(triggers, again) {
		s.waitReplies(e.Thread, e.ID, 1)
		inv := s.waitStatus(e.ID, "alice", ledger.StatusSucceeded)
		queuedAt[inv.QueuedAt]++
		if n := s.runCount(e.ID, "alice"); n != 1 {
			t.Errorf("%s in %s: adapter ran %d times, want 1", e.Text(), e.Thread, n)
		}
		if r := s.repliesTo(e.Thread, e.ID); len(r) != 1 {
			t.Errorf("%s in %s: %d replies, want 1", e.Text(), e.Thread, len(r))
		}
	}
	if len(queuedAt) >= len(triggers) {
		t.Errorf("queued at %v: every run was committed on its own", queuedAt)
	}
}
