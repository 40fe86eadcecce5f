package ledger_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// TestOwnersShareALedger: two coordinators (ids "laptop" and "server") on
// one ledger each keep their own cursors, decisions, notices and
// sessions; the first to queue a (trigger, participant, round) owns it and
// the other's commit of the same pair queues nothing; each recovers and
// reports only its own invocations.
func TestOwnersShareALedger(t *testing.T) {
	ctx := context.Background()
	path := ledgerPath(t)
	open := func(owner string) *ledger.DB {
		db, err := ledger.Open(ctx, path, owner)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	laptop, server := open("laptop"), open("server")
	inv := func(trigger, participant string) ledger.Invocation {
		return ledger.Invocation{Thread: "T", TriggerID: trigger, TriggerSeq: 2, TriggerGSeq: 5, Participant: participant, Agent: participant, Command: []string{"x"}}
	}
	notice := ledger.Notice{TriggerID: "E5", Kind: "clarify", Thread: "T", Post: agentbridge.EventInput{}}
	step := func(invs ...ledger.Invocation) ledger.Step {
		return ledger.Step{GSeq: 5, Thread: "T", Seq: 2, Invocations: invs, Notices: []ledger.Notice{notice},
			Decision: &ledger.DecisionRecord{EventID: "E5", Thread: "T", Seq: 2, GSeq: 5, Decision: json.RawMessage(`{}`)}}
	}
	q, err := laptop.Commit(ctx, step(inv("E5", "claude")))
	if err != nil || len(q) != 1 || q[0].Owner != "laptop" {
		t.Fatalf("laptop's commit = %+v, %v", q, err)
	}
	if c, ok, _ := server.Cursor(ctx); ok {
		t.Fatalf("server's cursor = %d before it committed anything; the laptop's must not be its", c)
	}
	// The server decides the same event: its own decision, notice and
	// cursors; claude's pair is the laptop's already, codex's is its own.
	q, err = server.Commit(ctx, step(inv("E5", "claude"), inv("E5", "codex")))
	if err != nil || len(q) != 1 || q[0].Participant != "codex" || q[0].Owner != "server" {
		t.Fatalf("server's commit = %+v, %v; want codex's pair only", q, err)
	}
	for name, db := range map[string]*ledger.DB{"laptop": laptop, "server": server} {
		if c, ok, err := db.Cursor(ctx); !ok || c != 5 || err != nil {
			t.Errorf("%s: cursor = %d %v %v", name, c, ok, err)
		}
		if c, ok, err := db.ThreadCursor(ctx, "T"); !ok || c != 2 || err != nil {
			t.Errorf("%s: thread cursor = %d %v %v", name, c, ok, err)
		}
		if _, err := db.Decision(ctx, "E5"); err != nil {
			t.Errorf("%s: decision: %v", name, err)
		}
		if n, _, err := db.PendingNotices(ctx); len(n) != 1 || err != nil {
			t.Errorf("%s: pending notices = %+v, %v", name, n, err)
		}
		un, err := db.Unfinished(ctx)
		if err != nil || len(un) != 1 || un[0].Owner != name {
			t.Errorf("%s: unfinished = %+v, %v; want its own pair only", name, un, err)
		}
		if d, err := db.DecisionsAfter(ctx, 0, 10); len(d) != 1 || err != nil {
			t.Errorf("%s: decisions after 0 = %+v, %v", name, d, err)
		}
		if ps, err := db.PairStates(ctx, 0, nil, 10); len(ps) != 1 || err != nil {
			t.Errorf("%s: pair states = %+v, %v; want its own pair only", name, ps, err)
		}
	}
	// One posts its notice: the other still owes its own.
	if err := laptop.NoticePosted(ctx, "E5", "clarify", "N1"); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := server.PendingNotices(ctx); len(n) != 1 {
		t.Errorf("server's notices after the laptop posted its own = %+v", n)
	}
	// A rebase drops only the rebasing coordinator's thread cursors.
	if n, err := laptop.Rebase(ctx, 1, 0); n != 1 || err != nil {
		t.Errorf("laptop's rebase dropped %d, %v", n, err)
	}
	if c, ok, _ := server.ThreadCursor(ctx, "T"); !ok || c != 2 {
		t.Errorf("server's thread cursor after the laptop's rebase = %d %v", c, ok)
	}
	// A cancel reaches only the owner's runs.
	if _, err := server.Cancel(ctx, un(t, laptop)[0].ID, "stop", ledger.Notice{}); err != ledger.ErrNotFound {
		t.Errorf("server cancelling the laptop's run: %v, want ErrNotFound", err)
	}
}

func un(t *testing.T, db *ledger.DB) []ledger.Invocation {
	t.Helper()
	u, err := db.Unfinished(context.Background())
	if err != nil || len(u) == 0 {
		t.Fatalf("unfinished = %+v, %v", u, err)
	}
	return u
}

// TestOwnerAdoptsRowsOfBefore: a SQLite ledger written before owners
// existed (the schema before the owner step) belongs, after the upgrade, to the first coordinator
// id that opens it: its cursor, decisions, notices and unfinished runs are
// that coordinator's, and a second id that opens it later starts afresh.
func TestOwnerAdoptsRowsOfBefore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	// The schema just before the owner step, whatever its number.
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var schema []string
	for _, f := range files {
		if strings.HasSuffix(f, "_owner.sql") {
			break
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		schema = append(schema, string(b))
	}
	if _, err := raw.Exec(strings.Join(schema, ";\n") + fmt.Sprintf("; PRAGMA user_version = %d;", len(schema)) + `
		INSERT INTO cursors (name, value) VALUES ('global', 9);
		INSERT INTO thread_cursors (thread, seq) VALUES ('T', 4);
		INSERT INTO decisions (event_id, thread, seq, gseq, decision, created_at) VALUES ('E', 'T', 3, 7, '{}', 'ts');
		INSERT INTO notices (trigger_id, kind, thread, post) VALUES ('E', 'clarify', 'T', '{}');
		INSERT INTO invocations (thread, trigger_id, trigger_seq, trigger_gseq, participant, agent, command, hop, status, queued_at)
		VALUES ('T', 'E', 3, 7, 'alice', 'alice', '["x"]', 0, 'running', 'ts')`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	first, err := ledger.Open(ctx, path, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if c, ok, _ := first.Cursor(ctx); !ok || c != 9 {
		t.Errorf("adopted cursor = %d %v, want 9", c, ok)
	}
	if c, ok, _ := first.ThreadCursor(ctx, "T"); !ok || c != 4 {
		t.Errorf("adopted thread cursor = %d %v, want 4", c, ok)
	}
	if _, err := first.Decision(ctx, "E"); err != nil {
		t.Errorf("adopted decision: %v", err)
	}
	if n, _, _ := first.PendingNotices(ctx); len(n) != 1 {
		t.Errorf("adopted notices = %+v", n)
	}
	if u := un(t, first); len(u) != 1 || u[0].Owner != "laptop" {
		t.Errorf("adopted unfinished = %+v", u)
	}
	second, err := ledger.Open(ctx, path, "server")
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if c, ok, _ := second.Cursor(ctx); ok {
		t.Errorf("second id's cursor = %d; it must start afresh", c)
	}
	if u, _ := second.Unfinished(ctx); len(u) != 0 {
		t.Errorf("second id's unfinished = %+v", u)
	}
}
