package ledger_test

import (
	"context"
	"encoding/json"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// TestWorktreeAndChangeOps walks a worktree row through its states and a
// merge through its steps, each replayed as a restart would, on both
// dialects: the row is made once, the op recorded once, its notice owed
// once, and the run's parent kept from its first start.
func TestWorktreeAndChangeOps(t *testing.T) {
	ctx := context.Background()
	db, err := ledger.Open(ctx, ledgerPath(t), "bridge-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	w := ledger.Worktree{Thread: "T1", Participant: "claude", Workspace: "app", Repo: "/r", Path: "/s/worktrees/T1/claude", Branch: "agent-bridge/t/claude", Base: "main"}
	got, err := db.BeginWorktree(ctx, w)
	must(err)
	if got.State != ledger.WorktreeMaking || got.Branch != w.Branch {
		t.Fatalf("begun worktree = %+v", got)
	}
	must(db.SetWorktreeState(ctx, "T1", "claude", ledger.WorktreeReady))
	w.Branch = "another"
	if got, err = db.BeginWorktree(ctx, w); err != nil || got.State != ledger.WorktreeReady || got.Branch != "agent-bridge/t/claude" {
		t.Fatalf("second begin = %+v, %v; want the first row kept", got, err)
	}
	if list, err := db.Worktrees(ctx, ""); err != nil || len(list) != 1 {
		t.Fatalf("worktrees = %+v, %v", list, err)
	}

	queued, err := db.Commit(ctx, ledger.Step{GSeq: 1, Thread: "T1", Seq: 1, Invocations: []ledger.Invocation{{Thread: "T1", TriggerID: "E1", TriggerSeq: 1, TriggerGSeq: 1, Participant: "claude", Agent: "claude", Command: []string{"x"}}}})
	must(err)
	id := queued[0].ID
	if p, again, err := db.RunParent(ctx, id, "aaa"); err != nil || p != "aaa" || again {
		t.Fatalf("first parent = %q, %v, %v", p, again, err)
	}
	if p, again, err := db.RunParent(ctx, id, "bbb"); err != nil || p != "aaa" || !again {
		t.Fatalf("parent after a restart = %q, %v, %v; want the first run's, again", p, again, err)
	}

	op := ledger.ChangeOp{EventID: "C1", Thread: "T1", Participant: "claude", Op: ledger.OpMerge, Into: "main", Squash: true, Sender: "user"}
	must(db.BeginChangeOp(ctx, op))
	must(db.BeginChangeOp(ctx, op))
	must(db.MergeCommitted(ctx, "C1", "from1", "merge1"))
	open, err := db.OpenChangeOps(ctx)
	must(err)
	if len(open) != 1 || open[0].State != ledger.OpCommitted || open[0].Commit != "merge1" || !open[0].Squash {
		t.Fatalf("open ops = %+v", open)
	}
	n := ledger.Notice{TriggerID: "C1", Kind: "change", Thread: "T1", Post: agentbridge.EventInput{Type: agentbridge.TypeMessage, From: "bridge-coordinator", To: agentbridge.ToAll, Content: json.RawMessage(`"merged"`)}}
	if ended, err := db.EndChangeOp(ctx, open[0], ledger.OpMerged, n); err != nil || !ended {
		t.Fatalf("end = %v, %v", ended, err)
	}
	if ended, err := db.EndChangeOp(ctx, open[0], ledger.OpMerged, n); err != nil || ended { // a replay owes no second notice
		t.Fatalf("second end = %v, %v; want not ended again", ended, err)
	}
	notices, _, err := db.PendingNotices(ctx)
	must(err)
	if len(notices) != 1 {
		t.Fatalf("pending notices = %+v, want one", notices)
	}
	if got, _, _ := db.Worktree(ctx, "T1", "claude"); got.State != ledger.WorktreeRemoving {
		t.Fatalf("worktree after the merge = %+v, want removing", got)
	}
	must(db.DeleteWorktree(ctx, "T1", "claude"))
	must(db.ChangeOpDone(ctx, "C1"))
	if open, err := db.OpenChangeOps(ctx); err != nil || len(open) != 0 {
		t.Fatalf("open ops after done = %+v, %v", open, err)
	}
	if _, ok, _ := db.Worktree(ctx, "T1", "claude"); ok {
		t.Fatal("worktree row kept after delete")
	}
	refused := ledger.ChangeOp{EventID: "C2", Thread: "T1", Participant: "codex", Op: ledger.OpMerge, Sender: "user"}
	must(db.BeginChangeOp(ctx, refused))
	n.TriggerID = "C2"
	if _, err := db.EndChangeOp(ctx, refused, ledger.OpRefused, n); err != nil {
		t.Fatal(err)
	}
	if o, err := db.ChangeOp(ctx, "C2"); err != nil || o.State != ledger.OpDone {
		t.Fatalf("refused op = %+v, %v; want done", o, err)
	}
}
