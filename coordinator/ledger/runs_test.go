package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

func queueOne(t *testing.T, db *ledger.DB, trigger, participant string) int64 {
	t.Helper()
	q, err := db.Commit(context.Background(), ledger.Step{Invocations: []ledger.Invocation{
		{Thread: "T", TriggerID: trigger, Participant: participant, Agent: participant, Command: []string{"x"}},
	}})
	if err != nil || len(q) != 1 {
		t.Fatalf("queue: %v %+v", err, q)
	}
	return q[0].ID
}

func TestProgressKeepsLast500AndUsage(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	id := queueOne(t, db, "E", "alice")
	other := queueOne(t, db, "E", "bob")
	var all []ledger.Progress
	for i := range 1200 {
		all = append(all, ledger.Progress{TS: "t", Status: fmt.Sprintf("s%d", i), Kind: "tool", Detail: json.RawMessage(`{"i":1}`)})
	}
	// Three flushes: 700 (more than kept), 450, 50.
	for _, part := range [][]ledger.Progress{all[:700], all[700:1150], all[1150:]} {
		err := db.AddProgress(ctx, []ledger.ProgressBatch{
			{Invocation: id, Records: part, Count: int64(len(part)), Usage: &ledger.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.25}},
			{Invocation: other, Records: part[:1], Count: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	got, last, err := db.ProgressOf(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != ledger.KeepProgress || got[0].Status != "s700" || got[len(got)-1].Status != "s1199" || string(got[0].Detail) != `{"i":1}` {
		t.Fatalf("kept %d records, first %+v", len(got), got[0])
	}
	if more, last2, _ := db.ProgressOf(ctx, id, last); len(more) != 0 || last2 != last {
		t.Errorf("after the last record: %d more", len(more))
	}
	inv, err := db.Invocation(ctx, id)
	if err != nil || inv.ProgressCount != 1200 || inv.InputTokens != 10 || inv.OutputTokens != 5 || inv.CostUSD != 0.25 {
		t.Fatalf("record %+v, %v", inv, err)
	}
	if o, _, _ := db.ProgressOf(ctx, other, 0); len(o) != 3 {
		t.Errorf("other invocation has %d records, want 3", len(o))
	}
	if _, err := db.Invocation(ctx, 9999); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("unknown invocation: %v", err)
	}
}

func TestProgressRecordClipped(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	id := queueOne(t, db, "E", "alice")
	big := ledger.Progress{TS: "t", Status: strings.Repeat("é", 5000), Kind: "text", Detail: json.RawMessage(`"` + strings.Repeat("d", 9000) + `"`)}
	if err := db.AddProgress(ctx, []ledger.ProgressBatch{{Invocation: id, Records: []ledger.Progress{big}, Count: 1}}); err != nil {
		t.Fatal(err)
	}
	got, _, _ := db.ProgressOf(ctx, id, 0)
	if len(got) != 1 || got[0].Detail != nil || len(got[0].Status)+len(got[0].Kind) > ledger.MaxProgressRecord || !strings.HasPrefix(got[0].Status, "éé") {
		t.Fatalf("stored %d bytes of status, detail %q", len(got[0].Status), got[0].Detail)
	}
}

func TestCancelWinsOverUnrecordedFinish(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	id := queueOne(t, db, "E", "alice")
	if err := db.MarkRunning(ctx, id, 10, 10, time.Now()); err != nil {
		t.Fatal(err)
	}
	notice := ledger.Notice{TriggerID: "E", Kind: "cancelled:alice", Thread: "T", Post: agentbridge.EventInput{Content: json.RawMessage(`"stopped"`)}}
	prev, err := db.Cancel(ctx, id, "cancelled by user", notice)
	if err != nil || prev != ledger.StatusRunning {
		t.Fatalf("cancel: %q, %v", prev, err)
	}
	// The adapter's finish comes after: it is recorded, but nothing is owed.
	code := 0
	err = db.Finish(ctx, id, ledger.Outcome{Status: ledger.StatusSucceeded, ExitCode: &code, Started: time.Now(), Finished: time.Now(), Posts: []agentbridge.EventInput{{}}})
	if !errors.Is(err, ledger.ErrCancelled) {
		t.Fatalf("finish after cancel: %v, want ErrCancelled", err)
	}
	inv, _ := db.Invocation(ctx, id)
	if inv.Status != ledger.StatusCancelled || len(inv.PendingPost) != 0 || inv.ExitCode == nil {
		t.Fatalf("record %+v", inv)
	}
	if u, _ := db.Unfinished(ctx); len(u) != 0 {
		t.Errorf("a cancelled invocation is unfinished: %+v", u)
	}
	if err := db.SetStatus(ctx, id, ledger.StatusInterrupted, "x"); err != nil {
		t.Fatal(err)
	}
	if inv, _ := db.Invocation(ctx, id); inv.Status != ledger.StatusCancelled {
		t.Errorf("SetStatus overrode cancelled: %s", inv.Status)
	}
	// Cancelling again is refused; exactly one notice is owed.
	if _, err := db.Cancel(ctx, id, "again", notice); !errors.Is(err, ledger.ErrNotRunning) {
		t.Errorf("second cancel: %v", err)
	}
	if n, _, _ := db.PendingNotices(ctx); len(n) != 1 || n[0].Kind != "cancelled:alice" {
		t.Errorf("notices %+v", n)
	}
	if _, err := db.Cancel(ctx, 9999, "", ledger.Notice{}); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("unknown: %v", err)
	}
}

func TestFinishBeforeCancelWins(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	id := queueOne(t, db, "E", "alice")
	queued := queueOne(t, db, "F", "alice")
	code := 0
	if err := db.Finish(ctx, id, ledger.Outcome{Status: ledger.StatusSucceeded, ExitCode: &code, Started: time.Now(), Finished: time.Now(), Posts: []agentbridge.EventInput{{}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Cancel(ctx, id, "late", ledger.Notice{}); !errors.Is(err, ledger.ErrNotRunning) {
		t.Fatalf("cancel after finish: %v", err)
	}
	active, err := db.Active(ctx, "T", "alice")
	if err != nil || len(active) != 1 || active[0].ID != queued {
		t.Fatalf("active %+v, %v", active, err)
	}
	// A queued one is dropped without a notice and never started.
	if prev, err := db.Cancel(ctx, queued, "x", ledger.Notice{TriggerID: "F", Kind: "k", Thread: "T", Post: agentbridge.EventInput{}}); err != nil || prev != ledger.StatusQueued {
		t.Fatalf("cancel queued: %q %v", prev, err)
	}
	if err := db.MarkRunning(ctx, queued, 5, 5, time.Now()); err != nil {
		t.Fatal(err)
	}
	if inv, _ := db.Invocation(ctx, queued); inv.Status != ledger.StatusCancelled {
		t.Errorf("MarkRunning overrode cancelled: %s", inv.Status)
	}
	if n, _, _ := db.PendingNotices(ctx); len(n) != 0 {
		t.Errorf("notices for a queued cancel: %+v", n)
	}
	if list, _ := db.Invocations(ctx, ledger.Filter{Status: ledger.StatusCancelled}); len(list) != 1 {
		t.Errorf("cancelled filter: %+v", list)
	}
}

// BenchmarkAddProgressFlush measures one flush of a flooding run: 500
// records stored and as many old ones trimmed, in one transaction.
func BenchmarkAddProgressFlush(b *testing.B) {
	db, err := ledger.Open(context.Background(), b.TempDir()+"/coordinator.db", "bridge-coordinator")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	q, err := db.Commit(ctx, ledger.Step{Invocations: []ledger.Invocation{{Thread: "T", TriggerID: "E", Participant: "p", Agent: "p", Command: []string{"x"}}}})
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]ledger.Progress, ledger.KeepProgress)
	for i := range recs {
		recs[i] = ledger.Progress{TS: "2026-11-23T21:00:00.000000Z", Status: "flooding", Kind: "text", Detail: json.RawMessage(`"` + strings.Repeat("z", 64) + `"`)}
	}
	b.ResetTimer()
	for range b.N {
		if err := db.AddProgress(ctx, []ledger.ProgressBatch{{Invocation: q[0].ID, Records: recs, Count: 2000}}); err != nil {
			b.Fatal(err)
		}
	}
}
