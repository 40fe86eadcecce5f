package ledger_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"sync"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

func partyInv(participant string, round int) ledger.Invocation {
	return ledger.Invocation{Thread: "T", TriggerID: "E", TriggerSeq: 3, TriggerGSeq: 7, Participant: participant, Agent: participant, Command: []string{"x"}, Round: round}
}

// TestPartyRoundsAdvanceOnce: a pair may run once per round; a round
// advances once however many callers race for it; turns count round-1
// selections per thread.
func TestPartyRoundsAdvanceOnce(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	step := ledger.Step{
		GSeq: 7, Thread: "T", Seq: 3,
		Invocations: []ledger.Invocation{partyInv("alice", 1), partyInv("bob", 1)},
		PartyRound:  &ledger.PartyRound{TriggerID: "E", Thread: "T", TriggerSeq: 3, TriggerGSeq: 7, TriggerFrom: "user", CrossTalk: true, Selected: []string{"alice", "bob"}},
	}
	if q, err := db.Commit(ctx, step); err != nil || len(q) != 2 || q[0].Round != 1 {
		t.Fatalf("commit: %+v, %v", q, err)
	}
	r, err := db.PartyRoundOf(ctx, "E")
	if err != nil || r.Stage != ledger.PartyStageRound1 || len(r.Selected) != 2 || r.TriggerFrom != "user" || !r.CrossTalk {
		t.Fatalf("party round = %+v, %v", r, err)
	}
	var wg sync.WaitGroup
	wins := make(chan []ledger.Invocation, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, ok, err := db.AdvanceParty(ctx, "E", ledger.PartyStageRound1, ledger.PartyStageRound2,
				[]ledger.Invocation{partyInv("alice", 2), partyInv("bob", 2)}, nil)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins <- q
			}
		}()
	}
	wg.Wait()
	close(wins)
	var won [][]ledger.Invocation
	for q := range wins {
		won = append(won, q)
	}
	if len(won) != 1 || len(won[0]) != 2 {
		t.Fatalf("round 2 started %d times (%+v), want once with two invocations", len(won), won)
	}
	if inv, err := db.PartyInvocations(ctx, "E", 2); err != nil || len(inv) != 2 || inv[0].Participant != "alice" {
		t.Fatalf("round-2 invocations = %+v, %v", inv, err)
	}
	open, err := db.OpenPartyRounds(ctx)
	if err != nil || len(open) != 1 || open[0].Stage != ledger.PartyStageRound2 {
		t.Fatalf("open rounds = %+v, %v", open, err)
	}
	notice := ledger.Notice{TriggerID: "E", Kind: "party", Thread: "T", Post: agentbridge.EventInput{}}
	if _, ok, err := db.AdvanceParty(ctx, "E", ledger.PartyStageRound1, ledger.PartyStageDone, nil, []ledger.Notice{notice}); err != nil || ok {
		t.Fatalf("advancing from a past stage: ok=%v err=%v", ok, err)
	}
	if _, ok, err := db.AdvanceParty(ctx, "E", ledger.PartyStageRound2, ledger.PartyStageDone, nil, []ledger.Notice{notice}); err != nil || !ok {
		t.Fatalf("ending the round: ok=%v err=%v", ok, err)
	}
	if open, _ := db.OpenPartyRounds(ctx); len(open) != 0 {
		t.Errorf("open rounds after the end = %+v", open)
	}
	if n, _, _ := db.PendingNotices(ctx); len(n) != 1 || n[0].Kind != "party" {
		t.Errorf("pending notices = %+v", n)
	}
}

// TestPartyMigrationKeepsInvocations: a ledger written before party mode
// keeps its records, which become round 0.
func TestPartyMigrationKeepsInvocations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(string(schema) + `; PRAGMA user_version = 1;
		INSERT INTO invocations (thread, trigger_id, trigger_seq, trigger_gseq, participant, agent, command, hop, status, queued_at, reply_event_id)
		VALUES ('T', 'E', 3, 7, 'alice', 'alice', '["x"]', 0, 'succeeded', 'ts', 'R1')`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err := ledger.Open(context.Background(), path, "bridge-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	invs, err := db.Invocations(context.Background(), ledger.Filter{})
	if err != nil || len(invs) != 1 || invs[0].Round != 0 || invs[0].ReplyEventID != "R1" || invs[0].Command[0] != "x" {
		t.Fatalf("invocations after migration = %+v, %v", invs, err)
	}
	q, err := db.Commit(context.Background(), ledger.Step{Invocations: []ledger.Invocation{partyInv("alice", 1)}})
	if err != nil || len(q) != 1 {
		t.Fatalf("round 1 of the same pair: %+v, %v", q, err)
	}
}
