package main

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestClaimsRealServe claims a run at a real `serve` as a user's two
// coordinators would: the laptop claims it, stops heartbeating, the
// bridge marks the receipt interrupted and the server takes the run over
// at fence 2; the laptop's late reply is refused. serve is then stopped
// and started again on the same file: the claim is in the store, so the
// late reply is still refused.
func TestClaimsRealServe(t *testing.T) {
	stack.Heavy(t)
	bin := buildServeBinary(t)
	db := filepath.Join(t.TempDir(), "data", "bridge.db")
	p := startServe(t, bin, db)
	ctx := t.Context()
	c := client.New(p.URL, client.WithToken(p.Token))
	if _, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "t1", agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user",
		Content: []byte(`{"invite":{"participant_id":"claude","profile":{"client":"claude","model":"m"}}}`)}, ""); err != nil {
		t.Fatal(err)
	}
	trigger, err := c.Append(ctx, "t1", agentbridge.EventInput{From: "user", Content: []byte(`"@claude hi"`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	laptop := agentbridge.Registration{ID: "laptop", Instance: "l1", Host: "laptop.local", TTLMillis: 500,
		Agents: []agentbridge.CoordinatorAgent{{Name: "claude", Client: "claude", Kind: agentbridge.AgentKindAdapter}}}
	server := agentbridge.Registration{ID: "server", Instance: "s1", Host: "server.lan",
		Agents: []agentbridge.CoordinatorAgent{{Name: "claude", Client: "claude", Kind: agentbridge.AgentKindAdapter}}}
	for _, reg := range []agentbridge.Registration{laptop, server} {
		if _, err := c.RegisterCoordinator(ctx, reg); err != nil {
			t.Fatal(err)
		}
	}
	key := agentbridge.ClaimKey{Thread: "t1", Event: trigger.ID, Participant: "claude"}
	res, err := c.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "l1", Client: "claude"})
	if err != nil || !res.Granted || res.Claim.Fence != 1 {
		t.Fatalf("the laptop's claim: %+v %v", res, err)
	}
	laptopRun := client.WithClaim(ctx, res.Claim.ID, 1)
	if _, _, err := c.PutReceipt(laptopRun, agentbridge.ReceiptInput{Thread: "t1", Event: trigger.ID, Participant: "claude", From: "laptop", State: agentbridge.ReceiptRunning}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, "the interrupted receipt", func() bool {
		list, err := c.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: "t1", Event: trigger.ID})
		return err == nil && len(list) == 1 && list[0].State == agentbridge.ReceiptInterrupted && list[0].Reason == "laptop.local offline"
	})
	took, err := c.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "server", Instance: "s1"})
	if err != nil || !took.Granted || took.Claim.Fence != 2 || took.PreviousHost != "laptop.local" {
		t.Fatalf("the server's takeover: %+v %v", took, err)
	}
	late := agentbridge.EventInput{From: "claude", Content: []byte(`"late"`)}
	if _, err := c.Append(laptopRun, "t1", late, ""); agentbridge.ErrorCode(err) != agentbridge.ECodeFenced {
		t.Fatalf("the laptop's late reply: %v, want fenced", err)
	}

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done:
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit within 20s of SIGTERM")
	}
	p2 := startServe(t, bin, db)
	c2 := client.New(p2.URL, client.WithToken(p2.Token))
	if _, err := c2.Append(client.WithClaim(context.Background(), res.Claim.ID, 1), "t1", late, ""); agentbridge.ErrorCode(err) != agentbridge.ECodeFenced {
		t.Fatalf("the late reply after a restart: %v, want fenced", err)
	}
	if list, err := c2.Claims(ctx, "t1"); err != nil || len(list) != 1 || list[0].Fence != 2 || list[0].Coordinator != "server" {
		t.Fatalf("claims after a restart: %+v %v", list, err)
	}
}
