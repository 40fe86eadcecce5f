package main

import (
	"path/filepath"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testutil"
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
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	ledgerURL := pg.Database(t)
	bin, fake := buildCoordBinaries(t)
	url, person, _ := logServe(t, bin, filepath.Join(t.TempDir(), "bridge.db"))
	cl := client.New(url, client.WithToken(person))
	a := newMachine(t, cl, url, fake, "laptop", "alice")
	b := newMachine(t, cl, url, fake, "server", "alice")
	for _, m := range []*machine{a, b} {
		m.set("max_invocations_per_minute", 1000)
		m.state = ledgerURL
		m.start(bin)
	}
	th := newClaimsThread(t, cl, "alice")
	const n = 30
	triggers := make([]agentbridge.Event, n)
	for i := range triggers {
		triggers[i] = th.say("alice", "hi alice "+string(rune('a'+i%26)))
	}
	testutil.WaitFor(t, 2*time.Minute, "a reply to each of the triggers", func() bool {
		return len(th.replies("alice")) == n
	})
	replies, ra, rb := th.replies("alice"), a.runsOf(), b.runsOf()
	for _, e := range triggers {
		if replies[e.ID] != 1 || ra[e.ID]+rb[e.ID] != 1 {
			t.Errorf("trigger %s: %d replies, %d runs (laptop %d, server %d); want 1 and 1",
				e.ID, replies[e.ID], ra[e.ID]+rb[e.ID], ra[e.ID], rb[e.ID])
		}
	}

	long := th.say("alice", "fake:sleep=3s a long one")
	var holder, other *machine
	testutil.WaitFor(t, 30*time.Second, "a coordinator to start the long run", func() bool {
		switch {
		case a.started(long.ID, "alice"):
			holder, other = a, b
		case b.started(long.ID, "alice"):
			holder, other = b, a
		}
		return holder != nil
	})
	if err := holder.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-holder.proc.done
	testutil.WaitFor(t, time.Minute, "the other coordinator's reply to the long one", func() bool {
		return th.replies("alice")[long.ID] > 0
	})
	if got := th.replies("alice")[long.ID]; got != 1 {
		t.Errorf("the long one: %d replies, want 1", got)
	}
	if got := other.runsOf()[long.ID]; got != 1 {
		t.Errorf("%s ran the long one %d times, want 1", other.id, got)
	}
	claims, err := cl.Claims(th.ctx, th.id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims {
		if c.Event == long.ID && (c.Coordinator != other.id || c.Fence != 2) {
			t.Errorf("the long one's claim = %+v, want it held by %s at fence 2", c, other.id)
		}
	}
}
