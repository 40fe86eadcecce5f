package ledger_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

func openDB(t *testing.T) (*ledger.DB, string) {
	t.Helper()
	path := ledgerPath(t)
	db, err := ledger.Open(context.Background(), path, "bridge-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

// TestCommitIsAllOrNothingAndIdempotent: a step records the decision,
// the queued pairs and both cursors together; replaying it queues nothing
// new.
func TestCommitIsAllOrNothingAndIdempotent(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	if _, ok, err := db.Cursor(ctx); err != nil || ok {
		t.Fatalf("fresh ledger cursor: ok=%v err=%v, want none", ok, err)
	}
	step := ledger.Step{
		GSeq: 7, Thread: "T", Seq: 3,
		Decision: &ledger.DecisionRecord{EventID: "E", Thread: "T", Seq: 3, GSeq: 7, Decision: json.RawMessage(`{"rule":"to"}`)},
		Invocations: []ledger.Invocation{
			{Thread: "T", TriggerID: "E", TriggerSeq: 3, TriggerGSeq: 7, Participant: "alice", Agent: "alice", Command: []string{"x"}},
			{Thread: "T", TriggerID: "E", TriggerSeq: 3, TriggerGSeq: 7, Participant: "bob", Agent: "bob", Command: []string{"y"}},
		},
		Notices: []ledger.Notice{{TriggerID: "E", Kind: "clarification", Thread: "T", Post: agentbridge.EventInput{}}},
	}
	queued, err := db.Commit(ctx, step)
	if err != nil || len(queued) != 2 || queued[0].ID == 0 || queued[0].Status != ledger.StatusQueued {
		t.Fatalf("commit: %v %+v", err, queued)
	}
	again, err := db.Commit(ctx, step)
	if err != nil || len(again) != 0 {
		t.Fatalf("replayed commit queued %+v (err %v), want nothing", again, err)
	}
	if c, ok, _ := db.Cursor(ctx); !ok || c != 7 {
		t.Errorf("cursor = %d, %v; want 7", c, ok)
	}
	if c, ok, _ := db.ThreadCursor(ctx, "T"); !ok || c != 3 {
		t.Errorf("thread cursor = %d, %v; want 3", c, ok)
	}
	d, err := db.Decision(ctx, "E")
	if err != nil || string(d.Decision) != `{"rule":"to"}` {
		t.Errorf("decision = %+v, %v", d, err)
	}
	if _, err := db.Decision(ctx, "nope"); err != ledger.ErrNotFound {
		t.Errorf("unknown decision: %v, want ErrNotFound", err)
	}
	if n, _, err := db.PendingNotices(ctx); err != nil || len(n) != 1 {
		t.Errorf("pending notices = %+v, %v", n, err)
	}
}

// TestLifecycleAndUnfinished walks a record through running, finished
// with a pending post and posted, checking which states count as
// unfinished.
func TestLifecycleAndUnfinished(t *testing.T) {
	db, path := openDB(t)
	ctx := context.Background()
	queued, err := db.Commit(ctx, ledger.Step{GSeq: 1, Thread: "T", Seq: 1, Invocations: []ledger.Invocation{
		{Thread: "T", TriggerID: "E", TriggerSeq: 1, TriggerGSeq: 1, Participant: "alice", Agent: "alice", Command: []string{"x"}, Hop: 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	id := queued[0].ID
	unfinished := func() []ledger.Invocation {
		t.Helper()
		list, err := db.Unfinished(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	if got := unfinished(); len(got) != 1 || got[0].Status != ledger.StatusQueued {
		t.Fatalf("queued record not unfinished: %+v", got)
	}
	start := time.Now()
	if err := db.MarkRunning(ctx, id, 100, 100, start); err != nil {
		t.Fatal(err)
	}
	if got := unfinished(); len(got) != 1 || got[0].PGID != 100 || got[0].ProcessStartedAt == "" {
		t.Fatalf("running record: %+v", got)
	}
	code := 0
	post := agentbridge.EventInput{From: "alice", Content: json.RawMessage(`"hi"`)}
	if err := db.Finish(ctx, id, ledger.Outcome{Status: ledger.StatusSucceeded, ExitCode: &code, Started: start, Finished: start.Add(time.Second), OutputBytes: 2, Posts: []agentbridge.EventInput{post}}); err != nil {
		t.Fatal(err)
	}
	got := unfinished()
	if len(got) != 1 || got[0].DurationMS != 1000 {
		t.Fatalf("finished record with a pending post: %+v", got)
	}
	if posts, err := got[0].PendingPosts(); err != nil || len(posts) != 1 || posts[0].From != "alice" || string(posts[0].Content) != `"hi"` {
		t.Fatalf("the pending post read back: %+v, %v", posts, err)
	}
	if err := db.Posted(ctx, id, "R", "", ""); err != nil {
		t.Fatal(err)
	}
	if got := unfinished(); len(got) != 0 {
		t.Fatalf("posted record still unfinished: %+v", got)
	}
	// The ledger survives a reopen.
	db.Close()
	db2, err := ledger.Open(ctx, path, "bridge-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	list, err := db2.Invocations(ctx, ledger.Filter{Thread: "T", Status: ledger.StatusSucceeded})
	if err != nil || len(list) != 1 || list[0].ReplyEventID != "R" || *list[0].ExitCode != 0 || list[0].Hop != 2 {
		t.Fatalf("after reopen: %+v, %v", list, err)
	}
}

// TestCommitStepsTogether: steps of several threads commit in one
// transaction, each queuing its own pairs; the global cursor goes to the
// last, and a step replayed behind it does not move it back (SetCursor
// does, on purpose).
func TestCommitStepsTogether(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	inv := func(thread, trigger string, gseq int64) ledger.Invocation {
		return ledger.Invocation{Thread: thread, TriggerID: trigger, TriggerSeq: 2, TriggerGSeq: gseq, Participant: "alice", Agent: "alice", Command: []string{"x"}}
	}
	queued, err := db.CommitSteps(ctx, []ledger.Step{
		{GSeq: 5, Thread: "A", Seq: 2, Invocations: []ledger.Invocation{inv("A", "E5", 5)}},
		{GSeq: 6, Thread: "B", Seq: 2},
		{GSeq: 7, Thread: "C", Seq: 2, Invocations: []ledger.Invocation{inv("C", "E7", 7)}},
	})
	if err != nil || len(queued) != 3 || len(queued[0]) != 1 || len(queued[1]) != 0 || len(queued[2]) != 1 ||
		queued[0][0].TriggerID != "E5" || queued[2][0].TriggerID != "E7" || queued[0][0].QueuedAt != queued[2][0].QueuedAt {
		t.Fatalf("CommitSteps = %+v, %v", queued, err)
	}
	for th, want := range map[string]int64{"A": 2, "B": 2, "C": 2} {
		if c, ok, _ := db.ThreadCursor(ctx, th); !ok || c != want {
			t.Errorf("thread %s cursor = %d, %v; want %d", th, c, ok, want)
		}
	}
	if _, err := db.Commit(ctx, ledger.Step{GSeq: 5, Thread: "A", Seq: 2}); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := db.Cursor(ctx); c != 7 {
		t.Errorf("cursor after a replayed step = %d, want 7", c)
	}
	if err := db.SetCursor(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := db.Cursor(ctx); c != 3 {
		t.Errorf("cursor after SetCursor(3) = %d", c)
	}
}

// TestInvocationKeepsItsProfile: the invited profile a decision matched is
// kept on the invocation it queues and read back with it; a record queued
// without one (an older row, a take-over) reads back without one.
func TestInvocationKeepsItsProfile(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	profile := agentbridge.Profile{Client: "claude", Model: "m1", Nickname: "ally"}
	_, err := db.Commit(ctx, ledger.Step{GSeq: 1, Thread: "T", Seq: 1, Invocations: []ledger.Invocation{
		{Thread: "T", TriggerID: "E", TriggerSeq: 1, TriggerGSeq: 1, Participant: "alice", Agent: "alice", Command: []string{"x"}, Profile: &profile},
		{Thread: "T", TriggerID: "E", TriggerSeq: 1, TriggerGSeq: 1, Participant: "bob", Agent: "bob", Command: []string{"x"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := db.Unfinished(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Profile == nil || list[0].Profile.Model != "m1" || list[0].Profile.Nickname != "ally" || list[1].Profile != nil {
		t.Fatalf("invocations read back: %+v", list)
	}
}

// TestUnreadableNoticeKeptApart: a pending notice whose stored event no
// longer decodes is listed apart, with its key, and does not hide the
// other pending notices; once closed it is pending no more.
func TestUnreadableNoticeKeptApart(t *testing.T) {
	db, path := openDB(t)
	ctx := context.Background()
	step := ledger.Step{GSeq: 1, Thread: "T", Seq: 1, Notices: []ledger.Notice{
		{TriggerID: "E", Kind: "clarification", Thread: "T", Post: agentbridge.EventInput{From: "bridge-coordinator"}},
		{TriggerID: "E", Kind: "loop_guard", Thread: "T", Post: agentbridge.EventInput{From: "bridge-coordinator"}},
	}}
	if _, err := db.Commit(ctx, step); err != nil {
		t.Fatal(err)
	}
	driver := "sqlite3"
	if os.Getenv(dialectEnv) == "postgres" {
		driver = "pgx"
	}
	raw, err := sql.Open(driver, path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.ExecContext(ctx, `UPDATE notices SET post = '{"from":' WHERE kind = 'loop_guard'`); err != nil {
		t.Fatal(err)
	}
	pending, unreadable, err := db.PendingNotices(ctx)
	if err != nil {
		t.Fatalf("pending notices: %v, want the readable one and the unreadable one apart", err)
	}
	if len(pending) != 1 || pending[0].Kind != "clarification" {
		t.Errorf("pending = %+v, want the clarification", pending)
	}
	if len(unreadable) != 1 || unreadable[0].Kind != "loop_guard" || unreadable[0].TriggerID != "E" || unreadable[0].Err == nil {
		t.Fatalf("unreadable = %+v, want the loop guard notice with its error", unreadable)
	}
	if err := db.NoticePosted(ctx, "E", "loop_guard", ""); err != nil {
		t.Fatal(err)
	}
	if _, unreadable, _ := db.PendingNotices(ctx); len(unreadable) != 0 {
		t.Errorf("a closed unreadable notice is still pending: %+v", unreadable)
	}
}
