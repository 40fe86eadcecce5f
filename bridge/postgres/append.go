// The append path: appendEvent is an ordinary append from top to bottom
// (the thread's head read under its row lock, storecore.Preamble's
// idempotency, reply_to, Admit and hop with lookups answering from the
// batch and the database, add), createThread a new thread; both only queue
// their events in the batch, which write (writer.go) numbers and stores at
// the end. Everything here runs on the writer goroutine.

package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// head is a thread as the batch sees it, read under its row lock.
type head struct {
	name     string
	created  string
	lastTS   time.Time
	lastSeq  int64
	state    agentbridge.ThreadState
	stateKey string
	dirty    bool
	// messages is whether the thread holds a message: the first message
	// of a thread that has none gets hop 0 (agentbridge.AssignHop).
	messages bool
}

// batchEvent is what a later append in the same batch may need of an
// event: the thread it is in and its hop.
type batchEvent struct {
	thread string
	hop    int
	seq    int64
}

// batch is one group commit's working set.
type batch struct {
	heads map[string]*head
	// events are the batch's new events, in order; their gseqs are
	// assigned at the end, under the log_head lock.
	events []agentbridge.Event
	metas  []string
	hops   []int
	// snapshots are state rows to insert: (thread, seq, state).
	snapshots [][3]any
	// keys are idempotency keys recorded in this batch: thread+"\x00"+key
	// to the index in events.
	keys map[string]int
	ids  map[string]batchEvent // event id → its thread and hop, for reply_to within the batch
}

// appendEvent appends req (meta: its Meta in stored form; ctl: its parsed
// control) in the batch: storecore.AppendEvent, with l holding the
// thread's head meanwhile.
func (s *Store) appendEvent(ctx context.Context, l *lookups, req agentbridge.AppendRequest, meta string, ctl *agentbridge.Control) (response, error) {
	h, ok := l.b.heads[req.Thread]
	if !ok {
		return response{err: agentbridge.ThreadNotFound(req.Thread)}, nil
	}
	l.h = h
	a, _, err := storecore.AppendEvent(ctx, l, req, meta, ctl, h.state, h.messages, s.Humans)
	switch {
	case err != nil:
		return response{}, err
	case a.Replayed:
		r := l.replayed
		l.replayed = response{}
		r.ignored = a.Ignored
		return r, nil
	case a.Refusal != nil:
		l.replayed = response{}
		return response{err: a.Refusal}, nil
	}
	return response{pending: l.added + 1, ignored: a.Ignored}, nil
}

// lookups is storecore.AppendTx inside one group commit: it answers from
// the batch first (an event or key of an earlier append in it), then the
// database, and queues the events it adds in the batch.
type lookups struct {
	s  *Store
	tx pgx.Tx
	b  *batch
	// legacyKeys is Store.legacyKeys.
	legacyKeys bool
	// replayed is the answer Replay found, for the append that asked.
	replayed response
	// h is the head of the append's thread, and added the index in the
	// batch of the event Add queued last.
	h     *head
	added int
}

// Conn is the transaction.
func (l *lookups) Conn() storecore.Conn { return pgConn{l.tx} }

// CheckFence checks f against its claim, locked until COMMIT.
func (l *lookups) CheckFence(ctx context.Context, f agentbridge.ClaimFence) (refusal, err error) {
	return storecore.ClaimSQL{E: &l.s.Engine, C: pgConn{l.tx}}.CheckFence(ctx, f)
}

// Add numbers and stamps ev and queues it in the batch.
func (l *lookups) Add(_ context.Context, ev agentbridge.Event, meta string, ctl *agentbridge.Control) (_ agentbridge.Event, err error) {
	ev.Seq = l.h.lastSeq + 1
	l.h.messages = l.h.messages || ev.Type == agentbridge.TypeMessage
	l.added, err = l.s.add(l.b, &ev, meta, ctl, l.h, storecore.NextTime(l.h.lastTS))
	return ev, err
}

// RecordKey queues thread's key for the event Add queued last.
func (l *lookups) RecordKey(_ context.Context, thread, key, _ string) error {
	l.b.keys[thread+"\x00"+key] = l.added
	return nil
}

func (l *lookups) Replay(ctx context.Context, thread, key string) (agentbridge.Event, bool, error) {
	if i, ok := l.b.keys[thread+"\x00"+key]; ok {
		l.replayed = response{pending: i + 1, replayed: true}
		return l.b.events[i], true, nil
	}
	return l.replay(ctx, `SELECT event_id FROM idempotency WHERE thread = $1 AND key = $2`, thread, key)
}

// ReplayLegacy is Replay among the keys of a release before scoped keys,
// when the database holds any (Store.legacyKeys); the batch holds none.
func (l *lookups) ReplayLegacy(ctx context.Context, thread, key string) (agentbridge.Event, bool, error) {
	if !l.legacyKeys {
		return agentbridge.Event{}, false, nil
	}
	return l.replay(ctx, `SELECT event_id FROM idempotency_legacy WHERE thread = $1 AND key = $2`, thread, key)
}

// replay loads the event the key query q finds.
func (l *lookups) replay(ctx context.Context, q, thread, key string) (agentbridge.Event, bool, error) {
	var id string
	found, err := storecore.Found(l.tx.QueryRow(ctx, q, thread, []byte(key)).Scan(&id))
	if !found {
		return agentbridge.Event{}, false, err
	}
	ev, err := storecore.ScanEvent(l.tx.QueryRow(ctx, selectEvent+` WHERE id = $1`, id))
	if err != nil {
		return agentbridge.Event{}, false, fmt.Errorf("load idempotent event %s: %w", id, err)
	}
	l.replayed = response{event: ev, replayed: true}
	return ev, true, nil
}

func (l *lookups) Event(ctx context.Context, thread, id string) (agentbridge.Event, bool, error) {
	if e, ok := l.b.ids[id]; ok {
		for _, ev := range l.b.events {
			if ev.ID == id {
				return ev, e.thread == thread, nil
			}
		}
	}
	ev, err := storecore.ScanEvent(l.tx.QueryRow(ctx, selectEvent+` WHERE id = $1`, id))
	found, err := storecore.Found(err)
	return ev, found && ev.Thread == thread, err
}

// FirstAnswer reads the stored events after target that name it, then the
// batch's, in order.
func (l *lookups) FirstAnswer(ctx context.Context, thread string, target agentbridge.Event, answers func(agentbridge.Event) bool) (agentbridge.Event, bool, error) {
	rows, err := l.tx.Query(ctx, selectEvent+` WHERE thread = $1 AND seq > $2 AND (position($3::bytea IN content) > 0 OR strpos(meta, $4) > 0) ORDER BY seq`,
		thread, target.Seq, []byte(target.ID), target.ID)
	if err != nil {
		return agentbridge.Event{}, false, err
	}
	defer rows.Close()
	if ev, found, err := storecore.FirstEvent(rows, answers); err != nil || found {
		return ev, found, err
	}
	for _, ev := range l.b.events {
		if ev.Thread == thread && ev.Seq > target.Seq && answers(ev) {
			return ev, true, nil
		}
	}
	return agentbridge.Event{}, false, nil
}

func (l *lookups) ReplyTarget(ctx context.Context, thread, id string) (agentbridge.ReplyTarget, error) {
	if e, ok := l.b.ids[id]; ok && e.thread == thread {
		return agentbridge.ReplyTarget{Found: true, Hop: e.hop, Seq: e.seq}, nil
	}
	var t agentbridge.ReplyTarget
	var err error
	t.Found, err = storecore.Found(l.tx.QueryRow(ctx, `SELECT hop, seq FROM events WHERE id = $1 AND thread = $2`, id, thread).Scan(&t.Hop, &t.Seq))
	return t, err
}

// SenderHopAfter reads the stored messages, then the batch's.
func (l *lookups) SenderHopAfter(ctx context.Context, thread, sender string, seq int64) (int, bool, error) {
	var stored *int
	if err := l.tx.QueryRow(ctx, `SELECT max(hop) FROM events WHERE thread = $1 AND seq > $2 AND sender = $3 AND type = 'message'`,
		thread, seq, sender).Scan(&stored); err != nil {
		return 0, false, err
	}
	hop, found := 0, stored != nil
	if found {
		hop = *stored
	}
	for i, ev := range l.b.events {
		if ev.Thread == thread && ev.Seq > seq && ev.From == sender && ev.Type == agentbridge.TypeMessage {
			hop, found = max(hop, l.b.hops[i]), true
		}
	}
	return hop, found, nil
}

func (s *Store) createThread(ctx context.Context, tx pgx.Tx, b *batch, req agentbridge.CreateThreadRequest) (response, error) {
	id, err := storecore.ThreadID(req, s.entropy)
	if err != nil {
		return response{}, err
	}
	if _, ok := b.heads[id]; ok {
		return response{err: storecore.ThreadExists(id)}, nil
	}
	ev, zero, err := storecore.CreatedEvent(id, req)
	if err != nil {
		return response{}, err
	}
	h := &head{name: req.Name, stateKey: zero}
	ts := storecore.NextTime(time.Time{})
	h.created = agentbridge.FormatTime(ts)
	// The row goes in now, so that another bridge creating the same id
	// waits for this commit and then finds it (and this batch finds
	// theirs); the head columns are set again by write.
	tag, err := tx.Exec(ctx, `INSERT INTO threads (id, name, created_at, updated_at, last_seq, last_hop, state)
		VALUES ($1, $2, $3, $3, 0, 0, $4) ON CONFLICT (id) DO NOTHING`, id, []byte(req.Name), h.created, zero)
	if err != nil {
		return response{}, fmt.Errorf("insert thread %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return response{err: storecore.ThreadExists(id)}, nil
	}
	b.heads[id] = h
	meta, err := storecore.StoredMeta(&ev.Meta)
	if err != nil {
		return response{}, err
	}
	i, err := s.add(b, &ev, meta, nil, h, ts)
	if err != nil {
		return response{}, err
	}
	th := agentbridge.Thread{ID: id, Name: req.Name, CreatedAt: ev.TS, UpdatedAt: ev.TS, LastSeq: 1, EventCount: 1}
	return response{thread: th, pending: i + 1}, nil
}

// add stamps ev with ts t (after the thread's last) and an id, folds it
// (with ctl, its parsed control) into h and queues it for write; it
// returns ev's index in the batch.
func (s *Store) add(b *batch, ev *agentbridge.Event, meta string, ctl *agentbridge.Control, h *head, t time.Time) (int, error) {
	u, err := ulid.New(ulid.Timestamp(t), s.entropy)
	if err != nil {
		return 0, fmt.Errorf("new event id: %w", err)
	}
	ev.ID = u.String()
	ev.TS = agentbridge.FormatTime(t)
	h.lastTS = t
	after := agentbridge.FoldParsed(h.state, *ev, ctl, s.Humans)
	if ev.Type == agentbridge.TypeThreadRenamed {
		h.name = ev.Text()
	}
	h.lastSeq = ev.Seq
	changed := agentbridge.SnapshotDue(h.state, after, *ev)
	h.state = after
	h.dirty = true
	if changed {
		key, err := storecore.StateKey(after)
		if err != nil {
			return 0, err
		}
		if key != h.stateKey {
			b.snapshots = append(b.snapshots, [3]any{ev.Thread, ev.Seq, key})
			h.stateKey = key
		}
	}
	b.events = append(b.events, *ev)
	b.metas = append(b.metas, meta)
	b.hops = append(b.hops, after.LastHop)
	b.ids[ev.ID] = batchEvent{thread: ev.Thread, hop: after.LastHop, seq: ev.Seq}
	return len(b.events) - 1, nil
}
