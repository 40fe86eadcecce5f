package coordinator_test

import (
	"context"
	"strconv"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	kit "github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// inOrder reports whether the states of rs follow the order of want (each
// a later entry of it: the reporter may coalesce steps, never reorder).
func inOrder(rs []agentbridge.Receipt, want ...string) bool {
	i := 0
	for _, r := range rs {
		for i < len(want) && want[i] != r.State {
			i++
		}
		if i == len(want) {
			return false
		}
	}
	return true
}

// TestReceiptsReported: a message that mentions an invited agent, an
// invited participant without an adapter and someone not invited gets a
// receipt for each: the agent's run from queued or running to succeeded
// with its invocation and reply, the one not invited skipped with the
// decision's reason, the one without an adapter anywhere queued, waiting
// at the bridge for a coordinator serving it (contract 7.1); a failing
// run ends failed with the error notice as its reply.
// They arrive live on the thread's stream and stay readable with GET.
func TestReceiptsReported(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("receipts")
	s.invite(th, "alice", agentbridge.Profile{})
	s.invite(th, "gemini", agentbridge.Profile{Client: "gemini", Model: "g"})
	log := kit.FollowReceipts(t, s.cl, th, -1)
	e := s.say(th, "all", "@alice @gemini @zed please look fake:sleep=1s")
	reply := s.waitReplies(th, e.ID, 1)[0]
	inv := s.waitStatus(e.ID, "alice", ledger.StatusSucceeded)

	testutil.WaitFor(t, waitLong, "alice's succeeded receipt", func() bool {
		rs := log.Of(e.ID, "alice")
		return len(rs) > 0 && rs[len(rs)-1].State == agentbridge.ReceiptSucceeded
	})
	// An ending is reported only once its reply is posted: the first
	// succeeded receipt already names it.
	rs := log.Of(e.ID, "alice")
	last := rs[len(rs)-1]
	if last.Reply != reply.ID || last.Invocation != strconv.FormatInt(inv.ID, 10) || last.From != "bridge-coordinator" {
		t.Errorf("alice's last receipt = %+v, want reply %s invocation %d", last, reply.ID, inv.ID)
	}
	if !inOrder(rs, "queued", "running", "succeeded") {
		t.Errorf("alice's receipts out of order: %+v", rs)
	}
	var sawRunning bool
	for _, r := range rs {
		sawRunning = sawRunning || r.State == agentbridge.ReceiptRunning
	}
	if !sawRunning {
		t.Errorf("a one-second run was never reported running: %+v", rs)
	}
	testutil.WaitFor(t, waitLong, "zed's skipped receipt", func() bool { return len(log.Of(e.ID, "zed")) > 0 })
	if r := log.Of(e.ID, "zed"); len(r) != 1 || r[0].State != agentbridge.ReceiptSkipped || r[0].Reason != "not invited" {
		t.Errorf("zed's receipts = %+v, want one skipped: not invited", r)
	}
	// Nobody serves gemini: the trigger waits at the bridge for a
	// coordinator serving it (a waiting claim, whose receipt the bridge
	// writes), not "skipped — no adapter".
	testutil.WaitFor(t, waitLong, "gemini's waiting receipt", func() bool {
		rs, err := s.cl.Receipts(context.Background(), agentbridge.ReceiptsQuery{Thread: th, Event: e.ID})
		for _, r := range rs {
			if err == nil && r.Participant == "gemini" {
				return r.State == agentbridge.ReceiptQueued && r.Reason == "waiting for a coordinator serving gemini"
			}
		}
		return false
	})
	for _, r := range log.Of(e.ID, "gemini") {
		if r.State == agentbridge.ReceiptSkipped {
			t.Errorf("a skipped receipt for gemini, whom the bridge holds the trigger for: %+v", r)
		}
	}

	fail := s.say(th, "alice", "fake:exit=3")
	notice := s.waitReplies(th, fail.ID, 1)[0]
	testutil.WaitFor(t, waitLong, "the failed receipt with the notice", func() bool {
		rs := log.Of(fail.ID, "alice")
		return len(rs) > 0 && rs[len(rs)-1].State == agentbridge.ReceiptFailed && rs[len(rs)-1].Reply == notice.ID
	})

	all, err := s.cl.Receipts(context.Background(), agentbridge.ReceiptsQuery{Thread: th})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range all {
		if r.Event != e.ID && r.Event != fail.ID {
			continue // receipts of the replies (their mentions are not allowed from an agent)
		}
		got[r.Event[len(r.Event)-4:]+"/"+r.Participant] = r.State
	}
	want := map[string]string{
		e.ID[len(e.ID)-4:] + "/alice": "succeeded", e.ID[len(e.ID)-4:] + "/gemini": "queued",
		e.ID[len(e.ID)-4:] + "/zed": "skipped", fail.ID[len(fail.ID)-4:] + "/alice": "failed",
	}
	if len(got) != len(want) {
		t.Fatalf("GET receipts = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("GET receipts[%s] = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

// TestReceiptsCatchUpAfterBridgeOutage: receipts of runs that changed while
// the bridge was down reach it once it is back (the reporter reads them
// from the ledger, so nothing is lost while it retries).
func TestReceiptsCatchUpAfterBridgeOutage(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("outage")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "fake:sleep=2s")
	s.waitStatus(e.ID, "alice", ledger.StatusRunning)
	testutil.WaitFor(t, waitLong, "the running receipt", func() bool {
		rs, err := s.cl.Receipts(context.Background(), agentbridge.ReceiptsQuery{Thread: th, Event: e.ID})
		return err == nil && len(rs) == 1 && rs[0].State == agentbridge.ReceiptRunning
	})
	s.bridge.Stop()
	testutil.WaitFor(t, waitLong, "the run to end while the bridge is down", func() bool {
		invs := s.invocations(e.ID)
		return len(invs) == 1 && invs[0].Status == ledger.StatusSucceeded
	})
	s.bridge.Start()
	testutil.WaitFor(t, waitLong, "the succeeded receipt after the outage", func() bool {
		rs, err := s.cl.Receipts(context.Background(), agentbridge.ReceiptsQuery{Thread: th, Event: e.ID})
		return err == nil && len(rs) == 1 && rs[0].State == agentbridge.ReceiptSucceeded && rs[0].Reply != ""
	})
}

// TestReceiptsOfCancelledRuns: a cancelled running run's receipt ends
// cancelled with the cancel notice as its reply; a queued one that was
// dropped ends cancelled with none.
func TestReceiptsOfCancelledRuns(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("cancel receipts")
	s.invite(th, "alice", agentbridge.Profile{})
	run := s.say(th, "alice", "fake:hang")
	queued := s.say(th, "alice", "queued one")
	s.waitStatus(run.ID, "alice", ledger.StatusRunning)
	s.control(th, "user", map[string]any{"cancel": map[string]any{"participant_id": "alice"}})
	testutil.WaitFor(t, waitLong, "the cancel notice", func() bool { return len(s.repliesTo(th, run.ID)) == 1 })
	notice := s.repliesTo(th, run.ID)[0]
	for _, c := range []struct{ event, reply string }{{run.ID, notice.ID}, {queued.ID, ""}} {
		testutil.WaitFor(t, waitLong, "a cancelled receipt for "+c.event, func() bool {
			rs, err := s.cl.Receipts(context.Background(), agentbridge.ReceiptsQuery{Thread: th, Event: c.event})
			return err == nil && len(rs) == 1 && rs[0].State == agentbridge.ReceiptCancelled && rs[0].Reply == c.reply
		})
	}
}
