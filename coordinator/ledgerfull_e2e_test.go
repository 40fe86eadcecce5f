package coordinator_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestLedgerDiskFull fills the ledger's disk while an adapter runs: its
// outcome cannot be recorded, so its reply is not posted, and a trigger
// posted during the outage is not lost. Once there is space again, each
// trigger gets exactly one reply, each recorded, and the outage is logged
// once at each edge.
func TestLedgerDiskFull(t *testing.T) {
	t.Parallel()
	disk := testutil.SmallDisk(t, "4m")
	var logs testutil.Buffer
	s := newStack(t)
	s.ledgerPath = filepath.Join(disk, "coordinator.db")
	s.logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s.startCoordinator()
	th := s.thread("full")
	s.invite(th, "alice", agentbridge.Profile{})
	warm := s.say(th, "alice", "before the outage")
	s.waitReplies(th, warm.ID, 1)

	running := s.say(th, "alice", "fake:sleep=3s the run that ends on a full disk")
	s.waitStatusAny(running.ID, "alice", ledger.StatusRunning)
	filler := filepath.Join(disk, "filler")
	testutil.FillDisk(t, filler)
	testutil.WaitFor(t, waitLong, "the ledger's refusal logged", func() bool {
		return strings.Contains(logs.String(), "the ledger refuses writes")
	})
	if !strings.Contains(logs.String(), "record an invocation's outcome") {
		t.Errorf("the first refused write was not the run's outcome:\n%s", logs.String())
	}
	during := s.say(th, "alice", "posted during the outage")
	for _, e := range s.events(th) {
		if e.Meta.ReplyTo == running.ID || e.Meta.ReplyTo == during.ID {
			inv := s.invocations(e.Meta.ReplyTo)
			if len(inv) != 1 || inv[0].Status != ledger.StatusSucceeded {
				t.Errorf("reply %s posted while its outcome is not recorded: %+v", e.ID, inv)
			}
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for _, trig := range []string{running.ID, during.ID} {
		s.waitStatus(trig, "alice", ledger.StatusSucceeded)
		if got := s.waitReplies(th, trig, 1); len(got) != 1 {
			t.Errorf("trigger %s: %d replies, want 1", trig, len(got))
		}
	}
	after := s.say(th, "alice", "after the outage")
	s.waitReplies(th, after.ID, 1)
	s.stopCoordinator()
	for _, line := range []string{"the ledger refuses writes", "the ledger takes writes again"} {
		if n := strings.Count(logs.String(), line); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", line, n, logs.String())
		}
	}
	for _, trig := range []string{warm.ID, running.ID, during.ID, after.ID} {
		if got := s.repliesTo(th, trig); len(got) != 1 {
			t.Errorf("trigger %s: %d replies, want 1", trig, len(got))
		}
	}
}

// waitStatusAny waits until the pair's invocation has the given status.
func (s *stack) waitStatusAny(trigger, participant, status string) {
	s.t.Helper()
	testutil.WaitFor(s.t, waitLong, fmt.Sprintf("invocation %s/%s to be %s", trigger, participant, status), func() bool {
		for _, inv := range s.invocations(trigger) {
			if inv.Participant == participant && inv.Status == status {
				return true
			}
		}
		return false
	})
}
