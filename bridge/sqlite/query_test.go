package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/migration"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
)

func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nested", "dir", "bridge.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	newThread(t, s, "t")
	mustAppend(t, s, "t", control("user", `{"pause":{"on":true}}`))
	last := mustAppend(t, s, "t", agentbridge.EventInput{From: "user", Content: json.RawMessage(`"x"`)})
	if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: msg("user", "keyed"), IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: msg("user", "late")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v, want ErrClosed", err)
	}

	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs := allEvents(t, s, "t")
	if len(evs) != 4 || !reflect.DeepEqual(evs[2], last) {
		t.Fatalf("after reopen: %d events, third %+v want %+v", len(evs), evs[2], last)
	}
	st, _, _ := s.State(ctx, "t", 0)
	if !st.Paused {
		t.Error("derived state lost on reopen")
	}
	res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: msg("user", "keyed"), IdempotencyKey: "k"})
	if err != nil || !res.Replayed {
		t.Errorf("idempotency key lost on reopen: %+v %v", res, err)
	}
	next := mustAppend(t, s, "t", msg("user", "after reopen"))
	if next.Seq != 5 || next.TS <= evs[3].TS || next.GSeq <= evs[3].GSeq {
		t.Errorf("after reopen: seq %d ts %s gseq %d do not continue from %+v", next.Seq, next.TS, next.GSeq, evs[3])
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridge.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sqlitex.Open(path, sqlitex.Options{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := sqlitex.SchemaVersion(ctx, db); v < 1 {
		t.Fatalf("schema version %d after Open", v)
	}
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if _, err := Open(ctx, path, Options{}); !errors.Is(err, migration.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer database: %v, want ErrSchemaTooNew", err)
	}
}

// TestQueryPlansUseIndexes checks that no event query walks a table or
// sorts: each is answered by index seeks, whatever the thread's length.
// Listing threads is the one query that reads every thread (and sorts
// them), by design since schema version 3; it must still never walk the
// events.
func TestQueryPlansUseIndexes(t *testing.T) {
	s := openStore(t, Options{})
	for name, q := range map[string]string{
		"thread range": sqlThreadRange, "ts at": sqlTSAt, "global range": sqlGlobalRange,
		"head": sqlHead, "snapshot": sqlSnapshotAt, "hop": sqlHopAt, "threads after": sqlThreadsAfter,
		"state": sqlState, "writer head": wSelectHead, "last seq": sqlLastSeq,
		"thread": selectThread + ` WHERE id = ?`,
	} {
		args := make([]any, strings.Count(q, "?"))
		for i := range args {
			args[i] = 1
		}
		rows, err := s.rdb.Query("EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		_ = rows.Close()
		joined := strings.Join(plan, "; ")
		t.Logf("%s: %s", name, joined)
		if name == "threads after" {
			joined = strings.Replace(joined, "SCAN t", "", 1)
			joined = strings.Replace(joined, "USE TEMP B-TREE FOR ORDER BY", "", 1)
		}
		if strings.Contains(joined, "SCAN") || strings.Contains(joined, "TEMP B-TREE") {
			t.Errorf("%s scans or sorts: %s", name, joined)
		}
	}
}

// TestMigrateFromVersion1 builds a database with the 0001 schema only (the
// first released one, events_by_ts included), fills it with the rows the
// writer produced in a reference store, then opens it with the current
// binary: it must migrate to the latest version and answer every query as the
// reference does, and go on appending where it left off.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	refPath, oldPath := filepath.Join(dir, "ref.db"), filepath.Join(dir, "v1.db")

	ref, err := Open(ctx, refPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ref.Close() })
	var firstIDs []string
	for _, id := range []string{"a", "b", "c"} {
		newThread(t, ref, id)
		first := mustAppend(t, ref, id, msg("user", "hello "+id))
		firstIDs = append(firstIDs, first.ID)
	}
	mustAppend(t, ref, "a", control("user", `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m"}}}`))
	mustAppend(t, ref, "a", control("user", `{"mute":{"targets":["claude"],"mode":"hard"}}`))
	mustAppend(t, ref, "b", agentbridge.EventInput{Type: agentbridge.TypeThreadRenamed, From: "user", Content: json.RawMessage(`"renamed"`)})
	for i := range 20 {
		th := []string{"a", "b", "c"}[i%3]
		in := msg("codex", fmt.Sprint("reply ", i))
		in.Meta = agentbridge.Meta{ReplyTo: firstIDs[i%3], Tags: []string{"coordinator"},
			Extra: map[string]json.RawMessage{"x": json.RawMessage(`{"k": 1}`)}}
		if _, err := ref.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: in, IdempotencyKey: fmt.Sprint("key", i)}); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, ref, "c", control("user", `{"pause":{"on":true}}`))
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}

	// The version-1 file: 0001 alone, then the reference's rows.
	v1, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	init, err := fs.ReadFile(v1, "0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlitex.Open(oldPath, sqlitex.Options{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitex.Migrate(ctx, db, fstest.MapFS{"m/0001_init.sql": {Data: init}}, "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `ATTACH DATABASE ? AS ref`, refPath); err != nil {
		t.Fatal(err)
	}
	// Version 1 kept each thread's head in its row, as the writer of the
	// time wrote it.
	if _, err := db.ExecContext(ctx, `INSERT INTO main.threads
		SELECT id, name, created_at, updated_at, last_seq, last_seq FROM ref.thread_heads`); err != nil {
		t.Fatalf("copy threads: %v", err)
	}
	for _, table := range []string{"events", "thread_state", "state_snapshots", "idempotency"} {
		if _, err := db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO main.%s SELECT * FROM ref.%s`, table, table)); err != nil {
			t.Fatalf("copy %s: %v", table, err)
		}
	}
	if _, err := db.ExecContext(ctx, `DETACH DATABASE ref`); err != nil {
		t.Fatal(err)
	}
	if v, err := sqlitex.SchemaVersion(ctx, db); err != nil || v != 1 {
		t.Fatalf("fixture schema version %d %v, want 1", v, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	answers := func(s *Store) map[string]any {
		t.Helper()
		out := map[string]any{}
		put := func(key string, v any, err error) {
			if err != nil {
				v = agentbridge.ErrorCode(err) + ": " + err.Error()
			}
			out[key] = v
		}
		head, err := s.Head(ctx)
		put("head", head, err)
		evs, err := s.Events(ctx, 0, 0)
		put("events", evs, err)
		evs, err = s.Events(ctx, head-5, 3)
		put("events page", evs, err)
		_, err = s.Events(ctx, head+1, 0)
		put("events ahead", nil, err)
		ths, err := s.Threads(ctx, "", 0)
		put("threads", ths, err)
		ths, err = s.Threads(ctx, "b", 1)
		put("threads after b", ths, err)
		for _, id := range []string{"a", "b", "c", "nope"} {
			all, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: id, After: -1})
			put(id+" all", all, err)
			th, err := s.Thread(ctx, id)
			put(id+" thread", th, err)
			for _, q := range []agentbridge.ThreadEventsQuery{
				{After: 3}, {After: -1, Tail: 4}, {After: -1, Until: 5}, {After: 2, Limit: 2}, {After: 99},
				{After: -1, Since: "2000-01-01T00:00:00.000000Z"}, {After: -1, Since: "9999"},
			} {
				q.Thread = id
				evs, err := s.ThreadEvents(ctx, q)
				put(fmt.Sprintf("%s %+v", id, q), evs, err)
			}
			for i, ev := range all {
				evs, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: id, After: -1, Since: ev.TS})
				put(fmt.Sprintf("%s since #%d", id, i), evs, err)
				st, seq, err := s.State(ctx, id, ev.Seq)
				put(fmt.Sprintf("%s state at %d", id, ev.Seq), []any{st, seq}, err)
				got, err := storetest.EventAt(s, id, ev.Seq)
				put(id+" event "+ev.ID, got, err)
			}
			st, seq, err := s.State(ctx, id, 0)
			put(id+" state", []any{st, seq}, err)
		}
		return out
	}

	ref, err = Open(ctx, refPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := answers(ref)
	old, err := Open(ctx, oldPath, Options{})
	if err != nil {
		t.Fatalf("open the version-1 database: %v", err)
	}
	t.Cleanup(func() { _ = old.Close() })
	migs, err := migration.Read(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := sqlitex.SchemaVersion(ctx, old.rdb); err != nil || v != len(migs) {
		t.Fatalf("schema version after Open: %d %v, want the latest, %d", v, err, len(migs))
	}
	var n int
	if err := old.rdb.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name IN ('events_by_ts', 'threads_by_update')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("events_by_ts or threads_by_update still there after migrating (%d, %v)", n, err)
	}
	var cols string
	if err := old.rdb.QueryRowContext(ctx, `SELECT group_concat(name) FROM pragma_table_info('threads')`).Scan(&cols); err != nil || cols != "id,name,created_at" {
		t.Fatalf("threads columns after migrating: %q %v, want id,name,created_at", cols, err)
	}
	got := answers(old)
	for key, w := range want {
		if !reflect.DeepEqual(got[key], w) {
			t.Errorf("%s: migrated database answers\n%+v\nwant\n%+v", key, got[key], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d answers, want %d", len(got), len(want))
	}

	// Writing goes on from both, identically but for ids and times.
	for _, s := range []*Store{ref, old} {
		retry := msg("codex", "reply 0")
		retry.Meta = agentbridge.Meta{ReplyTo: firstIDs[0], Tags: []string{"coordinator"},
			Extra: map[string]json.RawMessage{"x": json.RawMessage(`{"k": 1}`)}}
		res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "a", Input: retry, IdempotencyKey: "key0"})
		if err != nil || !res.Replayed {
			t.Errorf("idempotent replay after migration: %+v %v", res, err)
		}
		_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "a", Input: msg("claude", "muted?")})
		wantCode(t, err, agentbridge.ECodeParticipantMuted)
		_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "c", Input: msg("codex", "paused?")})
		wantCode(t, err, agentbridge.ECodeThreadPaused)
	}
	head := want["a all"].([]agentbridge.Event)
	next := mustAppend(t, old, "a", msg("user", "after migration"))
	if last := head[len(head)-1]; next.Seq != last.Seq+1 || next.TS <= last.TS {
		t.Errorf("after migration: seq %d ts %s do not continue from seq %d ts %s", next.Seq, next.TS, last.Seq, last.TS)
	}
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}
}
