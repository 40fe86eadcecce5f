package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// TestJournalKeptOnceWithOutcome: a journal entry is appended with its
// invocation's outcome, a second Finish of the same invocation (a re-run
// after a crash) keeps the first entry only, and the text has one dated
// header per entry, oldest first.
func TestJournalKeptOnceWithOutcome(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	queued, err := db.Commit(ctx, ledger.Step{GSeq: 1, Thread: "T", Seq: 1, Invocations: []ledger.Invocation{
		{Thread: "T", TriggerID: "S1", TriggerSeq: 1, TriggerGSeq: 1, Participant: "maria", Agent: "a", Command: []string{"x"}},
		{Thread: "T", TriggerID: "S2", TriggerSeq: 2, TriggerGSeq: 2, Participant: "maria", Agent: "a", Command: []string{"x"}},
	}})
	if err != nil || len(queued) != 2 {
		t.Fatalf("commit: %v %+v", err, queued)
	}
	finish := func(id int64, entry string, at time.Time) {
		t.Helper()
		o := ledger.Outcome{Status: ledger.StatusSucceeded, Started: at, Finished: at,
			Journal: &ledger.JournalEntry{Participant: "maria", Thread: "T", ThreadName: "kitchen", Entry: entry}}
		if err := db.Finish(ctx, id, o); err != nil {
			t.Fatal(err)
		}
	}
	day := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	finish(queued[0].ID, "first entry", day)
	finish(queued[0].ID, "first entry, written again", day)
	finish(queued[1].ID, "second entry", day.Add(24*time.Hour))
	entries, err := db.Journal(ctx, "maria")
	if err != nil || len(entries) != 2 || entries[0].Entry != "first entry" || entries[1].Entry != "second entry" {
		t.Fatalf("journal = %+v, %v", entries, err)
	}
	text := ledger.JournalText(entries)
	want := "## 2026-11-23 10:00 UTC — after the scene in \"kitchen\"\n\nfirst entry\n\n## 2026-11-24 10:00 UTC"
	if !strings.HasPrefix(text, want) {
		t.Errorf("journal text:\n%s\nwant it to start with:\n%s", text, want)
	}
	if other, err := db.Journal(ctx, "sam"); err != nil || len(other) != 0 {
		t.Errorf("sam's journal = %+v, %v", other, err)
	}
}
