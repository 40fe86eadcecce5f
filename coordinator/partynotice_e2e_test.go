package coordinator_test

import (
	"context"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestPartyNoticeClaimLapses: another coordinator ("ghost") holds a party
// round's notice claim, so this coordinator, finding the round done,
// posts nothing; once the ghost's heartbeat lapses the bridge lists the
// claim to this coordinator, which takes it over (fence 2) and posts the
// one notice, naming both agents.
func TestPartyNoticeClaimLapses(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) { c.CoordinatorID = "here" })
	ctx := context.Background()
	th := partyThread(s, "party", map[string]any{"on": true, "max_agents": 2, "cross_talk": false})
	ghost := agentbridge.Registration{ID: "ghost", Instance: "g1", Host: "elsewhere", TTLMillis: 2000,
		Agents: []agentbridge.CoordinatorAgent{{Name: "dave", Client: "fake", Kind: "adapter"}}}
	if _, err := s.cl.RegisterCoordinator(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	tr := s.say(th, "all", "databases in go? fake@alice/1:sleep=1s")
	res, err := s.cl.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: agentbridge.ClaimKey{Thread: th, Event: tr.ID, Notice: "party:done"},
		Coordinator: "ghost", Instance: "g1"})
	if err != nil || !res.Granted {
		t.Fatalf("ghost's notice claim: %+v %v", res, err)
	}
	// The round ends, and this coordinator finds the notice claimed,
	// while the ghost heartbeats.
	testutil.WaitFor(t, waitLong, "the round to end here with its notice left to the ghost", func() bool {
		if _, err := s.cl.RegisterCoordinator(ctx, ghost); err != nil {
			t.Fatal(err)
		}
		r, err := s.db.PartyRoundOf(ctx, tr.ID)
		if err != nil || r.Stage != ledger.PartyStageDone {
			return false
		}
		pending, _, err := s.db.PendingNotices(ctx)
		return err == nil && len(pending) == 0
	})
	for _, e := range s.repliesTo(th, tr.ID) {
		if e.Meta.HasTag("party") {
			t.Fatalf("a notice was posted while the ghost held its claim: %+v", e)
		}
	}
	// Once the ghost lapsed, the claim is listed here; the claimable
	// poller (or this test, whichever comes first) takes it.
	var taken agentbridge.Claim
	testutil.WaitFor(t, waitLong, "the lapsed notice claim to be taken over", func() bool {
		claimable, _ := s.cl.Claimable(ctx, "here")
		for _, k := range claimable {
			if k.Notice == "party:done" {
				taken = k
				coordinator.TakeNoticeClaim(ctx, s.coord, taken)
			}
		}
		for _, e := range s.repliesTo(th, tr.ID) {
			if e.Meta.HasTag("party") {
				return true
			}
		}
		return false
	})
	n := s.waitPartyNotice(th, tr.ID)
	if n.From != "here" || !strings.Contains(n.Text(), "answered: alice, bob") || !strings.Contains(n.Text(), "cross_talk is off") {
		t.Errorf("notice %q from %s", n.Text(), n.From)
	}
	all, err := s.cl.Claims(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	var claims []agentbridge.Claim
	for _, k := range all {
		if k.Notice != "" {
			claims = append(claims, k)
		}
	}
	if len(claims) != 1 || claims[0].Coordinator != "here" || claims[0].Fence != 2 || claims[0].State != agentbridge.ClaimDone {
		t.Errorf("notice claims after the takeover: %+v, want party:done held by here at fence 2, done", claims)
	}
	// Taking it again posts nothing more (TakeNoticeClaim returns after
	// any post).
	if taken.ID != 0 {
		coordinator.TakeNoticeClaim(ctx, s.coord, taken)
	}
	notices := 0
	for _, e := range s.repliesTo(th, tr.ID) {
		if e.Meta.HasTag("party") {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d notices, want 1", notices)
	}
}
