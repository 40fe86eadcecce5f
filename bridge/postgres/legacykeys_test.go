package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agent-bridge/agent-bridge/internal/pgschema"
	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
	"github.com/jackc/pgx/v5/stdlib"
)

// TestLegacyKeysMigration: the migration to version 12 copies the
// idempotency keys a release before scoped keys stored, and only those,
// into idempotency_legacy (storetest.LegacyKeyRows).
func TestLegacyKeysMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pg.Database(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	if err := pgschema.Migrate(ctx, db, storetest.MigrationsBefore(t, migrations, "migrations", "idempotency_legacy"), "migrations", SchemaTable); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO threads (id, name, created_at, updated_at, last_seq, last_hop, state) VALUES ('t', 't', '', '', 0, 0, '{}')`); err != nil {
		t.Fatal(err)
	}
	for _, r := range storetest.LegacyKeyRows {
		if _, err := pool.Exec(ctx, `INSERT INTO idempotency (thread, key, event_id) VALUES ('t', $1, 'e')`, []byte(r.Key)); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Close()
	pool.Close()
	s := openStore(t, url, Options{})
	rows, err := s.pool.Query(ctx, `SELECT key FROM idempotency_legacy WHERE thread = 't'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		got = append(got, string(k))
	}
	storetest.WantLegacyKeys(t, got)
	if !s.legacyKeys {
		t.Error("the store does not know it holds legacy keys")
	}
}
