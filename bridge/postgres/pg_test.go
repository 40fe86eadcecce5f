package postgres

import (
	"context"
	"errors"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/migration"
	"github.com/jackc/pgx/v5"
)

// TestReopenAndSchemaVersion reopens a store on its database (everything
// is there, numbering continues) and refuses a database a newer binary
// migrated.
func TestReopenAndSchemaVersion(t *testing.T) {
	ctx := context.Background()
	url := pg.Database(t)
	s, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "t", Name: "a\x00b"}); err != nil {
		t.Fatalf("a name with a NUL byte: %v", err)
	}
	first, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: agentbridge.EventInput{From: "user", Content: []byte(`"x"`)}, IdempotencyKey: "k\x00\xff"})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: agentbridge.EventInput{From: "user", Content: []byte(`"late"`)}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v, want ErrClosed", err)
	}
	s = openStore(t, url, Options{})
	again, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: agentbridge.EventInput{From: "user", Content: []byte(`"x"`)}, IdempotencyKey: "k\x00\xff"})
	if err != nil || !again.Replayed || again.Event.ID != first.Event.ID {
		t.Fatalf("idempotency key after reopen: %+v %v", again, err)
	}
	next, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: agentbridge.EventInput{From: "user", Content: []byte(`"y"`)}})
	if err != nil || next.Event.Seq != 3 || next.Event.GSeq != first.Event.GSeq+1 || next.Event.TS <= first.Event.TS {
		t.Fatalf("after reopen: %+v %v, want seq 3 following %+v", next.Event, err, first.Event)
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, `UPDATE `+SchemaTable+` SET version = 99`); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, url, Options{}); !errors.Is(err, migration.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer database: %v, want ErrSchemaTooNew", err)
	}
}
