package ledger_test

import (
	"context"
	"testing"

	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// TestRunsAndUsage runs the dashboard's queries (on both dialects, as every
// ledger test): the invocation list with its filters, newest first, and the
// usage sums per participant, whose SQL sum() answers other types on
// PostgreSQL than on SQLite.
func TestRunsAndUsage(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	a1 := queueOne(t, db, "E1", "alice")
	a2 := queueOne(t, db, "E2", "alice")
	b1 := queueOne(t, db, "E1", "bob")
	queueOne(t, db, "E3", "carol") // no usage reported
	err := db.AddProgress(ctx, []ledger.ProgressBatch{
		{Invocation: a1, Count: 1, Records: []ledger.Progress{{TS: "t", Status: "s"}}, Usage: &ledger.Usage{InputTokens: 100, OutputTokens: 20, CostUSD: 0.5}},
		{Invocation: a2, Count: 1, Records: []ledger.Progress{{TS: "t", Status: "s"}}, Usage: &ledger.Usage{InputTokens: 1 << 40, OutputTokens: 7, CostUSD: 0.25}},
		{Invocation: b1, Count: 1, Records: []ledger.Progress{{TS: "t", Status: "s"}}, Usage: &ledger.Usage{InputTokens: 3, OutputTokens: 4, CostUSD: 0.125}},
	})
	if err != nil {
		t.Fatal(err)
	}

	runs, err := db.Invocations(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 || runs[0].Participant != "carol" || runs[3].ID != a1 {
		t.Errorf("runs = %d, first %q, last %d; want 4, newest (carol) first", len(runs), runs[0].Participant, runs[3].ID)
	}
	if runs, err := db.Invocations(ctx, ledger.Filter{Participant: "alice", Thread: "T", Limit: 1}); err != nil || len(runs) != 1 || runs[0].ID != a2 {
		t.Errorf("alice's newest run = %+v, %v; want invocation %d", runs, err, a2)
	}
	if runs, err := db.Invocations(ctx, ledger.Filter{Status: ledger.StatusSucceeded}); err != nil || len(runs) != 0 {
		t.Errorf("succeeded runs = %d, %v; want none", len(runs), err)
	}

	usage, err := db.UsageSince(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.ParticipantUsage{
		{Participant: "alice", Runs: 2, InputTokens: 100 + 1<<40, OutputTokens: 27, CostUSD: 0.75},
		{Participant: "bob", Runs: 1, InputTokens: 3, OutputTokens: 4, CostUSD: 0.125},
		{Participant: "carol", Runs: 1},
	}
	if len(usage) != len(want) {
		t.Fatalf("usage = %+v, want %+v", usage, want)
	}
	for i := range want {
		if usage[i] != want[i] {
			t.Errorf("usage[%d] = %+v, want %+v", i, usage[i], want[i])
		}
	}
	if usage, err := db.UsageSince(ctx, "9999"); err != nil || len(usage) != 0 {
		t.Errorf("usage since the future = %+v, %v; want none", usage, err)
	}
}
