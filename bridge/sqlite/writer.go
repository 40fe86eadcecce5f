package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// maxIdempotencyKeyLen bounds Idempotency-Key values, in bytes.
const maxIdempotencyKeyLen = 256

// request is one write handed to the writer goroutine. Exactly one of
// append and create is set; reply is buffered so the writer never blocks.
type request struct {
	ctx    context.Context
	append *agentbridge.AppendRequest
	create *agentbridge.CreateThreadRequest
	reply  chan response
}

type response struct {
	event    agentbridge.Event
	thread   agentbridge.Thread
	replayed bool
	err      error
}

// Append validates req, hands it to the writer and waits for the commit.
// A request whose ctx is done before the writer takes it is dropped and
// returns ctx's error; once the writer has taken it, it is committed (or
// refused) whatever happens to ctx, and Append waits for that answer.
func (s *Store) Append(ctx context.Context, req agentbridge.AppendRequest) (agentbridge.AppendResult, error) {
	if err := req.Input.Validate(); err != nil {
		return agentbridge.AppendResult{}, err
	}
	if !agentbridge.ThreadIDPattern.MatchString(req.Thread) {
		return agentbridge.AppendResult{}, threadNotFound(req.Thread)
	}
	if len(req.IdempotencyKey) > maxIdempotencyKeyLen {
		return agentbridge.AppendResult{}, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "idempotency_key",
			"An idempotency key must be at most %d bytes.", maxIdempotencyKeyLen)
	}
	resp := s.submit(ctx, &request{ctx: ctx, append: &req})
	if resp.err != nil {
		return agentbridge.AppendResult{}, resp.err
	}
	return agentbridge.AppendResult{Event: resp.event, Replayed: resp.replayed}, nil
}

// CreateThread validates req, then creates the thread and its
// thread.created event through the writer, with Append's ctx rules.
func (s *Store) CreateThread(ctx context.Context, req agentbridge.CreateThreadRequest) (agentbridge.Thread, agentbridge.Event, error) {
	if req.ID != "" && !agentbridge.ThreadIDPattern.MatchString(req.ID) {
		return agentbridge.Thread{}, agentbridge.Event{}, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "id",
			"The thread id %q is not valid: use 1 to 64 letters, digits or . _ -, starting with a letter or digit.", clip(req.ID))
	}
	if req.Name == "" {
		req.Name = "untitled"
	}
	if err := agentbridge.ValidateThreadName(req.Name); err != nil {
		return agentbridge.Thread{}, agentbridge.Event{}, err
	}
	if req.From == "" {
		req.From = "user"
	}
	if !agentbridge.ParticipantIDPattern.MatchString(req.From) {
		return agentbridge.Thread{}, agentbridge.Event{}, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "from",
			"The sender id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", clip(req.From))
	}
	resp := s.submit(ctx, &request{ctx: ctx, create: &req})
	return resp.thread, resp.event, resp.err
}

// submit queues r and waits for the writer's answer.
func (s *Store) submit(ctx context.Context, r *request) response {
	r.reply = make(chan response, 1)
	if err := ctx.Err(); err != nil {
		return response{err: fmt.Errorf("write not queued: %w", err)}
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
		// The writer replies before it stops, so an answer is either
		// already buffered or will never come.
		select {
		case resp := <-r.reply:
			return resp
		default:
			return response{err: ErrClosed}
		}
	}
}

// run is the writer goroutine: it blocks for one request, drains whatever
// else is queued (up to the batch cap) and commits them together. After
// Close it commits what is still queued, then exits.
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

// take appends queued requests to batch without blocking, up to the cap.
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

// commit runs one group commit: BEGIN IMMEDIATE, one savepoint per request,
// COMMIT; then it answers every caller and wakes readers. Requests whose
// ctx is already done are dropped without touching the database.
func (s *Store) commit(batch []*request) {
	live := make([]*request, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.reply <- response{err: fmt.Errorf("write dropped before commit: %w", err)}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// The transaction belongs to the whole batch, not to any one caller, so
	// no caller's cancellation may abort it.
	ctx := context.Background()
	resps := make([]response, len(live))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for i, r := range live {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT req"); err != nil {
				return fmt.Errorf("savepoint: %w", err)
			}
			resp, err := s.apply(ctx, tx, r)
			if err != nil {
				if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO req"); rerr != nil {
					return fmt.Errorf("rollback to savepoint: %w", rerr)
				}
				resp = response{err: err}
			}
			if _, err := tx.ExecContext(ctx, "RELEASE req"); err != nil {
				return fmt.Errorf("release savepoint: %w", err)
			}
			resps[i] = resp
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("group commit: %w", err)
		for _, r := range live {
			r.reply <- response{err: err}
		}
		return
	}
	var committed, replayed, rejected uint64
	for _, resp := range resps {
		switch {
		case resp.err != nil:
			rejected++
		case resp.replayed:
			replayed++
		default:
			committed++
		}
	}
	s.appends.Add(committed)
	s.replayed.Add(replayed)
	s.rejected.Add(rejected)
	s.batches.Add(1)
	if n := uint64(len(live)); n > s.maxBatch.Load() {
		s.maxBatch.Store(n) // only the writer goroutine stores
	}
	if committed > 0 {
		s.wake()
	}
	for i, r := range live {
		r.reply <- resps[i]
	}
}

// inTx runs fn in a write transaction (BEGIN IMMEDIATE, from the DSN).
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (s *Store) apply(ctx context.Context, tx *sql.Tx, r *request) (response, error) {
	if r.create != nil {
		th, ev, err := s.createThread(ctx, tx, *r.create)
		return response{thread: th, event: ev}, err
	}
	ev, replayed, err := s.appendEvent(ctx, tx, *r.append)
	return response{event: ev, replayed: replayed}, err
}

// head is what the writer reads of a thread before appending to it.
type head struct {
	name      string
	updatedAt string
	lastSeq   int64
	stateJSON string
	state     agentbridge.ThreadState
}

func (s *Store) loadHead(ctx context.Context, tx *sql.Tx, thread string) (head, error) {
	var h head
	var lastHop int
	err := tx.QueryRowContext(ctx, `SELECT t.name, t.updated_at, t.last_seq, s.state, s.last_hop
		FROM threads t JOIN thread_state s ON s.thread = t.id WHERE t.id = ?`, thread).
		Scan(&h.name, &h.updatedAt, &h.lastSeq, &h.stateJSON, &lastHop)
	if errors.Is(err, sql.ErrNoRows) {
		return head{}, threadNotFound(thread)
	}
	if err != nil {
		return head{}, fmt.Errorf("load thread %s: %w", thread, err)
	}
	if err := json.Unmarshal([]byte(h.stateJSON), &h.state); err != nil {
		return head{}, fmt.Errorf("decode state of thread %s: %w", thread, err)
	}
	h.state.LastHop = lastHop
	return h, nil
}

func (s *Store) appendEvent(ctx context.Context, tx *sql.Tx, req agentbridge.AppendRequest) (agentbridge.Event, bool, error) {
	h, err := s.loadHead(ctx, tx, req.Thread)
	if err != nil {
		return agentbridge.Event{}, false, err
	}
	if req.IdempotencyKey != "" {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT event_id FROM idempotency WHERE thread = ? AND key = ?`,
			req.Thread, req.IdempotencyKey).Scan(&id)
		switch {
		case err == nil:
			ev, err := scanEvent(tx.QueryRowContext(ctx, selectEvent+` WHERE id = ?`, id))
			if err != nil {
				return agentbridge.Event{}, false, fmt.Errorf("load idempotent event %s: %w", id, err)
			}
			return ev, true, nil
		case !errors.Is(err, sql.ErrNoRows):
			return agentbridge.Event{}, false, fmt.Errorf("look up idempotency key: %w", err)
		}
	}
	in := req.Input
	if in.Meta.ReplyTo != "" {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM events WHERE id = ? AND thread = ?`, in.Meta.ReplyTo, req.Thread).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return agentbridge.Event{}, false, &agentbridge.Error{
				Code: agentbridge.ECodeUnknownReplyTo, Field: "meta.reply_to", Thread: req.Thread,
				Message: fmt.Sprintf("meta.reply_to names %q, which is not an event of thread %q.", clip(in.Meta.ReplyTo), req.Thread),
			}
		}
		if err != nil {
			return agentbridge.Event{}, false, fmt.Errorf("look up reply_to: %w", err)
		}
	}
	if in.Type == agentbridge.TypeMessage {
		if h.state.IsHardMuted(in.From) {
			return agentbridge.Event{}, false, &agentbridge.Error{
				Code: agentbridge.ECodeParticipantMuted, Thread: req.Thread, Participant: in.From,
				Message: fmt.Sprintf("%s is muted in thread %q; a human can unmute them with an unmute control.", in.From, req.Thread),
			}
		}
		if h.state.Paused && !s.humans.Has(in.From) {
			return agentbridge.Event{}, false, &agentbridge.Error{
				Code: agentbridge.ECodeThreadPaused, Thread: req.Thread, Participant: in.From,
				Message: fmt.Sprintf("Thread %q is paused, so only humans may post messages; a human can resume it with {\"pause\":{\"on\":false}}.", req.Thread),
			}
		}
	}
	ev := agentbridge.Event{
		Seq: h.lastSeq + 1, Thread: req.Thread,
		Type: in.Type, From: in.From, To: in.To, Content: in.Content, Meta: in.Meta,
	}
	if err := s.insertEvent(ctx, tx, &ev, h); err != nil {
		return agentbridge.Event{}, false, err
	}
	if req.IdempotencyKey != "" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO idempotency (thread, key, event_id) VALUES (?, ?, ?)`,
			req.Thread, req.IdempotencyKey, ev.ID); err != nil {
			return agentbridge.Event{}, false, fmt.Errorf("record idempotency key: %w", err)
		}
	}
	return ev, false, nil
}

func (s *Store) createThread(ctx context.Context, tx *sql.Tx, req agentbridge.CreateThreadRequest) (agentbridge.Thread, agentbridge.Event, error) {
	id := req.ID
	if id == "" {
		u, err := ulid.New(ulid.Now(), s.entropy)
		if err != nil {
			return agentbridge.Thread{}, agentbridge.Event{}, fmt.Errorf("new thread id: %w", err)
		}
		id = u.String()
	}
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE id = ?`, id).Scan(&one)
	if err == nil {
		return agentbridge.Thread{}, agentbridge.Event{}, &agentbridge.Error{
			Code: agentbridge.ECodeThreadExists, Field: "id", Thread: id,
			Message: fmt.Sprintf("A thread with id %q already exists; choose another id or leave it out.", id),
		}
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return agentbridge.Thread{}, agentbridge.Event{}, fmt.Errorf("look up thread %s: %w", id, err)
	}
	zero, err := stateKey(agentbridge.ThreadState{})
	if err != nil {
		return agentbridge.Thread{}, agentbridge.Event{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO threads (id, name, created_at, updated_at, last_seq, event_count)
		VALUES (?, ?, '', '', 0, 0)`, id, req.Name); err != nil {
		return agentbridge.Thread{}, agentbridge.Event{}, fmt.Errorf("insert thread %s: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO thread_state (thread, seq, last_hop, state) VALUES (?, 0, 0, ?)`,
		id, zero); err != nil {
		return agentbridge.Thread{}, agentbridge.Event{}, fmt.Errorf("insert state of thread %s: %w", id, err)
	}
	content, err := json.Marshal(req.Name)
	if err != nil {
		return agentbridge.Thread{}, agentbridge.Event{}, fmt.Errorf("encode thread name: %w", err)
	}
	ev := agentbridge.Event{
		Seq: 1, Thread: id, Type: agentbridge.TypeThreadCreated,
		From: req.From, To: agentbridge.ToAll, Content: content,
	}
	if err := s.insertEvent(ctx, tx, &ev, head{name: req.Name, stateJSON: zero}); err != nil {
		return agentbridge.Thread{}, agentbridge.Event{}, err
	}
	th := agentbridge.Thread{ID: id, Name: req.Name, CreatedAt: ev.TS, UpdatedAt: ev.TS, LastSeq: 1, EventCount: 1}
	if _, err := tx.ExecContext(ctx, `UPDATE threads SET created_at = ? WHERE id = ?`, ev.TS, id); err != nil {
		return agentbridge.Thread{}, agentbridge.Event{}, fmt.Errorf("set created_at of thread %s: %w", id, err)
	}
	return th, ev, nil
}

// insertEvent assigns ev its id and ts, stores it, and advances the
// thread's row, its derived state and (when a control changed the state) a
// state snapshot. ev.Seq, Thread and the client fields must be set; on
// return ev is exactly what readers will get back (GSeq set, Meta in its
// stored form).
func (s *Store) insertEvent(ctx context.Context, tx *sql.Tx, ev *agentbridge.Event, h head) error {
	t := nextTime(h.updatedAt)
	ev.TS = agentbridge.FormatTime(t)
	u, err := ulid.New(ulid.Timestamp(t), s.entropy)
	if err != nil {
		return fmt.Errorf("new event id: %w", err)
	}
	ev.ID = u.String()
	meta, err := ev.Meta.MarshalJSON()
	if err != nil {
		return fmt.Errorf("encode meta: %w", err)
	}
	ev.Meta = agentbridge.Meta{}
	if err := json.Unmarshal(meta, &ev.Meta); err != nil {
		return fmt.Errorf("decode meta: %w", err)
	}
	var content any
	if ev.Content != nil {
		content = string(ev.Content)
	}
	after := agentbridge.Fold(h.state, *ev, s.humans)
	res, err := tx.ExecContext(ctx, `INSERT INTO events (id, thread, seq, ts, type, sender, recipient, content, meta, hop)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ev.ID, ev.Thread, ev.Seq, ev.TS, ev.Type, ev.From, ev.To, content, string(meta), after.LastHop)
	if err != nil {
		return fmt.Errorf("insert event: %w", err)
	}
	if ev.GSeq, err = res.LastInsertId(); err != nil {
		return fmt.Errorf("read gseq: %w", err)
	}
	name := h.name
	if ev.Type == agentbridge.TypeThreadRenamed {
		name = ev.Text()
	}
	if _, err := tx.ExecContext(ctx, `UPDATE threads SET name = ?, updated_at = ?, last_seq = ?, event_count = event_count + 1
		WHERE id = ?`, name, ev.TS, ev.Seq, ev.Thread); err != nil {
		return fmt.Errorf("update thread: %w", err)
	}
	key := h.stateJSON
	if ev.Type == agentbridge.TypeControl {
		if key, err = stateKey(after); err != nil {
			return err
		}
	}
	if key == h.stateJSON {
		_, err = tx.ExecContext(ctx, `UPDATE thread_state SET seq = ?, last_hop = ? WHERE thread = ?`,
			ev.Seq, after.LastHop, ev.Thread)
		if err != nil {
			return fmt.Errorf("update thread state: %w", err)
		}
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE thread_state SET seq = ?, last_hop = ?, state = ? WHERE thread = ?`,
		ev.Seq, after.LastHop, key, ev.Thread); err != nil {
		return fmt.Errorf("update thread state: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO state_snapshots (thread, seq, state) VALUES (?, ?, ?)`,
		ev.Thread, ev.Seq, key); err != nil {
		return fmt.Errorf("insert state snapshot: %w", err)
	}
	return nil
}

// stateKey is the stored form of a state: its JSON without LastHop, which
// changes with every message and is kept per event instead.
func stateKey(st agentbridge.ThreadState) (string, error) {
	st.LastHop = 0
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("encode thread state: %w", err)
	}
	return string(b), nil
}

// nextTime returns now, truncated to the microsecond, or 1µs after last
// (a TimeLayout string) when the clock has not moved past it: a thread's ts
// must strictly increase, because v0 clients page with since=<ts>.
func nextTime(last string) time.Time {
	now := time.Now().UTC().Truncate(time.Microsecond)
	if last == "" {
		return now
	}
	lt, err := time.Parse(agentbridge.TimeLayout, last)
	if err != nil || now.After(lt) {
		return now
	}
	return lt.Add(time.Microsecond)
}

func threadNotFound(id string) *agentbridge.Error {
	return &agentbridge.Error{
		Code: agentbridge.ECodeThreadNotFound, Thread: id,
		Message: fmt.Sprintf("There is no thread %q.", clip(id)),
	}
}

// clip shortens user input quoted back in an error message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:61], "") + "…"
}
