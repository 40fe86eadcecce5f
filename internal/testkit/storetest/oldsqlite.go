package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
)

// BuildOldSQLite writes c into a new SQLite database at path with the
// previous release's schema (its migrations from git, OldMigrations), in
// one transaction: the database a user upgrading to search has.
func BuildOldSQLite(t testing.TB, path string, c Corpus) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlitex.Open(path, sqlitex.Options{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqlitex.Migrate(ctx, db, OldMigrations(t, "bridge/sqlite/migrations"), "migrations"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	zero := `{"paused":false,"muted":[],"discussion":{"on":false,"allow_agent_mentions":false},"invited_auto":{"on":false},"participants":{"invited":[]}}`
	for th := range c.Threads {
		id := c.Thread(th)
		ts := base.Add(-time.Hour).Format("2006-01-02T15:04:05.000000Z")
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO threads (id, name, created_at) VALUES (?, ?, ?)`, []any{id, "thread " + id, ts}},
			{`INSERT INTO thread_state (thread, seq, last_hop, state) VALUES (?, 0, 0, ?)`, []any{id, zero}},
			{`INSERT INTO events (id, thread, seq, ts, type, sender, recipient, content, meta, hop) VALUES (?, ?, 1, ?, 'thread.created', 'user', 'all', ?, '{}', 0)`,
				[]any{"C" + id, id, ts, `"thread ` + id + `"`}},
		} {
			if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO events (id, thread, seq, ts, type, sender, recipient, content, meta, hop) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Events {
		if _, err := stmt.ExecContext(ctx, c.Row(i, base)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
