package client_test

import (
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// TestClaimsClient: the client's claim calls against a real bridge; the
// writes of a WithClaim context carry the fence, a stale one comes back
// as an *agentbridge.Error with code fenced and stores nothing, and a
// retry of the holder's own append is answered as the replay it is.
func TestClaimsClient(t *testing.T) {
	c := startBridge(t, "tok")
	ctx := t.Context()
	if _, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	invite := agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user", Content: []byte(`{"invite":{"participant_id":"claude","profile":{"client":"claude","model":"m"}}}`)}
	if _, err := c.Append(ctx, "t1", invite, ""); err != nil {
		t.Fatal(err)
	}
	trigger, err := c.Append(ctx, "t1", msg("user", "@claude hi"), "")
	if err != nil {
		t.Fatal(err)
	}
	req := agentbridge.ClaimRequest{ClaimKey: agentbridge.ClaimKey{Thread: "t1", Event: trigger.ID, Participant: "claude"}, Coordinator: "laptop", Instance: "i1"}
	_, err = c.Claim(ctx, req)
	wantCode(t, err, agentbridge.ECodeNotRegistered)
	for _, reg := range []agentbridge.Registration{
		{ID: "laptop", Instance: "i1", Host: "laptop", Agents: []agentbridge.CoordinatorAgent{{Name: "claude", Kind: "adapter"}}},
		{ID: "server", Instance: "s1", Host: "server", Agents: []agentbridge.CoordinatorAgent{{Name: "claude", Kind: "adapter"}}},
	} {
		if _, err := c.RegisterCoordinator(ctx, reg); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.Claim(ctx, req)
	if err != nil || !res.Granted || res.Claim.Fence != 1 {
		t.Fatalf("Claim = %+v %v", res, err)
	}
	held := client.WithClaim(ctx, res.Claim.ID, 1)
	if _, err := c.Append(held, "t1", msg("claude", "first part"), "k1"); err != nil {
		t.Fatalf("a fenced append: %v", err)
	}
	if err := c.SetPresence(held, "t1", agentbridge.PresenceInput{From: "claude", State: "typing"}); err != nil {
		t.Fatalf("fenced presence: %v", err)
	}

	// The claim moves on (the laptop deregisters: its run is taken over).
	if err := c.DeregisterCoordinator(ctx, "laptop", "i1"); err != nil {
		t.Fatal(err)
	}
	took, err := c.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: req.ClaimKey, Coordinator: "server", Instance: "s1"})
	if err != nil || !took.Granted || took.Claim.Fence != 2 || took.PreviousHost != "laptop" {
		t.Fatalf("takeover = %+v %v", took, err)
	}
	if list, err := c.Claimable(ctx, "server"); err != nil || len(list) != 0 {
		t.Fatalf("Claimable after the takeover = %+v %v", list, err)
	}
	before, _ := c.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "t1", After: -1})
	e := wantCode(t, func() error { _, err := c.Append(held, "t1", msg("claude", "stale"), "k2"); return err }(), agentbridge.ECodeFenced)
	if e.Status != 409 {
		t.Errorf("fenced status %d, want 409", e.Status)
	}
	_, _, err = c.PutReceipt(held, agentbridge.ReceiptInput{Thread: "t1", Event: trigger.ID, Participant: "claude", From: "laptop", State: agentbridge.ReceiptSucceeded})
	wantCode(t, err, agentbridge.ECodeFenced)
	wantCode(t, c.SetPresence(held, "t1", agentbridge.PresenceInput{From: "claude", State: "idle"}), agentbridge.ECodeFenced)
	// The retry of an append the old holder made while it held the claim
	// is a replay, not a new event.
	if ev, err := c.Append(held, "t1", msg("claude", "first part"), "k1"); err != nil || ev.Seq != before[len(before)-1].Seq {
		t.Fatalf("the replay = %+v %v", ev, err)
	}
	after, _ := c.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "t1", After: -1})
	if len(after) != len(before) {
		t.Fatalf("fenced writes stored %d events", len(after)-len(before))
	}
	if _, err := c.FinishClaim(ctx, res.Claim.ID, 1, "laptop", "i1"); err == nil {
		t.Fatal("the old holder finished the claim")
	}
	if done, err := c.FinishClaim(ctx, res.Claim.ID, 2, "server", "s1"); err != nil || done.State != agentbridge.ClaimDone {
		t.Fatalf("FinishClaim = %+v %v", done, err)
	}
	if list, err := c.Claims(ctx, "t1"); err != nil || len(list) != 1 || list[0].State != agentbridge.ClaimDone {
		t.Fatalf("Claims = %+v %v", list, err)
	}
}
