package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/agent-bridge/agent-bridge/internal/storetest"
)

// buildOldCorpus writes c into a new database at path with the previous
// release's schema (its migrations from git), in one transaction.
func buildOldCorpus(t testing.TB, path string, c storetest.Corpus) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlitex.Open(path, sqlitex.Options{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqlitex.Migrate(ctx, db, storetest.OldMigrations(t, "bridge/sqlite/migrations"), "migrations"); err != nil {
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

// TestSearchCorpus: a database of the previous release with
// storetest.CorpusEvents events (20,000 here; CI runs it once with
// SEARCH_EVENTS=1000000) is indexed by the migration at Open; then words,
// phrases and prefixes find exactly the events whose text has them, each
// with a snippet; the thread and sender filters and a credential's threads
// narrow them; the latencies are logged (docs/performance.md, "Search").
func TestSearchCorpus(t *testing.T) {
	c := storetest.Corpus{Events: storetest.CorpusEvents(20000), Threads: 1000}
	path := filepath.Join(t.TempDir(), "old.db")
	start := time.Now()
	buildOldCorpus(t, path, c)
	t.Logf("built %d events of the previous release's schema in %v", c.Events, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Logf("migrated (indexed) in %v", time.Since(start).Round(time.Millisecond))
	var indexed int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM events_fts`).Scan(&indexed); err != nil {
		t.Fatal(err)
	}
	if want := c.Events + c.Threads; indexed != want {
		t.Fatalf("%d events indexed, want %d", indexed, want)
	}
	storetest.CheckCorpusSearch(t, s, c)
}
