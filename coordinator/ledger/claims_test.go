package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// queueAlice commits a step that queues alice's answer to trigger E of
// thread T, and returns the invocation and its record's id.
func queueAlice(t *testing.T, db *ledger.DB) (ledger.Invocation, int64) {
	t.Helper()
	inv := ledger.Invocation{Thread: "T", TriggerID: "E", TriggerSeq: 1, TriggerGSeq: 1, Participant: "alice", Agent: "alice", Command: []string{"x"}, Hop: 1}
	queued, err := db.Commit(context.Background(), ledger.Step{GSeq: 1, Thread: "T", Seq: 1, Invocations: []ledger.Invocation{inv}})
	if err != nil {
		t.Fatal(err)
	}
	return inv, queued[0].ID
}

// TestClaimsElsewhereAndTakeOver: a record's claim is kept and read back
// (also by the receipt reporter's PairStates); a record another
// coordinator holds ends elsewhere, final; taking the run over later
// queues that record again with the new claim, while a pair queued or
// running here is left alone, and a pair never seen here gets a new record.
func TestClaimsElsewhereAndTakeOver(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	inv, id := queueAlice(t, db)
	if _, ok, err := db.TakeOver(ctx, inv, time.Now()); err != nil || ok {
		t.Errorf("take over a queued pair: ok %v, %v; want it left alone", ok, err)
	}
	if err := db.SetClaim(ctx, id, 7, 1); err != nil {
		t.Fatal(err)
	}
	ps, err := db.PairStates(ctx, 0, nil, 10)
	if err != nil || len(ps) != 1 || ps[0].ClaimID != 7 || ps[0].ClaimFence != 1 {
		t.Fatalf("pair states = %+v, %v; want claim 7 at fence 1", ps, err)
	}
	if err := db.Elsewhere(ctx, id, "run elsewhere: claimed by laptop on laptop (fence 1)"); err != nil {
		t.Fatal(err)
	}
	got, err := db.Invocation(ctx, id)
	if err != nil || got.Status != ledger.StatusElsewhere || got.Error == "" {
		t.Fatalf("record = %+v, %v; want elsewhere with the holder", got, err)
	}
	if un, err := db.Unfinished(ctx); err != nil || len(un) != 0 {
		t.Errorf("unfinished = %+v, %v; an elsewhere record is final", un, err)
	}
	if !ledger.ValidStatus(ledger.StatusElsewhere) {
		t.Error("elsewhere is not a valid status filter")
	}
	inv.ClaimID, inv.ClaimFence = 7, 2
	again, ok, err := db.TakeOver(ctx, inv, time.Now())
	if err != nil || !ok || again.ID != id {
		t.Fatalf("take over the elsewhere record: %+v ok %v, %v", again, ok, err)
	}
	got, err = db.Invocation(ctx, id)
	if err != nil || got.Status != ledger.StatusQueued || got.ClaimFence != 2 || got.Error != "" {
		t.Errorf("record taken over = %+v, %v; want queued at fence 2", got, err)
	}
	other := ledger.Invocation{Thread: "T", TriggerID: "F", TriggerSeq: 2, TriggerGSeq: 2, Participant: "alice", Agent: "alice", Command: []string{"x"}, ClaimID: 8, ClaimFence: 2}
	fresh, ok, err := db.TakeOver(ctx, other, time.Now())
	if err != nil || !ok || fresh.ID == id || fresh.Status != ledger.StatusQueued {
		t.Errorf("take over a pair never seen here: %+v ok %v, %v", fresh, ok, err)
	}
}

// TestPrepareFailedSurvivesAReopen: a run's failed preparations are
// counted from the first one's time, and the count is read back after the
// ledger is closed and opened again (a restarted coordinator does not
// start its retry budget afresh); a take-over starts it again.
func TestPrepareFailedSurvivesAReopen(t *testing.T) {
	db, path := openDB(t)
	ctx := context.Background()
	inv, id := queueAlice(t, db)
	start := time.UnixMilli(time.Now().UnixMilli())
	for i := 1; i <= 2; i++ {
		n, first, err := db.PrepareFailed(ctx, id, start.Add(time.Duration(i)*time.Second))
		if err != nil || n != i || !first.Equal(start.Add(time.Second)) {
			t.Fatalf("failure %d: %d %v %v", i, n, first, err)
		}
	}
	db.Close()
	again, err := ledger.Open(ctx, path, "bridge-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if n, first, err := again.PrepareFailed(ctx, id, start.Add(time.Minute)); err != nil || n != 3 || !first.Equal(start.Add(time.Second)) {
		t.Errorf("after a reopen: %d %v %v, want the third since the first", n, first, err)
	}
	if err := again.Elsewhere(ctx, id, "fenced"); err != nil {
		t.Fatal(err)
	}
	inv.ClaimID, inv.ClaimFence = 9, 2
	if _, ok, err := again.TakeOver(ctx, inv, time.Now()); err != nil || !ok {
		t.Fatalf("take over: %v %v", ok, err)
	}
	if n, _, err := again.PrepareFailed(ctx, id, time.Now()); err != nil || n != 1 {
		t.Errorf("after a take-over: %d %v, want the count started again", n, err)
	}
}
