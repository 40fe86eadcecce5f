package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
)

// TestLegacyKeysMigration: the migration to version 13 copies the
// idempotency keys a release before scoped keys stored, and only those,
// into idempotency_legacy (storetest.LegacyKeyRows).
func TestLegacyKeysMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridge.db")
	db, err := sqlitex.Open(path, sqlitex.Options{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitex.Migrate(ctx, db, storetest.MigrationsBefore(t, migrations, "migrations", "idempotency_legacy"), "migrations"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO threads (id, name, created_at) VALUES ('t', 't', '2026-01-01T00:00:00.000000Z')`); err != nil {
		t.Fatal(err)
	}
	for _, r := range storetest.LegacyKeyRows {
		if _, err := db.ExecContext(ctx, `INSERT INTO idempotency (thread, key, event_id) VALUES ('t', ?, 'e')`, r.Key); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.rdb.QueryContext(ctx, `SELECT key FROM idempotency_legacy WHERE thread = 't'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		got = append(got, k)
	}
	storetest.WantLegacyKeys(t, got)
	if !s.legacyKeys {
		t.Error("the store does not know it holds legacy keys")
	}
}
