// The append path, the writer's fast path: apply dispatches one request of
// a group commit; appendEvent is an ordinary append from top to bottom
// (head from the batch or the cache, storecore.Preamble's idempotency,
// reply_to, Admit and hop with lookups answering from the prepared
// statements, stamp, insertEvent), and flush writes what a whole batch
// changed once. Everything here runs on the writer goroutine (writer.go).

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// maxCachedHeads bounds the writer's head cache; past it an arbitrary
// entry is dropped and reloaded from the database on its next append.
const maxCachedHeads = 4096

// maxHeadSenders bounds a head's senders; past it the map starts again
// empty, which costs a query per sender until each posts again.
const maxHeadSenders = 256

// head is the writer's view of a thread: everything an append reads
// before writing, and what it leaves behind for the next one.
type head struct {
	name     string
	lastTS   time.Time               // ts of the last event; the next must be later
	lastSeq  int64                   // also the thread's event count: seq is gapless from 1
	state    agentbridge.ThreadState // folded, LastHop included
	stateKey string                  // stored form of state (see stateKey)
	// messages is whether the thread holds a message: the first message
	// of a thread that has none gets hop 0 (agentbridge.AssignHop).
	messages bool
	// senders maps who posted a message through this writer since the
	// head was loaded to the seq of their latest one: when a reply's
	// sender has posted nothing after its parent, its hop needs no floor
	// (agentbridge.HopFloor) and no query. It is a hint shared by the
	// head's copies: a sender missing from it, or a seq from a batch that
	// rolled back, only sends the writer to the database.
	senders map[string]int64
	// nameDirty and stateDirty are set when the batch renamed the thread or
	// changed stateKey, so that flush writes the threads or thread_state row
	// only then: a message changes neither (but for one ending party mode,
	// see insertEvent), and readers take a thread's last seq, ts and hop
	// from its last event.
	nameDirty, stateDirty bool
}

// batch collects the heads a group commit advanced. They reach the cache
// only after COMMIT, so a failed batch leaves the cache as it was; a
// renamed thread's row and a changed thread_state are written once per
// thread, at the end (flush).
type batch struct {
	// order and heads are the touched threads in first-touched order and
	// their heads; index maps a thread id to its position. A map of heads
	// would allocate every entry (a head is too large to live in a map's
	// slots), on every commit.
	index map[string]int
	order []string
	heads []head
	// live and resps are the commit's requests and their answers. The
	// writer reuses one batch for every commit (see reset), so that a
	// commit allocates no map or slices of its own.
	live  []*request
	resps []response
}

// reset empties b for the next commit, keeping its storage but no
// reference to the last commit's requests or events.
func (b *batch) reset() {
	clear(b.index)
	clear(b.heads)
	clear(b.live)
	clear(b.resps)
	b.order, b.heads, b.live, b.resps = b.order[:0], b.heads[:0], b.live[:0], b.resps[:0]
}

func (b *batch) put(thread string, h head) {
	if i, ok := b.index[thread]; ok {
		b.heads[i] = h
		return
	}
	b.index[thread] = len(b.heads)
	b.order = append(b.order, thread)
	b.heads = append(b.heads, h)
}

// apply runs one request inside the batch. A refusal comes back in the
// response; an error means the database failed and the batch must roll back.
func (s *Store) apply(ctx context.Context, b *batch, r *request) (response, error) {
	if r.create != nil {
		return s.createThread(ctx, b, *r.create)
	}
	if r.receipt != nil {
		return s.putReceipt(ctx, b, *r.receipt)
	}
	if r.claim != nil {
		return r.claim(ctx, b)
	}
	if r.other != nil {
		resp, err := r.other(ctx, s.w.conn)
		resp.isOther = true
		return resp, err
	}
	return s.appendEvent(ctx, b, r.append, r.meta, r.control)
}

// appendEvent appends req, whose meta in stored form is meta and whose
// parsed control (nil for any other type) is ctl: storecore.AppendEvent,
// on the thread's head as this batch sees it, which the writer holds in
// w.head meanwhile (lookups reads and advances it there).
func (s *Store) appendEvent(ctx context.Context, b *batch, req agentbridge.AppendRequest, meta string, ctl *agentbridge.Control) (response, error) {
	h, found, err := s.headOf(ctx, b, req.Thread)
	if err != nil {
		return response{}, err
	}
	if !found {
		return response{err: agentbridge.ThreadNotFound(req.Thread)}, nil
	}
	if h.senders == nil {
		h.senders = map[string]int64{}
	}
	s.w.head = h
	a, ev, err := storecore.AppendEvent(ctx, lookups{s}, req, meta, ctl, h.state, h.messages, s.Humans)
	switch {
	case err != nil:
		return response{}, err
	case a.Replayed:
		ev := s.w.replayed
		s.w.replayed = agentbridge.Event{}
		return response{event: ev, replayed: true, ignored: a.Ignored}, nil
	case a.Refusal != nil:
		s.w.replayed = agentbridge.Event{}
		return response{err: a.Refusal}, nil
	}
	b.put(req.Thread, s.w.head)
	return response{event: ev, ignored: a.Ignored}, nil
}

// lookups is storecore.AppendTx on the writer's prepared statements and
// the head in w.head (one pointer, so passing it as the interface
// allocates nothing).
type lookups struct{ s *Store }

// Conn is the writer's connection.
func (l lookups) Conn() storecore.Conn { return storecore.SQLConn(l.s.w.conn) }

// CheckFence checks f against its claim.
func (l lookups) CheckFence(ctx context.Context, f agentbridge.ClaimFence) (refusal, err error) {
	return l.s.claimSQL().CheckFence(ctx, f)
}

// Add numbers, stamps and inserts ev, advancing w.head past it.
func (l lookups) Add(ctx context.Context, ev agentbridge.Event, meta string, ctl *agentbridge.Control) (agentbridge.Event, error) {
	h := &l.s.w.head
	ev.Seq = h.lastSeq + 1
	if ev.Type == agentbridge.TypeMessage {
		h.messages = true
		if len(h.senders) >= maxHeadSenders {
			clear(h.senders)
		}
		h.senders[ev.From] = ev.Seq
	}
	if err := l.s.stamp(&ev, h); err != nil {
		return ev, err
	}
	return ev, l.s.insertEvent(ctx, &ev, meta, ctl, h)
}

// RecordKey inserts thread's idempotency key for event id.
func (l lookups) RecordKey(ctx context.Context, thread, key, id string) error {
	if _, err := l.s.w.st.insertIdempotency.ExecContext(ctx, thread, key, id); err != nil {
		return fmt.Errorf("record idempotency key: %w", err)
	}
	return nil
}

// Attachment reads a stored attachment on the writer's connection.
func (l lookups) Attachment(ctx context.Context, id string) (agentbridge.Attachment, bool, error) {
	return storecore.LookupAttachment(ctx, storecore.SQLConn(l.s.w.conn), id, "")
}

// Replay loads the event stored under key, also into the writer's
// replayed, which answers the append when it is a retry.
func (l lookups) Replay(ctx context.Context, thread, key string) (agentbridge.Event, bool, error) {
	return l.replay(ctx, l.s.w.st.selectIdempotency, thread, key)
}

// ReplayLegacy is Replay among the keys of a release before scoped keys,
// when the database holds any (Store.legacyKeys).
func (l lookups) ReplayLegacy(ctx context.Context, thread, key string) (agentbridge.Event, bool, error) {
	if !l.s.legacyKeys {
		return agentbridge.Event{}, false, nil
	}
	return l.replay(ctx, l.s.w.st.selectLegacyKey, thread, key)
}

// replay loads the event the key statement q finds.
func (l lookups) replay(ctx context.Context, q *sql.Stmt, thread, key string) (agentbridge.Event, bool, error) {
	var id string
	found, err := storecore.Found(q.QueryRowContext(ctx, thread, key).Scan(&id))
	if !found {
		return agentbridge.Event{}, false, err
	}
	ev, err := storecore.ScanEvent(l.s.w.st.selectEventByID.QueryRowContext(ctx, id))
	if err != nil {
		return agentbridge.Event{}, false, fmt.Errorf("load idempotent event %s: %w", id, err)
	}
	l.s.w.replayed = ev
	return ev, true, nil
}

func (l lookups) Event(ctx context.Context, thread, id string) (agentbridge.Event, bool, error) {
	ev, err := storecore.ScanEvent(l.s.w.st.selectEventByID.QueryRowContext(ctx, id))
	found, err := storecore.Found(err)
	return ev, found && ev.Thread == thread, err
}

// FirstAnswer reads the events after target that name it, in order: the
// batch's own are in the transaction already.
func (l lookups) FirstAnswer(ctx context.Context, thread string, target agentbridge.Event, answers func(agentbridge.Event) bool) (agentbridge.Event, bool, error) {
	rows, err := l.s.w.st.selectAnswers.QueryContext(ctx, thread, target.Seq, target.ID, target.ID)
	if err != nil {
		return agentbridge.Event{}, false, err
	}
	defer rows.Close()
	return storecore.FirstEvent(rows, answers)
}

func (l lookups) ReplyTarget(ctx context.Context, thread, id string) (agentbridge.ReplyTarget, error) {
	var t agentbridge.ReplyTarget
	var err error
	t.Found, err = storecore.Found(l.s.w.st.selectReplyTo.QueryRowContext(ctx, id, thread).Scan(&t.Hop, &t.Seq))
	return t, err
}

// SenderHopAfter answers from the head's senders when the sender's latest
// message is not after seq (the ordinary reply, to the latest event), and
// from the database otherwise.
func (l lookups) SenderHopAfter(ctx context.Context, thread, sender string, seq int64) (int, bool, error) {
	if last, ok := l.s.w.head.senders[sender]; ok && last <= seq {
		return 0, false, nil
	}
	var hop sql.NullInt64
	if err := l.s.w.st.selectSenderHop.QueryRowContext(ctx, thread, seq, sender).Scan(&hop); err != nil {
		return 0, false, err
	}
	return int(hop.Int64), hop.Valid, nil
}

// headOf returns thread's head as this batch sees it: advanced earlier in
// the batch, cached from an earlier commit, or read from the database
// (found is false when there is no such thread).
func (s *Store) headOf(ctx context.Context, b *batch, thread string) (head, bool, error) {
	if i, ok := b.index[thread]; ok {
		return b.heads[i], true, nil
	}
	if h, ok := s.w.heads[thread]; ok {
		return h, true, nil
	}
	return s.loadHead(ctx, thread)
}

// loadHead reads thread's head from the database (found is false when there
// is no such thread). It is apart from headOf because scanning into h moves
// h to the heap, which headOf's cache hits should not pay for.
func (s *Store) loadHead(ctx context.Context, thread string) (h head, found bool, err error) {
	var lastHop int
	var lastTS string
	err = s.w.st.selectHead.QueryRowContext(ctx, thread).
		Scan(&h.name, &lastTS, &h.lastSeq, &h.stateKey, &lastHop, &h.messages)
	if errors.Is(err, sql.ErrNoRows) {
		return head{}, false, nil
	}
	if err != nil {
		return head{}, false, fmt.Errorf("load thread %s: %w", thread, err)
	}
	if err := json.Unmarshal([]byte(h.stateKey), &h.state); err != nil {
		return head{}, false, fmt.Errorf("decode state of thread %s: %w", thread, err)
	}
	h.state.LastHop = lastHop
	if t, err := agentbridge.ParseTime(lastTS); err == nil {
		h.lastTS = t
	}
	return h, true, nil
}

// stamp gives ev its ts (strictly after the thread's last) and id, and
// moves h's clock to it.
func (s *Store) stamp(ev *agentbridge.Event, h *head) error {
	t := storecore.NextTime(h.lastTS)
	u, err := ulid.New(ulid.Timestamp(t), s.w.entropy)
	if err != nil {
		return fmt.Errorf("new event id: %w", err)
	}
	ev.ID = u.String()
	ev.TS = agentbridge.FormatTime(t)
	h.lastTS = t
	return nil
}

// insertEvent stores the stamped ev, with meta its Meta in stored form
// (storecore.StoredMeta) and ctl its parsed control (nil for any other
// type), and advances h past it: seq, name, folded state,
// and a state snapshot when a control changed the state. ev.Seq, Thread
// and the client fields must be set, and ev.Meta already passed through
// storecore.StoredMeta; on return ev is exactly what readers will get back. A
// renamed thread's row and a changed thread_state are left to flush.
func (s *Store) insertEvent(ctx context.Context, ev *agentbridge.Event, meta string, ctl *agentbridge.Control, h *head) error {
	var content any
	if ev.Content != nil {
		// Bound as text without a copy: the driver hands it to
		// sqlite3_bind_text64 with SQLITE_TRANSIENT, which copies it during
		// the call, and nothing writes to ev.Content meanwhile.
		content = unsafe.String(unsafe.SliceData(ev.Content), len(ev.Content))
	}
	after := agentbridge.FoldParsed(h.state, *ev, ctl, s.Humans)
	res, err := s.w.st.insertEvent.ExecContext(ctx,
		ev.ID, ev.Thread, ev.Seq, ev.TS, ev.Type, ev.From, ev.To, content, meta, after.LastHop)
	if err != nil {
		return fmt.Errorf("insert event: %w", err)
	}
	if ev.GSeq, err = res.LastInsertId(); err != nil {
		return fmt.Errorf("read gseq: %w", err)
	}
	if err := index(ctx, s.w.st.insertFTS, *ev); err != nil {
		return err
	}
	if ev.Type == agentbridge.TypeThreadRenamed {
		h.name, h.nameDirty = ev.Text(), true
	}
	h.lastSeq = ev.Seq
	due := agentbridge.SnapshotDue(h.state, after, *ev)
	h.state = after
	if !due {
		return nil
	}
	key, err := storecore.StateKey(after)
	if err != nil {
		return err
	}
	if key == h.stateKey {
		return nil
	}
	if _, err := s.w.st.insertSnapshot.ExecContext(ctx, ev.Thread, ev.Seq, key); err != nil {
		return fmt.Errorf("insert state snapshot: %w", err)
	}
	h.stateKey, h.stateDirty = key, true
	return nil
}

// flush writes the threads row of each thread the batch renamed and the
// thread_state row of each whose state a control changed: once per thread
// rather than once per event, and not at all for a batch of messages.
func (s *Store) flush(ctx context.Context, b *batch) error {
	for i, id := range b.order {
		h := &b.heads[i]
		if h.nameDirty {
			if _, err := s.w.st.updateThread.ExecContext(ctx, h.name, id); err != nil {
				return fmt.Errorf("rename thread %s: %w", id, err)
			}
		}
		if !h.stateDirty {
			continue
		}
		if _, err := s.w.st.updateState.ExecContext(ctx, h.lastSeq, h.state.LastHop, h.stateKey, id); err != nil {
			return fmt.Errorf("update state of thread %s: %w", id, err)
		}
	}
	return nil
}

// remember puts a committed head in the cache, dropping another entry when
// the cache is full.
func (s *Store) remember(thread string, h head) {
	h.nameDirty, h.stateDirty = false, false
	if _, ok := s.w.heads[thread]; !ok && len(s.w.heads) >= maxCachedHeads {
		for id := range s.w.heads {
			delete(s.w.heads, id)
			break
		}
	}
	s.w.heads[thread] = h
}

func (s *Store) createThread(ctx context.Context, b *batch, req agentbridge.CreateThreadRequest) (response, error) {
	id, err := storecore.ThreadID(req, s.w.entropy)
	if err != nil {
		return response{}, err
	}
	if _, found, err := s.headOf(ctx, b, id); err != nil || found {
		if found {
			return response{err: storecore.ThreadExists(id)}, nil
		}
		return response{}, err
	}
	ev, zero, err := storecore.CreatedEvent(id, req)
	if err != nil {
		return response{}, err
	}
	h := head{name: req.Name, stateKey: zero}
	if err := s.stamp(&ev, &h); err != nil {
		return response{}, err
	}
	if _, err := s.w.st.insertThread.ExecContext(ctx, id, req.Name, ev.TS); err != nil {
		return response{}, fmt.Errorf("insert thread %s: %w", id, err)
	}
	if _, err := s.w.st.insertState.ExecContext(ctx, id, zero); err != nil {
		return response{}, fmt.Errorf("insert state of thread %s: %w", id, err)
	}
	meta, err := storecore.StoredMeta(&ev.Meta)
	if err != nil {
		return response{}, err
	}
	if err := s.insertEvent(ctx, &ev, meta, nil, &h); err != nil {
		return response{}, err
	}
	b.put(id, h)
	th := agentbridge.Thread{ID: id, Name: req.Name, CreatedAt: ev.TS, UpdatedAt: ev.TS, LastSeq: 1, EventCount: 1}
	return response{thread: th, event: ev}, nil
}
