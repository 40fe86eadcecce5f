package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// maxIdempotencyKeyLen bounds Idempotency-Key values, in bytes (as in the
// SQLite store).
const maxIdempotencyKeyLen = 256

// request is one write handed to the writer goroutine: a thread creation
// when create is set, else append.
type request struct {
	ctx    context.Context
	append agentbridge.AppendRequest
	meta   string // append's meta in stored form
	create *agentbridge.CreateThreadRequest
	reply  chan response
}

type response struct {
	event    agentbridge.Event
	thread   agentbridge.Thread
	replayed bool
	err      error
	// pending is 1 + the index in the batch's new events of the event this
	// response returns (filled once gseqs are assigned); 0 when event is
	// complete already.
	pending int
}

// Append validates req, hands it to the writer and waits for the commit.
// Once the writer has taken the request it is committed (or refused)
// whatever happens to ctx, and Append waits for that answer.
func (s *Store) Append(ctx context.Context, req agentbridge.AppendRequest) (agentbridge.AppendResult, error) {
	if err := req.Input.Validate(); err != nil {
		return agentbridge.AppendResult{}, err
	}
	if !agentbridge.ThreadIDPattern.MatchString(req.Thread) {
		return agentbridge.AppendResult{}, storecore.ThreadNotFound(req.Thread)
	}
	if len(req.IdempotencyKey) > maxIdempotencyKeyLen {
		return agentbridge.AppendResult{}, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "idempotency_key",
			"An idempotency key must be at most %d bytes.", maxIdempotencyKeyLen)
	}
	meta, err := storecore.StoredMeta(&req.Input.Meta)
	if err != nil {
		return agentbridge.AppendResult{}, err
	}
	resp := s.submit(ctx, &request{ctx: ctx, append: req, meta: meta})
	if resp.err != nil {
		return agentbridge.AppendResult{}, resp.err
	}
	return agentbridge.AppendResult{Event: resp.event, Replayed: resp.replayed}, nil
}

// CreateThread validates req, then creates the thread and its
// thread.created event through the writer.
func (s *Store) CreateThread(ctx context.Context, req agentbridge.CreateThreadRequest) (agentbridge.Thread, agentbridge.Event, error) {
	req, err := req.WithDefaults()
	if err != nil {
		return agentbridge.Thread{}, agentbridge.Event{}, err
	}
	resp := s.submit(ctx, &request{ctx: ctx, create: &req})
	return resp.thread, resp.event, resp.err
}

func (s *Store) submit(ctx context.Context, r *request) response {
	if err := ctx.Err(); err != nil {
		return response{err: fmt.Errorf("write not queued: %w", err)}
	}
	r.reply = make(chan response, 1)
	select {
	case <-s.done:
		return response{err: ErrClosed}
	default:
	}
	select {
	case s.reqs <- r:
	case <-s.done:
		return response{err: ErrClosed}
	case <-ctx.Done():
		return response{err: fmt.Errorf("write not queued: %w", ctx.Err())}
	}
	select {
	case resp := <-r.reply:
		return resp
	case <-s.stopped:
		select {
		case resp := <-r.reply:
			return resp
		default:
			return response{err: ErrClosed}
		}
	}
}

// run is the writer goroutine: it takes one request, drains whatever else
// is queued (up to the cap) and commits them together. After Close it
// commits what is still queued, then exits.
func (s *Store) run() {
	defer close(s.stopped)
	for {
		select {
		case first := <-s.reqs:
			s.commit(s.take([]*request{first}))
		case <-s.done:
			for {
				batch := s.take(nil)
				if len(batch) == 0 {
					return
				}
				s.commit(batch)
			}
		}
	}
}

func (s *Store) take(batch []*request) []*request {
	for len(batch) < s.max {
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

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

// commit runs one group commit. Refusals are decided before the refused
// request writes anything, so they never disturb their neighbours; a
// database error rolls the whole batch back and every caller gets it.
func (s *Store) commit(reqs []*request) {
	live := reqs[:0:0]
	for _, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			r.reply <- response{err: fmt.Errorf("write dropped before commit: %w", err)}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// The transaction belongs to the whole batch, not to any one caller.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resps := make([]response, len(live))
	b := &batch{heads: map[string]*head{}, keys: map[string]int{}, ids: map[string]batchEvent{}}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.lockThreads(ctx, tx, b, live); err != nil {
			return err
		}
		for i, r := range live {
			var err error
			if r.create != nil {
				resps[i], err = s.createThread(ctx, tx, b, *r.create)
			} else {
				resps[i], err = s.appendEvent(ctx, tx, b, r.append, r.meta)
			}
			if err != nil {
				return err
			}
		}
		return s.write(ctx, tx, b)
	})
	if err != nil {
		err = fmt.Errorf("group commit: %w", err)
		s.log.Error("group commit failed", "requests", len(live), "err", err)
		for _, r := range live {
			r.reply <- response{err: err}
		}
		return
	}
	if len(b.events) > 0 {
		s.wake()
	}
	for i, r := range live {
		resp := resps[i]
		if resp.pending > 0 {
			resp.event = b.events[resp.pending-1]
			resp.pending = 0
		}
		r.reply <- resp
	}
}

// lockThreads locks the rows of every existing thread the batch names, in
// id order (two bridges locking in one order cannot deadlock), and reads
// their heads.
func (s *Store) lockThreads(ctx context.Context, tx pgx.Tx, b *batch, live []*request) error {
	var ids []string
	for _, r := range live {
		switch {
		case r.create != nil && r.create.ID != "":
			ids = append(ids, r.create.ID)
		case r.create == nil:
			ids = append(ids, r.append.Thread)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT id, name, created_at, updated_at, last_seq, last_hop, state,
			EXISTS (SELECT 1 FROM events e WHERE e.thread = t.id AND e.type = 'message')
		FROM threads t WHERE id = ANY($1) ORDER BY id FOR UPDATE OF t`, ids)
	if err != nil {
		return fmt.Errorf("lock threads: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, updated string
		var name []byte
		var hop int
		h := &head{}
		if err := rows.Scan(&id, &name, &h.created, &updated, &h.lastSeq, &hop, &h.stateKey, &h.messages); err != nil {
			return fmt.Errorf("lock threads: %w", err)
		}
		h.name = string(name)
		if err := json.Unmarshal([]byte(h.stateKey), &h.state); err != nil {
			return fmt.Errorf("decode state of thread %s: %w", id, err)
		}
		h.state.LastHop = hop
		if t, err := time.Parse(agentbridge.TimeLayout, updated); err == nil {
			h.lastTS = t
		}
		b.heads[id] = h
	}
	return rows.Err()
}

func (s *Store) appendEvent(ctx context.Context, tx pgx.Tx, b *batch, req agentbridge.AppendRequest, meta string) (response, error) {
	h, ok := b.heads[req.Thread]
	if !ok {
		return response{err: storecore.ThreadNotFound(req.Thread)}, nil
	}
	if req.IdempotencyKey != "" {
		if i, ok := b.keys[req.Thread+"\x00"+req.IdempotencyKey]; ok {
			return response{pending: i + 1, replayed: true}, nil
		}
		var id string
		err := tx.QueryRow(ctx, `SELECT event_id FROM idempotency WHERE thread = $1 AND key = $2`,
			req.Thread, []byte(req.IdempotencyKey)).Scan(&id)
		switch {
		case err == nil:
			ev, err := scanEvent(tx.QueryRow(ctx, selectEvent+` WHERE id = $1`, id))
			if err != nil {
				return response{}, fmt.Errorf("load idempotent event %s: %w", id, err)
			}
			return response{event: ev, replayed: true}, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return response{}, fmt.Errorf("look up idempotency key: %w", err)
		}
	}
	in := req.Input
	var reply agentbridge.ReplyTarget
	if in.Meta.ReplyTo != "" {
		if e, ok := b.ids[in.Meta.ReplyTo]; ok && e.thread == req.Thread {
			reply = agentbridge.ReplyTarget{Found: true, Hop: e.hop}
		} else {
			err := tx.QueryRow(ctx, `SELECT hop FROM events WHERE id = $1 AND thread = $2`, in.Meta.ReplyTo, req.Thread).Scan(&reply.Hop)
			switch {
			case err == nil:
				reply.Found = true
			case !errors.Is(err, pgx.ErrNoRows):
				return response{}, fmt.Errorf("look up reply_to: %w", err)
			}
		}
	}
	if err := agentbridge.Admit(req.Thread, h.state, in, reply, s.humans); err != nil {
		return response{err: err}, nil
	}
	if in.Type == agentbridge.TypeMessage {
		hop := agentbridge.AssignHop(h.state, in, reply, s.humans, h.messages)
		in.Meta.Hop = &hop
		var err error
		if meta, err = storecore.StoredMeta(&in.Meta); err != nil {
			return response{}, err
		}
		h.messages = true
	}
	ev := agentbridge.Event{
		Seq: h.lastSeq + 1, Thread: req.Thread,
		Type: in.Type, From: in.From, To: in.To, Content: in.Content, Meta: in.Meta,
	}
	i, err := s.add(b, &ev, meta, h, storecore.NextTime(h.lastTS))
	if err != nil {
		return response{}, err
	}
	if req.IdempotencyKey != "" {
		b.keys[req.Thread+"\x00"+req.IdempotencyKey] = i
	}
	return response{pending: i + 1}, nil
}

func (s *Store) createThread(ctx context.Context, tx pgx.Tx, b *batch, req agentbridge.CreateThreadRequest) (response, error) {
	id := req.ID
	if id == "" {
		u, err := ulid.New(ulid.Now(), s.entropy)
		if err != nil {
			return response{}, fmt.Errorf("new thread id: %w", err)
		}
		id = u.String()
	}
	exists := func() response {
		return response{err: &agentbridge.Error{
			Code: agentbridge.ECodeThreadExists, Field: "id", Thread: id,
			Message: fmt.Sprintf("A thread with id %q already exists; choose another id or leave it out.", id),
		}}
	}
	if _, ok := b.heads[id]; ok {
		return exists(), nil
	}
	zero, err := storecore.StateKey(agentbridge.ThreadState{})
	if err != nil {
		return response{}, err
	}
	content, err := json.Marshal(req.Name)
	if err != nil {
		return response{}, fmt.Errorf("encode thread name: %w", err)
	}
	h := &head{name: req.Name, stateKey: zero}
	ev := agentbridge.Event{
		Seq: 1, Thread: id, Type: agentbridge.TypeThreadCreated,
		From: req.From, To: agentbridge.ToAll, Content: content,
	}
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
		return exists(), nil
	}
	b.heads[id] = h
	meta, err := storecore.StoredMeta(&ev.Meta)
	if err != nil {
		return response{}, err
	}
	i, err := s.add(b, &ev, meta, h, ts)
	if err != nil {
		return response{}, err
	}
	th := agentbridge.Thread{ID: id, Name: req.Name, CreatedAt: ev.TS, UpdatedAt: ev.TS, LastSeq: 1, EventCount: 1}
	return response{thread: th, pending: i + 1}, nil
}

// add stamps ev with ts t (after the thread's last) and an id, folds it
// into h and queues it for write; it returns ev's index in the batch.
func (s *Store) add(b *batch, ev *agentbridge.Event, meta string, h *head, t time.Time) (int, error) {
	u, err := ulid.New(ulid.Timestamp(t), s.entropy)
	if err != nil {
		return 0, fmt.Errorf("new event id: %w", err)
	}
	ev.ID = u.String()
	ev.TS = agentbridge.FormatTime(t)
	h.lastTS = t
	after := agentbridge.Fold(h.state, *ev, s.humans)
	if ev.Type == agentbridge.TypeThreadRenamed {
		h.name = ev.Text()
	}
	h.lastSeq = ev.Seq
	// Besides controls, a message ending party mode and a scene event (a
	// speech counts a turn) change the state, as in the SQLite store.
	changed := ev.Type == agentbridge.TypeControl || (h.state.Party.On && !after.Party.On) || after.Scene != h.state.Scene
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
	b.ids[ev.ID] = batchEvent{thread: ev.Thread, hop: after.LastHop}
	return len(b.events) - 1, nil
}

// write takes the log_head lock, numbers the batch's events and writes
// them with their keys, snapshots and thread heads, and NOTIFYs; the lock
// is held until COMMIT, so gseq order is commit order.
func (s *Store) write(ctx context.Context, tx pgx.Tx, b *batch) error {
	n := int64(len(b.events))
	if n == 0 {
		return nil
	}
	var last int64
	if err := tx.QueryRow(ctx, `UPDATE log_head SET gseq = gseq + $1 RETURNING gseq`, n).Scan(&last); err != nil {
		return fmt.Errorf("number events: %w", err)
	}
	rows := make([][]any, len(b.events))
	for i := range b.events {
		ev := &b.events[i]
		ev.GSeq = last - n + int64(i) + 1
		var content []byte
		if ev.Content != nil {
			content = ev.Content
		}
		rows[i] = []any{ev.GSeq, ev.ID, ev.Thread, ev.Seq, ev.TS, ev.Type, ev.From, ev.To, content, b.metas[i], b.hops[i]}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events"},
		[]string{"gseq", "id", "thread", "seq", "ts", "type", "sender", "recipient", "content", "meta", "hop"},
		pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	var pb pgx.Batch
	for k, i := range b.keys {
		thread, key, _ := strings.Cut(k, "\x00")
		pb.Queue(`INSERT INTO idempotency (thread, key, event_id) VALUES ($1, $2, $3)`, thread, []byte(key), b.events[i].ID)
	}
	for _, sn := range b.snapshots {
		pb.Queue(`INSERT INTO state_snapshots (thread, seq, state) VALUES ($1, $2, $3)`, sn[0], sn[1], sn[2])
	}
	for id, h := range b.heads {
		if !h.dirty {
			continue
		}
		pb.Queue(`UPDATE threads SET name = $1, updated_at = $2, last_seq = $3, last_hop = $4, state = $5 WHERE id = $6`,
			[]byte(h.name), agentbridge.FormatTime(h.lastTS), h.lastSeq, h.state.LastHop, h.stateKey, id)
	}
	pb.Queue(`SELECT pg_notify($1, '')`, notifyChannel)
	if err := tx.SendBatch(ctx, &pb).Close(); err != nil {
		return fmt.Errorf("write batch: %w", err)
	}
	return nil
}
