package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/agent-bridge/agent-bridge/internal/pgschema"
)

// BuildOldPostgres writes c into the empty PostgreSQL database at url with
// the previous release's schema (its migrations from git, OldMigrations,
// versioned in schemaTable: postgres.SchemaTable), with COPY: the database
// a user upgrading to search has.
func BuildOldPostgres(t testing.TB, url, schemaTable string, c Corpus) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	db := stdlib.OpenDB(*conn.Config())
	err = pgschema.Migrate(ctx, db, OldMigrations(t, "bridge/postgres/migrations"), "migrations", schemaTable)
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	zero := `{"paused":false,"muted":[],"discussion":{"on":false,"allow_agent_mentions":false},"invited_auto":{"on":false},"participants":{"invited":[]}}`
	ts := base.Add(-time.Hour).Format("2006-01-02T15:04:05.000000Z")
	var threads, events [][]any
	for th := range c.Threads {
		id := c.Thread(th)
		threads = append(threads, []any{id, []byte("thread " + id), ts, ts, int64(0), 0, zero})
		events = append(events, []any{int64(th + 1), "C" + id, id, int64(1), ts, "thread.created", "user", "all", []byte(`"thread ` + id + `"`), "{}", 0})
	}
	for i := range c.Events {
		r := c.Row(i, base)
		events = append(events, []any{int64(c.Threads + i + 1), r[0], r[1], r[2], r[3], r[4], r[5], r[6], []byte(r[7].(string)), r[8], r[9]})
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"threads"}, []string{"id", "name", "created_at", "updated_at", "last_seq", "last_hop", "state"}, pgx.CopyFromRows(threads)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"gseq", "id", "thread", "seq", "ts", "type", "sender", "recipient", "content", "meta", "hop"}, pgx.CopyFromRows(events)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE log_head SET gseq = $1`, int64(len(events))); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE threads t SET last_seq = (SELECT max(seq) FROM events WHERE thread = t.id)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
}
