package main

import (
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestSharedLedgerOneAgent: two coordinators (laptop and server, each its
// own process, HOME, status port and token) share one PostgreSQL ledger
// and both serve alice (contract 7.1: "two coordinators serving the same
// agent share its triggers, each trigger once"). Thirty triggers get one
// reply and one run each across both. Then the coordinator running a long
// trigger is killed (-9): the other takes the run over at the bridge,
// although the shared ledger's record is the dead one's, and answers it
// once.
func TestSharedLedgerOneAgent(t *testing.T) {
	stack.Heavy(t)
	s := stack.New(t, bins, "")
	s.Ledger = pg.Database(t)
	a, b, th, triggers := aliceOnTwoMachines(t, s, 30)
	cl := s.Person
	replies, ra, rb := th.replies("alice"), a.RunsOf(), b.RunsOf()
	for _, e := range triggers {
		if replies[e.ID] != 1 || ra[e.ID]+rb[e.ID] != 1 {
			t.Errorf("trigger %s: %d replies, %d runs (laptop %d, server %d); want 1 and 1",
				e.ID, replies[e.ID], ra[e.ID]+rb[e.ID], ra[e.ID], rb[e.ID])
		}
	}

	long := th.say("alice", "fake:sleep=3s a long one")
	holder, other := runHolder(t, a, b, long.ID, "alice")
	holder.Kill()
	testutil.WaitFor(t, time.Minute, "the other coordinator's reply to the long one", func() bool {
		return th.replies("alice")[long.ID] > 0
	})
	if got := th.replies("alice")[long.ID]; got != 1 {
		t.Errorf("the long one: %d replies, want 1", got)
	}
	if got := other.RunsOf()[long.ID]; got != 1 {
		t.Errorf("%s ran the long one %d times, want 1", other.ID, got)
	}
	claims, err := cl.Claims(th.ctx, th.id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims {
		if c.Event == long.ID && (c.Coordinator != other.ID || c.Fence != 2) {
			t.Errorf("the long one's claim = %+v, want it held by %s at fence 2", c, other.ID)
		}
	}
}
