package storetest

import (
	"context"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// testClaimWait (contract 8.5): the holder of a run's claim puts it back
// to waiting until its participant's usage limit resets; meanwhile the
// pair's receipt says so and nobody may take it; once due, a coordinator
// serving the participant takes it at the next fence. Only the holder at
// its fence may do so, and not past the pending ttl.
func testClaimWait(t *testing.T, newStore Factory) {
	s, cs := claimStore(t, newStore)
	ws, ok := s.(agentbridge.ClaimWaitStore)
	if !ok {
		t.Skip("the store keeps no waiting claims")
	}
	ctx := context.Background()
	NewThread(t, s, "t")
	invite(t, s, "t", "claude")
	trigger := MustAppend(t, s, "t", Msg("user", "@claude hi"))
	laptop := agentbridge.Registration{ID: "laptop", Instance: "i1", Host: "laptop", TTLMillis: 60000,
		Agents: []agentbridge.CoordinatorAgent{{Name: "claude", Client: "claude", Kind: agentbridge.AgentKindAdapter}}}
	register(t, s, laptop)
	key := agentbridge.ClaimKey{Thread: "t", Event: trigger.ID, Participant: "claude"}
	res, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "i1"})
	if err != nil || !res.Granted {
		t.Fatalf("claim: %+v %v", res, err)
	}
	due := time.Now().Add(1500 * time.Millisecond)
	req := agentbridge.ClaimWaitRequest{ID: res.Claim.ID, Coordinator: "laptop", Instance: "i1", Fence: res.Claim.Fence,
		RetryAt: due.UTC().Format(time.RFC3339Nano), Reason: "waiting for claude's limit, until 15:04"}

	stale := req
	stale.Fence++
	_, _, err = ws.WaitClaim(ctx, stale, due)
	wantCode(t, "a wait at a stale fence", err, agentbridge.ECodeFenced)
	late := req
	late.PendingTTLMillis = 1000
	_, _, err = ws.WaitClaim(ctx, late, due)
	wantCode(t, "a wait past the pending ttl", err, agentbridge.ECodeInvalidField)

	req.PendingTTLMillis = time.Hour.Milliseconds()
	c, rc, err := ws.WaitClaim(ctx, req, due)
	if err != nil || c.State != agentbridge.ClaimWaiting || c.Coordinator != "" || c.DueAt == "" || c.Fence != res.Claim.Fence {
		t.Fatalf("WaitClaim: %+v %v", c, err)
	}
	if rc.State != agentbridge.ReceiptQueued || rc.Reason != req.Reason || rc.Participant != "claude" {
		t.Fatalf("the waiting receipt: %+v", rc)
	}
	if list, err := cs.Claimable(ctx, "laptop"); err != nil || len(list) != 0 {
		t.Fatalf("Claimable before the due time = %+v %v", list, err)
	}
	if got, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "i1"}); err != nil || got.Granted {
		t.Fatalf("a claim before the due time: %+v %v", got, err)
	}
	_, _, err = ws.WaitClaim(ctx, req, due)
	wantCode(t, "a second wait of a claim nobody holds", err, agentbridge.ECodeFenced)
	testutil.WaitFor(t, 10*time.Second, "the claim to fall due", func() bool {
		list, err := cs.Claimable(ctx, "laptop")
		return err == nil && len(list) == 1 && list[0].ID == c.ID
	})
	got, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "i1"})
	if err != nil || !got.Granted || got.Claim.Fence != res.Claim.Fence+1 || got.Claim.State != agentbridge.ClaimRunning {
		t.Fatalf("taking the due claim: %+v %v", got, err)
	}

	// A claim that waited for the limit and was not taken up again
	// expires saying so, not that nobody served the participant.
	second := MustAppend(t, s, "t", Msg("user", "@claude again"))
	key.Event = second.ID
	res, err = cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "i1"})
	if err != nil || !res.Granted {
		t.Fatalf("claim: %+v %v", res, err)
	}
	due = time.Now().Add(500 * time.Millisecond)
	req = agentbridge.ClaimWaitRequest{ID: res.Claim.ID, Coordinator: "laptop", Instance: "i1", Fence: res.Claim.Fence,
		RetryAt: due.UTC().Format(time.RFC3339Nano), PendingTTLMillis: 2000, Reason: "waiting for claude's limit, until 15:04"}
	if _, _, err := ws.WaitClaim(ctx, req, due); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the waiting claim to expire", func() bool {
		list, err := cs.DueClaims(ctx)
		return err == nil && len(list) == 1 && list[0].ID == res.Claim.ID
	})
	ev, expired, ok, err := cs.ExpireClaim(ctx, res.Claim.ID)
	at := due.UTC().Format("Jan 2 15:04 UTC")
	if err != nil || !ok || ev == nil || expired == nil ||
		ev.Text() != "claude waited for its usage limit to reset at "+at+", but no coordinator serving it took this message up again within 2s, so it was not answered." ||
		expired.State != agentbridge.ReceiptFailed || expired.Reason != "waited for claude's limit until "+at+"; not taken up again within 2s" {
		t.Fatalf("ExpireClaim of a claim that waited for a limit: %+v %+v %v %v", ev, expired, ok, err)
	}
}
