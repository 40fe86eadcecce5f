package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// claimStore is newStore's store as a ClaimStore, or skips t.
func claimStore(t *testing.T, newStore Factory) (agentbridge.EventStore, agentbridge.ClaimStore) {
	s := newStore(t, nil)
	cs, ok := s.(agentbridge.ClaimStore)
	if !ok {
		t.Skip("the store keeps no claims")
	}
	return s, cs
}

// register registers reg on s or fails t.
func register(t *testing.T, s agentbridge.EventStore, reg agentbridge.Registration) {
	t.Helper()
	if _, err := s.(agentbridge.CoordinatorStore).RegisterCoordinator(context.Background(), reg); err != nil {
		t.Fatal(err)
	}
}

// invite invites participants (client: their id) into thread.
func invite(t *testing.T, s agentbridge.EventStore, thread string, participants ...string) {
	t.Helper()
	for _, p := range participants {
		MustAppend(t, s, thread, Control("user", `{"invite":{"participant_id":"`+p+`","profile":{"client":"`+p+`","model":"m"}}}`))
	}
}

// wantCode fails t unless err is an *agentbridge.Error with code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if agentbridge.ErrorCode(err) != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// testClaims: the first claimant wins at fence 1, the same instance again
// is answered the same, another live coordinator is refused and told the
// holder; a restarted holder and a lapsed one are taken over at fence+1;
// fenced appends and receipts with a stale fence are refused storing
// nothing; a finish is idempotent for the holder; claims of unregistered
// coordinators and bad requests are refused.
func testClaims(t *testing.T, newStore Factory) {
	s, cs := claimStore(t, newStore)
	ctx := context.Background()
	NewThread(t, s, "t")
	invite(t, s, "t", "claude", "codex")
	trigger := MustAppend(t, s, "t", Msg("user", "@claude hi"))

	laptop := agentbridge.Registration{ID: "laptop", Instance: "i1", Host: "laptop.local", TTLMillis: 60000,
		Agents: []agentbridge.CoordinatorAgent{{Name: "claude", Client: "claude", Kind: agentbridge.AgentKindAdapter}}}
	server := agentbridge.Registration{ID: "server", Instance: "s1", Host: "server",
		Agents: []agentbridge.CoordinatorAgent{{Name: "codex", Client: "codex", Kind: "adapter"}, {Name: "claude", Client: "claude", Kind: "adapter"}}}
	key := agentbridge.ClaimKey{Thread: "t", Event: trigger.ID, Participant: "claude"}

	_, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "i1"})
	wantCode(t, "a claim before registering", err, agentbridge.ECodeNotRegistered)
	register(t, s, laptop)
	register(t, s, server)
	_, err = cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "other"})
	wantCode(t, "a claim by another instance", err, agentbridge.ECodeNotRegistered)

	res, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "i1", Client: "claude"})
	c := res.Claim
	if err != nil || !res.Granted || c.ID == 0 || c.Fence != 1 || c.State != agentbridge.ClaimRunning || c.Coordinator != "laptop" ||
		c.Host != "laptop.local" || c.Client != "claude" || c.CreatedAt == "" || c.ClaimedAt == "" || res.PreviousHost != "" {
		t.Fatalf("first claim: %+v %v", res, err)
	}
	if again, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "i1"}); err != nil || !again.Granted || again.Claim.Fence != 1 || again.Claim.ID != c.ID {
		t.Fatalf("the same claim again: %+v %v, want granted at fence 1", again, err)
	}
	if other, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "server", Instance: "s1"}); err != nil || other.Granted ||
		other.Claim.Coordinator != "laptop" || other.Claim.Host != "laptop.local" || other.Claim.Fence != 1 {
		t.Fatalf("a second coordinator's claim: %+v %v, want refused naming laptop", other, err)
	}

	// Writes fenced at the current fence pass; others store nothing.
	f1 := &agentbridge.ClaimFence{ID: c.ID, Fence: 1, Coordinator: "laptop"}
	if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: Msg("claude", "hello"), Fence: f1}); err != nil {
		t.Fatalf("a fenced reply at the current fence: %v", err)
	}
	head, _ := s.Head(ctx)
	for _, f := range []agentbridge.ClaimFence{{ID: c.ID, Fence: 2, Coordinator: "laptop"}, {ID: c.ID, Fence: 1, Coordinator: "server"}, {ID: c.ID + 100, Fence: 1}} {
		_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: Msg("claude", "stale"), Fence: &f})
		wantCode(t, "a reply with a stale fence", err, agentbridge.ECodeFenced)
		wantCode(t, "CheckFence", cs.CheckFence(ctx, f), agentbridge.ECodeFenced)
	}
	if h, _ := s.Head(ctx); h != head {
		t.Fatalf("a fenced append stored something: head %d, want %d", h, head)
	}
	if err := cs.CheckFence(ctx, *f1); err != nil {
		t.Fatalf("CheckFence at the current fence: %v", err)
	}
	rs := s.(agentbridge.ReceiptStore)
	if _, _, err := rs.PutReceipt(ctx, agentbridge.ReceiptInput{Thread: "t", Event: trigger.ID, Participant: "claude", From: "laptop", State: agentbridge.ReceiptRunning, Fence: f1}); err != nil {
		t.Fatalf("a fenced receipt: %v", err)
	}
	_, _, err = rs.PutReceipt(ctx, agentbridge.ReceiptInput{Thread: "t", Event: trigger.ID, Participant: "claude", From: "laptop", State: agentbridge.ReceiptFailed,
		Fence: &agentbridge.ClaimFence{ID: c.ID, Fence: 2, Coordinator: "laptop"}})
	wantCode(t, "a receipt with a stale fence", err, agentbridge.ECodeFenced)
	if list, _ := rs.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: "t", Event: trigger.ID}); len(list) != 1 || list[0].State != agentbridge.ReceiptRunning {
		t.Fatalf("receipts after a fenced one: %+v", list)
	}

	// The laptop's coordinator restarts: its new instance takes its run
	// over.
	laptop.Instance = "i2"
	register(t, s, laptop)
	res, err = cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "i2"})
	if err != nil || !res.Granted || res.Claim.Fence != 2 || res.Claim.Instance != "i2" {
		t.Fatalf("the restarted coordinator's claim: %+v %v, want granted at fence 2", res, err)
	}
	_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: Msg("claude", "late"), Fence: f1})
	wantCode(t, "the old instance's reply", err, agentbridge.ECodeFenced)

	// The laptop goes quiet: its registration lapses, the sweeper's steps
	// interrupt the receipt once, and the server takes the run over.
	laptop.TTLMillis = 300
	register(t, s, laptop)
	var due []agentbridge.Claim
	testutil.WaitFor(t, 10*time.Second, "the laptop's claim to be due", func() bool {
		due, err = cs.DueClaims(ctx)
		return err == nil && len(due) == 1 && due[0].ID == c.ID
	})
	rc, changed, err := cs.InterruptClaim(ctx, c.ID, 2)
	if err != nil || !changed || rc.State != agentbridge.ReceiptInterrupted || rc.Reason != "laptop.local offline" || rc.From != agentbridge.ClaimSender {
		t.Fatalf("InterruptClaim: %+v %v %v", rc, changed, err)
	}
	if _, changed, err := cs.InterruptClaim(ctx, c.ID, 2); err != nil || changed {
		t.Fatalf("InterruptClaim again: %v %v, want nothing changed", changed, err)
	}
	if due, err := cs.DueClaims(ctx); err != nil || len(due) != 0 {
		t.Fatalf("due after the interruption: %+v %v", due, err)
	}
	if list, err := cs.Claimable(ctx, "server"); err != nil || len(list) != 1 || list[0].ID != c.ID {
		t.Fatalf("Claimable(server) = %+v %v, want the lapsed run", list, err)
	}
	res, err = cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "server", Instance: "s1"})
	if err != nil || !res.Granted || res.Claim.Fence != 3 || res.Claim.Coordinator != "server" || res.PreviousHost != "laptop.local" {
		t.Fatalf("the takeover: %+v %v, want granted at fence 3 from laptop.local", res, err)
	}
	_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: Msg("claude", "back from a partition"),
		Fence: &agentbridge.ClaimFence{ID: c.ID, Fence: 2, Coordinator: "laptop"}})
	wantCode(t, "the partitioned laptop's reply", err, agentbridge.ECodeFenced)
	if !strings.Contains(err.Error(), "server on server (fence 3)") {
		t.Errorf("the refusal %q does not name the new holder", err)
	}

	// Only the holder at its fence finishes, as often as it likes.
	_, err = cs.FinishClaim(ctx, c.ID, 2, "laptop")
	wantCode(t, "a stale finish", err, agentbridge.ECodeFenced)
	for range 2 {
		if done, err := cs.FinishClaim(ctx, c.ID, 3, "server"); err != nil || done.State != agentbridge.ClaimDone {
			t.Fatalf("finish: %+v %v", done, err)
		}
	}
	if res, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "server", Instance: "s1"}); err != nil || res.Granted {
		t.Fatalf("a claim of a done run: %+v %v, want not granted", res, err)
	}
	if err := cs.CheckFence(ctx, agentbridge.ClaimFence{ID: c.ID, Fence: 3, Coordinator: "server"}); err != nil {
		t.Fatalf("a write after the holder's own finish: %v", err)
	}

	// A notice is claimed once.
	nk := agentbridge.ClaimKey{Thread: "t", Event: trigger.ID, Notice: "party:1", Round: 1}
	if res, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: nk, Coordinator: "server", Instance: "s1"}); err != nil || !res.Granted || res.Claim.Fence != 1 {
		t.Fatalf("a notice claim: %+v %v", res, err)
	}
	register(t, s, laptop)
	if res, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: nk, Coordinator: "laptop", Instance: "i2"}); err != nil || res.Granted {
		t.Fatalf("a second notice claim: %+v %v, want not granted", res, err)
	}

	for _, bad := range []agentbridge.ClaimRequest{
		{ClaimKey: agentbridge.ClaimKey{Thread: "t", Event: trigger.ID}, Coordinator: "server", Instance: "s1"},
		{ClaimKey: agentbridge.ClaimKey{Thread: "t", Event: trigger.ID, Participant: "a", Notice: "n"}, Coordinator: "server", Instance: "s1"},
		{ClaimKey: agentbridge.ClaimKey{Thread: "t", Participant: "a"}, Coordinator: "server", Instance: "s1"},
		{ClaimKey: agentbridge.ClaimKey{Thread: "t", Event: trigger.ID, Participant: "a"}, Coordinator: "bad id", Instance: "s1"},
		{ClaimKey: agentbridge.ClaimKey{Thread: "t", Event: trigger.ID, Participant: "a"}, Coordinator: "server"},
		{ClaimKey: agentbridge.ClaimKey{Thread: "t", Event: trigger.ID, Participant: "a"}, Coordinator: "server", Instance: "s1", PendingTTLMillis: 5},
		{ClaimKey: agentbridge.ClaimKey{Thread: "t", Event: "nope", Participant: "a"}, Coordinator: "server", Instance: "s1"},
		{ClaimKey: agentbridge.ClaimKey{Thread: "missing", Event: trigger.ID, Participant: "a"}, Coordinator: "server", Instance: "s1"},
	} {
		if _, err := cs.Claim(ctx, bad); agentbridge.ErrorCode(err) == agentbridge.ECodeInternal {
			t.Errorf("Claim(%+v) = %v, want a typed error", bad, err)
		}
	}
	if list, err := cs.Claims(ctx, "t"); err != nil || len(list) != 2 || list[0].ID != c.ID || list[1].Notice != "party:1" {
		t.Fatalf("Claims(t) = %+v %v", list, err)
	}
	served, err := cs.ServedEver(ctx)
	if err != nil || served["claude"] != "claude" || served["codex"] != "codex" || len(served) != 2 {
		t.Fatalf("ServedEver = %v %v", served, err)
	}
}

// testWaitingClaims: a claim for a participant nobody serves waits with a
// queued receipt, is listed to the coordinator that serves it when it
// comes and taken at fence 1; one that waits past its ttl expires once,
// with one error message from the bridge and a failed receipt.
func testWaitingClaims(t *testing.T, newStore Factory) {
	s, cs := claimStore(t, newStore)
	ctx := context.Background()
	NewThread(t, s, "t")
	MustAppend(t, s, "t", Control("user", `{"invite":{"participant_id":"gemini","profile":{"client":"gemini-cli","model":"m"}}}`))
	invite(t, s, "t", "ghost")
	trigger := MustAppend(t, s, "t", Msg("user", "@gemini @ghost hi"))
	server := agentbridge.Registration{ID: "server", Instance: "s1", Host: "server",
		Agents: []agentbridge.CoordinatorAgent{{Name: "codex", Client: "codex", Kind: "adapter"}}}
	register(t, s, server)
	key := agentbridge.ClaimKey{Thread: "t", Event: trigger.ID, Participant: "gemini"}
	res, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "server", Instance: "s1", Wait: true, Client: "gemini-cli"})
	if err != nil || res.Granted || res.Claim.State != agentbridge.ClaimWaiting || res.Claim.Fence != 0 || res.Claim.Coordinator != "" || res.Claim.ExpiresAt == "" {
		t.Fatalf("a waiting claim: %+v %v", res, err)
	}
	rs := s.(agentbridge.ReceiptStore)
	if list, _ := rs.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: "t", Event: trigger.ID}); len(list) != 1 || list[0].State != agentbridge.ReceiptQueued ||
		list[0].Reason != "waiting for a coordinator serving gemini" {
		t.Fatalf("the waiting claim's receipt: %+v", list)
	}
	if again, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "server", Instance: "s1", Wait: true}); err != nil || again.Granted || again.Claim.ID != res.Claim.ID {
		t.Fatalf("waiting again: %+v %v", again, err)
	}
	if list, err := cs.Claimable(ctx, "server"); err != nil || len(list) != 0 {
		t.Fatalf("Claimable(server) = %+v %v, want nothing: it serves no gemini", list, err)
	}
	register(t, s, agentbridge.Registration{ID: "laptop", Instance: "l1", Host: "laptop",
		Agents: []agentbridge.CoordinatorAgent{{Name: "g", Client: "gemini-cli", Kind: "acp"}}})
	if list, err := cs.Claimable(ctx, "laptop"); err != nil || len(list) != 1 || list[0].ID != res.Claim.ID {
		t.Fatalf("Claimable(laptop) = %+v %v, want the waiting claim (served by client)", list, err)
	}
	if got, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "l1"}); err != nil || !got.Granted || got.Claim.Fence != 1 || got.Claim.State != agentbridge.ClaimRunning {
		t.Fatalf("taking the waiting claim: %+v %v", got, err)
	}

	ghost := agentbridge.ClaimKey{Thread: "t", Event: trigger.ID, Participant: "ghost"}
	res, err = cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: ghost, Coordinator: "server", Instance: "s1", Wait: true, PendingTTLMillis: 200})
	if err != nil || res.Claim.State != agentbridge.ClaimWaiting {
		t.Fatalf("a short wait: %+v %v", res, err)
	}
	testutil.WaitFor(t, 10*time.Second, "the wait to be due", func() bool {
		due, err := cs.DueClaims(ctx)
		return err == nil && len(due) == 1 && due[0].ID == res.Claim.ID
	})
	if list, _ := cs.Claimable(ctx, "server"); len(list) != 0 {
		t.Fatalf("an expired wait is claimable: %+v", list)
	}
	ev, rc, ok, err := cs.ExpireClaim(ctx, res.Claim.ID)
	if err != nil || !ok || ev == nil || rc == nil || ev.From != agentbridge.ClaimSender || !ev.Meta.HasTag("error") || ev.Meta.ReplyTo != trigger.ID ||
		string(ev.Meta.Extra["participant"]) != `"ghost"` || !strings.Contains(ev.Text(), "Nobody served ghost within 200ms") || rc.State != agentbridge.ReceiptFailed {
		t.Fatalf("ExpireClaim: %+v %+v %v %v", ev, rc, ok, err)
	}
	if ev, rc, ok, err := cs.ExpireClaim(ctx, res.Claim.ID); err != nil || ok || ev != nil || rc != nil {
		t.Fatalf("ExpireClaim again: %v %v, want nothing", ok, err)
	}
	evs, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "t", After: -1})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.From == agentbridge.ClaimSender {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d messages from the bridge, want 1", n)
	}
	if list, _ := cs.Claims(ctx, "t"); len(list) != 2 || list[1].State != agentbridge.ClaimExpired {
		t.Fatalf("claims after the expiry: %+v", list)
	}
}

// testUnservedNotices: the "nobody served" message is posted once per
// (thread, participant) per pending ttl, naming how many messages waited,
// and never for a participant no longer invited (contract 8.3); the
// store refuses a waiting claim for a human or a participant not invited.
func testUnservedNotices(t *testing.T, newStore Factory) {
	s, cs := claimStore(t, newStore)
	ctx := context.Background()
	NewThread(t, s, "t")
	MustAppend(t, s, "t", Control("user", `{"invite":{"participant_id":"g","profile":{"client":"gemini","model":"m"}}}`))
	invite(t, s, "t", "leaving")
	register(t, s, agentbridge.Registration{ID: "server", Instance: "s1", Host: "server"})
	file := func(p string, ttl time.Duration) (agentbridge.Claim, error) {
		e := MustAppend(t, s, "t", Msg("user", "hi"))
		res, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: agentbridge.ClaimKey{Thread: "t", Event: e.ID, Participant: p},
			Coordinator: "server", Instance: "s1", Wait: true, PendingTTLMillis: ttl.Milliseconds()})
		return res.Claim, err
	}
	wait := func(p string, ttl time.Duration) agentbridge.Claim {
		t.Helper()
		c, err := file(p, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, p := range []string{"user", "nobody"} {
		_, err := file(p, time.Second)
		wantCode(t, "a waiting claim for "+p, err, agentbridge.ECodeNotATrigger)
	}
	expire := func(c agentbridge.Claim) *agentbridge.Event {
		t.Helper()
		testutil.WaitFor(t, 30*time.Second, "claim "+c.Participant+" to be due", func() bool {
			due, err := cs.DueClaims(ctx)
			for _, d := range due {
				if d.ID == c.ID {
					return true
				}
			}
			return err != nil
		})
		ev, rc, ok, err := cs.ExpireClaim(ctx, c.ID)
		if err != nil || !ok || rc == nil || rc.State != agentbridge.ReceiptFailed {
			t.Fatalf("ExpireClaim(%s): %+v %v %v", c.Participant, rc, ok, err)
		}
		return ev
	}
	// The window is the expiring claim's ttl: seconds, so that a loaded
	// machine expires the first three within it.
	first := []agentbridge.Claim{wait("g", 4*time.Second), wait("g", 4*time.Second), wait("g", 4*time.Second)}
	late := wait("g", 8*time.Second)
	gone := wait("leaving", 500*time.Millisecond)
	MustAppend(t, s, "t", Control("user", `{"uninvite":{"participant_id":"leaving"}}`))
	ev := expire(first[0])
	if ev == nil || !strings.Contains(ev.Text(), "4 messages to g waited") {
		t.Fatalf("the first expiry's message: %+v, want one naming the 4 messages to g", ev)
	}
	for _, c := range append(first[1:], gone, late) {
		if ev := expire(c); ev != nil {
			t.Errorf("the expiry of %s's claim %d posted %q", c.Participant, c.ID, ev.Text())
		}
	}
	if ev := expire(wait("g", 200*time.Millisecond)); ev == nil || !strings.Contains(ev.Text(), "1 message to g waited") {
		t.Errorf("an expiry after the window: %+v, want a message naming the one the last did not count", ev)
	}
}

// testWaitingClaimsCap: one coordinator id files at most
// agentbridge.MaxWaitingClaims waiting claims that still wait (429
// too_many, nothing stored); another id has its own.
func testWaitingClaimsCap(t *testing.T, newStore Factory) {
	s, cs := claimStore(t, newStore)
	ctx := context.Background()
	NewThread(t, s, "t")
	invite(t, s, "t", "p")
	for _, id := range []string{"mallory", "other"} {
		// Live for the whole test: filing a thousand claims takes a
		// loaded machine past the default ttl.
		register(t, s, agentbridge.Registration{ID: id, Instance: id, Host: id, TTLMillis: agentbridge.MaxClaimTTL.Milliseconds()})
	}
	triggers := make([]agentbridge.Event, agentbridge.MaxWaitingClaims+1)
	for i := range triggers {
		triggers[i] = MustAppend(t, s, "t", Msg("user", "hi"))
	}
	claim := func(id string, i int) error {
		_, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: agentbridge.ClaimKey{Thread: "t", Event: triggers[i].ID, Participant: "p"},
			Coordinator: id, Instance: id, Wait: true})
		return err
	}
	for i := range agentbridge.MaxWaitingClaims {
		if err := claim("mallory", i); err != nil {
			t.Fatalf("waiting claim %d: %v", i, err)
		}
	}
	wantCode(t, "one more waiting claim", claim("mallory", agentbridge.MaxWaitingClaims), agentbridge.ECodeTooMany)
	if err := claim("other", agentbridge.MaxWaitingClaims); err != nil {
		t.Errorf("another coordinator's waiting claim: %v", err)
	}
	if list, _ := cs.Claims(ctx, "t"); len(list) != agentbridge.MaxWaitingClaims+1 {
		t.Errorf("%d claims stored, want %d", len(list), agentbridge.MaxWaitingClaims+1)
	}
}

// testEndNotATrigger: the holder of a claim ends it as no trigger; its
// pair's open receipt becomes skipped, nobody may take or fence with it
// any more, and another coordinator may not end it.
func testEndNotATrigger(t *testing.T, newStore Factory) {
	s, cs := claimStore(t, newStore)
	ctx := context.Background()
	NewThread(t, s, "t")
	invite(t, s, "t", "p")
	e := MustAppend(t, s, "t", Msg("user", "hi"))
	for _, id := range []string{"laptop", "server"} {
		register(t, s, agentbridge.Registration{ID: id, Instance: id, Host: id, Agents: []agentbridge.CoordinatorAgent{{Name: "p", Kind: "adapter"}}})
	}
	key := agentbridge.ClaimKey{Thread: "t", Event: e.ID, Participant: "p"}
	if _, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "server", Instance: "server", Wait: true}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "laptop", Instance: "laptop"})
	if err != nil || !res.Granted {
		t.Fatalf("take: %+v %v", res, err)
	}
	_, _, err = cs.EndNotATrigger(ctx, res.Claim.ID, res.Claim.Fence, "server", "no")
	wantCode(t, "another coordinator ends it", err, agentbridge.ECodeFenced)
	c, rc, err := cs.EndNotATrigger(ctx, res.Claim.ID, res.Claim.Fence, "laptop", "no rule wakes p")
	if err != nil || c.State != agentbridge.ClaimNotATrigger || rc == nil || rc.State != agentbridge.ReceiptSkipped || rc.Reason != "not a trigger: no rule wakes p" {
		t.Fatalf("EndNotATrigger: %+v %+v %v", c, rc, err)
	}
	if again, err := cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: key, Coordinator: "server", Instance: "server"}); err != nil || again.Granted {
		t.Errorf("a claim of a key ended as no trigger: %+v %v", again, err)
	}
	wantCode(t, "a write fenced by it", cs.CheckFence(ctx, agentbridge.ClaimFence{ID: c.ID, Fence: c.Fence}), agentbridge.ECodeFenced)
	if list, _ := cs.Claimable(ctx, "server"); len(list) != 0 {
		t.Errorf("claimable after the end: %+v", list)
	}
}

// testFallbackClaims: a fallback claim (contract 8.5) is taken for a
// trigger of the participant it answers for, by a participant invited now
// (also after the trigger) that is not a human, and keeps whom it falls
// back from; any other is not_a_trigger, nothing stored.
func testFallbackClaims(t *testing.T, newStore Factory) {
	s, cs := claimStore(t, newStore)
	ctx := context.Background()
	NewThread(t, s, "t")
	invite(t, s, "t", "claude", "codex")
	trigger := MustAppend(t, s, "t", agentbridge.EventInput{From: "user", To: "claude", Content: []byte(`"hi"`)})
	invite(t, s, "t", "gemini", "mistral")
	register(t, s, agentbridge.Registration{ID: "laptop", Instance: "l", Host: "laptop", Agents: []agentbridge.CoordinatorAgent{
		{Name: "codex", Client: "codex", Kind: "adapter"}, {Name: "gemini", Client: "gemini", Kind: "acp"},
		{Name: "mistral", Kind: "adapter"}, {Name: "user", Kind: "adapter"}}})
	claim := func(p, from string) (agentbridge.ClaimResult, error) {
		return cs.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: agentbridge.ClaimKey{Thread: "t", Event: trigger.ID, Participant: p},
			Coordinator: "laptop", Instance: "l", FallbackFrom: from})
	}
	for _, p := range []string{"codex", "gemini"} {
		res, err := claim(p, "claude")
		if err != nil || !res.Granted || res.Claim.FallbackFrom != "claude" || res.Claim.Client != p {
			t.Errorf("%s falling back from claude: %+v %v", p, res, err)
		}
	}
	for _, c := range []struct{ p, from, why string }{
		{"mistral", "gemini", "no trigger for gemini, invited after it"},
		{"nobody", "claude", "a participant not invited"},
		{"user", "claude", "a human"},
	} {
		_, err := claim(c.p, c.from)
		wantCode(t, c.why, err, agentbridge.ECodeNotATrigger)
	}
	if list, _ := cs.Claims(ctx, "t"); len(list) != 2 {
		t.Errorf("%d claims stored, want the two fallbacks", len(list))
	}
}
