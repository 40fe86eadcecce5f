package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
)

func TestEventRoundTrip(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	th := newThread(t, s, "t").ID
	first := mustAppend(t, s, th, msg("user", "hi"))

	body := fmt.Sprintf(`{"from":"codex","to":"user","content":"réponse \u00e9 \"quoted\"",
		"meta":{"reply_to":%q,"tags":["coordinator"],"via":"bridge-coordinator","hop":2,"custom":{"b": [1, 2.50, null]},"z":"last"}}`, first.ID)
	in, err := agentbridge.DecodeEventInput([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	cases := []agentbridge.EventInput{
		in,
		{Type: "custom.kind", From: "tool", Content: nil},
		{Type: "custom.kind", From: "tool", Content: json.RawMessage(`{"nested": {"a": [1,2,3]}, "s": "x"}`)},
		{Type: agentbridge.TypeControl, From: "user", Content: json.RawMessage(`"{\"pause\":{\"on\":false}}"`), Meta: agentbridge.Meta{Tags: []string{}}},
		// Typed keys only: stored without decoding its own encoding again.
		{From: "codex", Content: json.RawMessage(`"x"`), Meta: agentbridge.Meta{ReplyTo: first.ID, Tags: []string{"a", "b"}, Via: "v", Hop: new(0)}},
		// Invalid UTF-8 is stored as U+FFFD; the answer must say so too.
		{From: "codex", Content: json.RawMessage(`"x"`), Meta: agentbridge.Meta{Tags: []string{"bad\xff"}, Via: "v\xfe"}},
	}
	for i, in := range cases {
		res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: in})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		got, err := s.Event(ctx, res.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, res.Event) {
			t.Errorf("case %d: stored event differs from the appended one:\n got %+v\nwant %+v", i, got, res.Event)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(res.Event)
		if string(a) != string(b) {
			t.Errorf("case %d: JSON differs:\n%s\n%s", i, a, b)
		}
	}
	ev, _ := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: th, After: 2, Limit: 1})
	if string(ev[0].Content) != `"réponse \u00e9 \"quoted\""` {
		t.Errorf("content not kept as given: %s", ev[0].Content)
	}
	if string(ev[0].Meta.Extra["custom"]) != `{"b": [1, 2.50, null]}` || *ev[0].Meta.Hop != 2 || ev[0].Meta.Via != "bridge-coordinator" {
		t.Errorf("meta not kept as given: %+v", ev[0].Meta)
	}
	if _, err := s.Event(ctx, "01NOSUCHEVENT"); agentbridge.ErrorCode(err) != agentbridge.ECodeEventNotFound {
		t.Errorf("Event(unknown): %v", err)
	}
}

func TestIdempotency(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	th := newThread(t, s, "t").ID
	other := newThread(t, s, "u").ID
	req := agentbridge.AppendRequest{Thread: th, Input: msg("codex", "reply"), IdempotencyKey: "trigger-1/codex"}
	first, err := s.Append(ctx, req)
	if err != nil || first.Replayed {
		t.Fatalf("first append: %+v %v", first, err)
	}
	// The retry is answered even if the thread has since been paused.
	mustAppend(t, s, th, control("user", `{"pause":{"on":true}}`))
	again, err := s.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || !reflect.DeepEqual(again.Event, first.Event) {
		t.Fatalf("retry = %+v, want the first event replayed", again)
	}
	// The same key in another thread is another append.
	req.Thread = other
	res, err := s.Append(ctx, req)
	if err != nil || res.Replayed || res.Event.Thread != other {
		t.Fatalf("same key in another thread: %+v %v", res, err)
	}
	if n := len(allEvents(t, s, th)); n != 3 {
		t.Errorf("thread has %d events, want 3: the retry stored something", n)
	}
	if st := s.Stats(); st.Replayed != 1 {
		t.Errorf("Stats.Replayed = %d, want 1", st.Replayed)
	}
}

func TestStateAtEveryRevision(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	th := newThread(t, s, "t").ID
	hop := 5
	inputs := []agentbridge.EventInput{
		control("user", `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"gpt-5","roles":["reviewer"]}}}`),
		msg("user", "hello"),
		msg("codex", "hi"),
		{From: "claude", Content: json.RawMessage(`"stamped"`), Meta: agentbridge.Meta{Hop: &hop}},
		msg("claude", "unstamped"),
		control("user", `{"mute":{"targets":["claude"],"mode":"hard"},"discussion":{"on":true}}`),
		control("codex", `{"pause":{"on":true}}`), // not human: no change
		control("user", `{"pause":{"on":true},"invited_auto":{"on":true}}`),
		msg("user", "paused now"),
		control("user", `{"mute":{"targets":["codex"],"mode":"soft"},"unmute":{"targets":["claude"]}}`),
		control("claude", `{"invite":{"participant_id":"claude","profile":{"client":"claude","model":"opus","nickname":"C"}}}`),
		control("user", `{"pause":{"on":false},"discussion":{"on":true,"allow_agent_mentions":false}}`),
		control("user", `{"uninvite":{"participant_id":"codex"}}`),
		msg("codex", "still here"),
	}
	for _, in := range inputs {
		mustAppend(t, s, th, in)
	}
	evs := allEvents(t, s, th)
	var want agentbridge.ThreadState
	for _, ev := range evs {
		want = agentbridge.Fold(want, ev, agentbridge.DefaultHumans)
		got, seq, err := s.State(ctx, th, ev.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if seq != ev.Seq || !reflect.DeepEqual(got, want.Normalize()) {
			t.Fatalf("State(at=%d) = %+v (seq %d), want %+v", ev.Seq, got, seq, want.Normalize())
		}
	}
	now, seq, err := s.State(ctx, th, 0)
	if err != nil || seq != int64(len(evs)) || !reflect.DeepEqual(now, want.Normalize()) {
		t.Fatalf("State(now) = %+v seq %d %v, want %+v seq %d", now, seq, err, want.Normalize(), len(evs))
	}
	if now.LastHop != 1 || now.Paused || len(now.Participants.Invited) != 1 {
		t.Errorf("final state looks wrong: %+v", now)
	}
	e := wantCode(t, stateErr(s.State(ctx, th, int64(len(evs))+1)), agentbridge.ECodeCursorAhead)
	if e.Head == nil || *e.Head != int64(len(evs)) {
		t.Errorf("cursor_ahead head = %v, want %d", e.Head, len(evs))
	}
	wantCode(t, stateErr(s.State(ctx, th, -1)), agentbridge.ECodeInvalidField)
	wantCode(t, stateErr(s.State(ctx, "nope", 0)), agentbridge.ECodeThreadNotFound)
}

func stateErr(_ agentbridge.ThreadState, _ int64, err error) error { return err }

func TestThreadEventsQueries(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	th := newThread(t, s, "t").ID
	for i := 2; i <= 30; i++ {
		mustAppend(t, s, th, msg("user", fmt.Sprint(i)))
	}
	all := allEvents(t, s, th)
	seqs := func(evs []agentbridge.Event) string {
		var b strings.Builder
		for _, e := range evs {
			fmt.Fprintf(&b, "%d,", e.Seq)
		}
		return b.String()
	}
	rng := func(lo, hi int) string {
		var b strings.Builder
		for i := lo; i <= hi; i++ {
			fmt.Fprintf(&b, "%d,", i)
		}
		return b.String()
	}
	for _, c := range []struct {
		q    agentbridge.ThreadEventsQuery
		want string
	}{
		{agentbridge.ThreadEventsQuery{After: -1}, rng(1, 30)},
		{agentbridge.ThreadEventsQuery{After: 0}, rng(1, 30)},
		{agentbridge.ThreadEventsQuery{After: 25}, rng(26, 30)},
		{agentbridge.ThreadEventsQuery{After: 30}, ""},
		{agentbridge.ThreadEventsQuery{After: 10, Limit: 3}, rng(11, 13)},
		{agentbridge.ThreadEventsQuery{After: -1, Since: all[19].TS}, rng(21, 30)},
		{agentbridge.ThreadEventsQuery{After: -1, Since: all[29].TS}, ""},
		{agentbridge.ThreadEventsQuery{After: -1, Since: "2000-01-01T00:00:00.000000Z", Limit: 2}, rng(1, 2)},
		{agentbridge.ThreadEventsQuery{After: -1, Since: "9999"}, ""},
		{agentbridge.ThreadEventsQuery{After: 5, Since: all[19].TS}, rng(6, 30)}, // After wins
		{agentbridge.ThreadEventsQuery{After: -1, Tail: 5}, rng(26, 30)},
		{agentbridge.ThreadEventsQuery{After: -1, Tail: 50}, rng(1, 30)},
		{agentbridge.ThreadEventsQuery{After: -1, Tail: 5, Limit: 2}, rng(26, 27)},
		{agentbridge.ThreadEventsQuery{After: -1, Until: 10}, rng(1, 10)},
		{agentbridge.ThreadEventsQuery{After: -1, Until: 10, Tail: 3}, rng(8, 10)},
		{agentbridge.ThreadEventsQuery{After: 4, Until: 10}, rng(5, 10)},
		{agentbridge.ThreadEventsQuery{After: -1, Limit: 4}, rng(1, 4)},
	} {
		c.q.Thread = th
		got, err := s.ThreadEvents(ctx, c.q)
		if err != nil {
			t.Fatalf("%+v: %v", c.q, err)
		}
		if seqs(got) != c.want {
			t.Errorf("%+v: seqs %s, want %s", c.q, seqs(got), c.want)
		}
	}

	qErr := func(q agentbridge.ThreadEventsQuery) error {
		_, err := s.ThreadEvents(ctx, q)
		return err
	}
	e := wantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: 31}), agentbridge.ECodeCursorAhead)
	if e.Head == nil || *e.Head != 30 || e.Thread != th {
		t.Errorf("cursor_ahead = %+v, want head 30", e)
	}
	wantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: -1, Until: 31}), agentbridge.ECodeCursorAhead)
	if e := wantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: -1, Limit: agentbridge.MaxEventsLimit + 1}), agentbridge.ECodeInvalidField); e.Field != "limit" {
		t.Errorf("limit over max: field %q", e.Field)
	}
	wantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: -1, Limit: -1}), agentbridge.ECodeInvalidField)
	wantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: -2}), agentbridge.ECodeInvalidField)
	wantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: -1, Tail: -1}), agentbridge.ECodeInvalidField)
	wantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: "nope", After: -1}), agentbridge.ECodeThreadNotFound)

	// The global log.
	head, _ := s.Head(ctx)
	page, err := s.Events(ctx, head-3, 2)
	if err != nil || len(page) != 2 || page[0].GSeq != head-2 {
		t.Fatalf("Events(head-3, 2) = %d events %v", len(page), err)
	}
	if evs, err := s.Events(ctx, head, 0); err != nil || len(evs) != 0 {
		t.Fatalf("Events(head) = %v %v, want empty", evs, err)
	}
	e = wantCode(t, eventsErr(s.Events(ctx, head+1, 0)), agentbridge.ECodeCursorAhead)
	if e.Head == nil || *e.Head != head {
		t.Errorf("global cursor_ahead head = %v, want %d", e.Head, head)
	}
	wantCode(t, eventsErr(s.Events(ctx, 0, agentbridge.MaxEventsLimit+1)), agentbridge.ECodeInvalidField)
	wantCode(t, eventsErr(s.Events(ctx, -1, 0)), agentbridge.ECodeInvalidField)
}

func eventsErr(_ []agentbridge.Event, err error) error { return err }

func TestThreadsPaging(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	if ths, err := s.Threads(ctx, "", 0); err != nil || len(ths) != 0 {
		t.Fatalf("empty store: %v %v", ths, err)
	}
	for i := range 7 {
		newThread(t, s, fmt.Sprintf("t%d", i))
	}
	// Touch some threads so recency differs from creation order.
	for _, id := range []string{"t2", "t5", "t0"} {
		mustAppend(t, s, id, msg("user", "bump"))
	}
	want := []string{"t0", "t5", "t2", "t6", "t4", "t3", "t1"}
	var got []string
	after := ""
	for pages := 0; pages < 10; pages++ {
		page, err := s.Threads(ctx, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, th := range page {
			got = append(got, th.ID)
		}
		after = page[len(page)-1].ID
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paged threads %v, want %v", got, want)
	}
	all, _ := s.Threads(ctx, "", 0)
	for i := 1; i < len(all); i++ {
		if all[i].UpdatedAt > all[i-1].UpdatedAt {
			t.Fatalf("threads not most recently updated first: %v", all)
		}
	}
	if all[0].LastSeq != 2 || all[0].EventCount != 2 {
		t.Errorf("t0 = %+v, want last_seq=event_count=2", all[0])
	}
	if _, err := s.Threads(ctx, "nope", 2); agentbridge.ErrorCode(err) != agentbridge.ECodeInvalidField {
		t.Errorf("after an unknown thread: %v", err)
	}
	if _, err := s.Threads(ctx, "", -1); agentbridge.ErrorCode(err) != agentbridge.ECodeInvalidField {
		t.Errorf("negative limit: %v", err)
	}
}

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
	if _, err := Open(ctx, path, Options{}); !errors.Is(err, sqlitex.ErrSchemaTooNew) {
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

// TestSinceBoundaries checks firstAfter's search against a plain filter on
// every ts of threads of 1 to 40 events: since equal to an event's ts,
// between two events, before the first and after the last.
func TestSinceBoundaries(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	for n := 1; n <= 40; n++ {
		th := newThread(t, s, fmt.Sprintf("t%d", n)).ID
		for i := 2; i <= n; i++ {
			mustAppend(t, s, th, msg("user", fmt.Sprint(i)))
		}
		all := allEvents(t, s, th)
		sinces := []string{"", "2000-01-01T00:00:00.000000Z", all[0].TS[:10], "9999", all[n-1].TS + "0"}
		for _, ev := range all {
			ts, err := time.Parse(agentbridge.TimeLayout, ev.TS)
			if err != nil {
				t.Fatal(err)
			}
			// Equal, a microsecond before (equal to the previous event's ts
			// or between the two), and a string between it and the next.
			sinces = append(sinces, ev.TS, agentbridge.FormatTime(ts.Add(-time.Microsecond)), ev.TS+"x")
		}
		for _, since := range sinces {
			if since == "" {
				continue
			}
			var want []int64
			for _, ev := range all {
				if ev.TS > since {
					want = append(want, ev.Seq)
				}
			}
			got, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: th, After: -1, Since: since})
			if err != nil {
				t.Fatalf("n=%d since=%s: %v", n, since, err)
			}
			var gotSeqs []int64
			for _, ev := range got {
				gotSeqs = append(gotSeqs, ev.Seq)
			}
			if !slices.Equal(gotSeqs, want) {
				t.Errorf("n=%d since=%s: seqs %v, want %v", n, since, gotSeqs, want)
			}
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
		in.Meta = agentbridge.Meta{ReplyTo: firstIDs[i%3], Tags: []string{"coordinator"}, Hop: new(i % 4),
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
				got, err := s.Event(ctx, ev.ID)
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
	if v, err := sqlitex.SchemaVersion(ctx, old.rdb); err != nil || v != 4 {
		t.Fatalf("schema version after Open: %d %v, want 4", v, err)
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
		res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "a", Input: msg("user", "again"), IdempotencyKey: "key0"})
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
