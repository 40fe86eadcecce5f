package coordinator_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// restoreDrill runs a thread's first exchange, backs the bridge up, runs
// three more exchanges (which the restore takes back), and returns the
// backup's path. The coordinator's cursors are then past the backup's
// head, globally and in the thread.
func restoreDrill(s *stack, th string) string {
	s.t.Helper()
	first := s.say(th, "alice", "before the backup")
	s.waitReplies(th, first.ID, 1)
	backup := filepath.Join(s.dir, "backup.db")
	s.bridge.Backup(backup)
	for i := range 3 {
		e := s.say(th, "alice", fmt.Sprintf("lost by the restore %d", i))
		s.waitReplies(th, e.ID, 1)
	}
	return backup
}

// answeredOnce posts n triggers to alice and checks that each gets exactly
// one reply from one run.
func (s *stack) answeredOnce(th string, n int, what string) {
	s.t.Helper()
	var triggers []agentbridge.Event
	for i := range n {
		triggers = append(triggers, s.say(th, "alice", fmt.Sprintf("%s %d", what, i)))
	}
	for _, e := range triggers {
		s.waitReplies(th, e.ID, 1)
	}
	for _, e := range triggers {
		if r := s.repliesTo(th, e.ID); len(r) != 1 {
			s.t.Errorf("%q (seq %d): %d replies, want 1", e.Text(), e.Seq, len(r))
		}
		if runs := s.runCount(e.ID, "alice"); runs != 1 {
			s.t.Errorf("%q (seq %d): adapter ran %d times, want 1", e.Text(), e.Seq, runs)
		}
	}
}

// TestRestoreWhileRunning restores the bridge from an older backup while
// the coordinator runs: it sees the log's new epoch when it reconnects,
// rebases its cursors (the thread's too) and answers every trigger posted
// afterwards, whose seqs repeat ones it had processed, once; and it says
// so once.
func TestRestoreWhileRunning(t *testing.T) {
	t.Parallel()
	var logs testutil.Buffer
	s := newStack(t)
	s.logger = slog.New(slog.NewTextHandler(&logs, nil))
	s.startCoordinator()
	th := s.thread("restored")
	s.invite(th, "alice", agentbridge.Profile{})
	backup := restoreDrill(s, th)
	s.bridge.Stop()
	s.bridge.Restore(backup)
	s.bridge.Start()
	s.answeredOnce(th, 6, "after the restore")
	if n := strings.Count(logs.String(), "answering every event after the point where the logs part"); n != 1 {
		t.Errorf("the rebase was logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestRestoreWhileStopped restores the bridge while the coordinator is
// stopped, and posts more triggers than the restore took back before it
// starts again (startup_mode resume): the bridge's head is past the
// coordinator's cursor, so only the epoch tells, and no trigger is
// skipped.
func TestRestoreWhileStopped(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("restored while stopped")
	s.invite(th, "alice", agentbridge.Profile{})
	backup := restoreDrill(s, th)
	s.stopCoordinator()
	s.bridge.Stop()
	s.bridge.Restore(backup)
	s.bridge.Start()
	var waiting []agentbridge.Event
	for i := range 10 {
		waiting = append(waiting, s.say(th, "alice", fmt.Sprintf("while the coordinator was down %d", i)))
	}
	s.startCoordinator()
	for _, e := range waiting {
		s.waitReplies(th, e.ID, 1)
	}
	for _, e := range waiting {
		if r := s.repliesTo(th, e.ID); len(r) != 1 {
			t.Errorf("%q (seq %d): %d replies, want 1", e.Text(), e.Seq, len(r))
		}
	}
	s.answeredOnce(th, 3, "after the start")
}
