package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// maxIdempotencyKeyLen bounds Idempotency-Key values, in bytes.
const maxIdempotencyKeyLen = 256

// maxCachedHeads bounds the writer's head cache; past it an arbitrary
// entry is dropped and reloaded from the database on its next append.
const maxCachedHeads = 4096

// request is one write handed to the writer goroutine: a thread creation
// when create is set, else append. reply is buffered so the writer never
// blocks. Requests are pooled (see Store.reqPool) with their reply channel:
// a new one for every append was ~600 bytes of garbage.
type request struct {
	ctx    context.Context
	append agentbridge.AppendRequest
	// meta is append's Input.Meta in its stored form, encoded by the
	// caller: the writer is the one serial step of every append, so what
	// can be done before it is done there.
	meta   string
	create *agentbridge.CreateThreadRequest
	// receipt, when set, makes this a receipt write (see putReceipt).
	receipt *agentbridge.ReceiptInput
	// suggest, when set, makes the request a suggestion (see Suggest).
	suggest *agentbridge.SuggestionInput
	reply   chan response
}

type response struct {
	event      agentbridge.Event
	thread     agentbridge.Thread
	suggestion agentbridge.Suggestion
	replayed   bool
	err        error
	// rcpt is a receipt write's answer; isReceipt keeps it out of the
	// append counters, changed says whether it wrote anything.
	rcpt               agentbridge.Receipt
	isReceipt, changed bool
}

// The writer's statements, prepared once on its connection.
const (
	wSelectHead = `SELECT t.name, e.ts, e.seq, s.state, e.hop,
			EXISTS (SELECT 1 FROM events WHERE thread = t.id AND type = 'message')
		FROM threads t JOIN thread_state s ON s.thread = t.id
		JOIN events e ON e.thread = t.id
			AND e.seq = (SELECT max(seq) FROM events WHERE thread = t.id)
		WHERE t.id = ?`
	wSelectIdempotency = `SELECT event_id FROM idempotency WHERE thread = ? AND key = ?`
	wSelectEventByID   = selectEvent + ` WHERE id = ?`
	wSelectReplyTo     = `SELECT hop FROM events WHERE id = ? AND thread = ?`
	wSelectThread      = `SELECT 1 FROM threads WHERE id = ?`
	wInsertEvent       = `INSERT INTO events (id, thread, seq, ts, type, sender, recipient, content, meta, hop)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	wInsertIdempotency = `INSERT INTO idempotency (thread, key, event_id) VALUES (?, ?, ?)`
	wInsertSnapshot    = `INSERT INTO state_snapshots (thread, seq, state) VALUES (?, ?, ?)`
	wInsertThread      = `INSERT INTO threads (id, name, created_at) VALUES (?, ?, ?)`
	wInsertState       = `INSERT INTO thread_state (thread, seq, last_hop, state) VALUES (?, 0, 0, ?)`
	wUpdateThread      = `UPDATE threads SET name = ? WHERE id = ?`
	wUpdateState       = `UPDATE thread_state SET seq = ?, last_hop = ?, state = ? WHERE thread = ?`
)

// writerStmts are the writer's statements, prepared once on the connection
// it holds, so that its hot path neither parses SQL nor looks it up in the
// driver's per-connection cache.
type writerStmts struct {
	selectHead, selectIdempotency, selectEventByID, selectReplyTo, selectThread *sql.Stmt
	insertEvent, insertIdempotency, insertSnapshot, insertThread, insertState   *sql.Stmt
	updateThread, updateState                                                   *sql.Stmt
}

// prepareWriter prepares every writer statement on conn. On error the
// statements prepared so far are closed.
func prepareWriter(ctx context.Context, conn *sql.Conn) (writerStmts, error) {
	var st writerStmts
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&st.selectHead, wSelectHead}, {&st.selectIdempotency, wSelectIdempotency},
		{&st.selectEventByID, wSelectEventByID}, {&st.selectReplyTo, wSelectReplyTo},
		{&st.selectThread, wSelectThread}, {&st.insertEvent, wInsertEvent},
		{&st.insertIdempotency, wInsertIdempotency}, {&st.insertSnapshot, wInsertSnapshot},
		{&st.insertThread, wInsertThread}, {&st.insertState, wInsertState},
		{&st.updateThread, wUpdateThread}, {&st.updateState, wUpdateState},
	} {
		stmt, err := conn.PrepareContext(ctx, p.query)
		if err != nil {
			_ = st.close()
			return writerStmts{}, fmt.Errorf("prepare writer statement: %w", err)
		}
		*p.dst = stmt
	}
	return st, nil
}

// close closes every prepared statement (nil ones are skipped).
func (st writerStmts) close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{
		st.selectHead, st.selectIdempotency, st.selectEventByID, st.selectReplyTo, st.selectThread,
		st.insertEvent, st.insertIdempotency, st.insertSnapshot, st.insertThread, st.insertState,
		st.updateThread, st.updateState,
	} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
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
	r := s.newRequest(ctx)
	r.append, r.meta = req, meta
	resp := s.submit(ctx, r)
	if resp.err != nil {
		return agentbridge.AppendResult{}, resp.err
	}
	return agentbridge.AppendResult{Event: resp.event, Replayed: resp.replayed}, nil
}

// CreateThread validates req, then creates the thread and its
// thread.created event through the writer, with Append's ctx rules.
func (s *Store) CreateThread(ctx context.Context, req agentbridge.CreateThreadRequest) (agentbridge.Thread, agentbridge.Event, error) {
	req, err := req.WithDefaults()
	if err != nil {
		return agentbridge.Thread{}, agentbridge.Event{}, err
	}
	r := s.newRequest(ctx)
	r.create = &req
	resp := s.submit(ctx, r)
	return resp.thread, resp.event, resp.err
}

// newRequest returns an empty request for ctx, from the pool.
func (s *Store) newRequest(ctx context.Context) *request {
	r := s.reqPool.Get().(*request)
	r.ctx = ctx
	return r
}

// submit queues r and waits for the writer's answer. r goes back to the
// pool once its answer is in: the writer no longer holds it then.
func (s *Store) submit(ctx context.Context, r *request) response {
	if err := ctx.Err(); err != nil {
		return response{err: fmt.Errorf("write not queued: %w", err)}
	}
	select {
	case <-s.done:
		return response{err: ErrClosed}
	default:
	}
	// Try the queue without waiting first: it almost always has room, and
	// only waiting needs ctx.Done, whose channel a request's context
	// allocates on first use.
	select {
	case s.reqs <- r:
	default:
		select {
		case s.reqs <- r:
		case <-s.done:
			return response{err: ErrClosed}
		case <-ctx.Done():
			return response{err: fmt.Errorf("write not queued: %w", ctx.Err())}
		}
	}
	s.queued()
	select {
	case resp := <-r.reply:
		*r = request{reply: r.reply}
		s.reqPool.Put(r)
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
			// Let the goroutines that are about to submit run first: on a
			// busy machine this turns many one-append commits into fewer
			// larger ones, and BEGIN/COMMIT cost as much as the appends.
			runtime.Gosched()
			s.commit(s.gather(s.take([]*request{first})))
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

// gather waits, up to groupWait, until batch holds as many requests as the
// last commit carried. Concurrent clients come back soon after their
// answer, so the last commit's size is the concurrency to expect; waiting
// for it instead of committing whatever is queued halved the commits at 32
// clients, and a commit (BEGIN, the WAL frames, COMMIT) costs as much as
// several appends. A lone client's commits carry one request, so it never
// waits; after a burst, one commit waits at most groupWait.
//
// It sleeps until enough requests are queued (see queued) rather than
// waking for each one: receiving them one by one woke the writer ~7 times
// per commit, each a round through the scheduler.
func (s *Store) gather(batch []*request) []*request {
	want := min(s.lastBatch, s.max)
	if len(batch) >= want {
		return batch
	}
	select {
	case <-s.gatherFull: // a stale signal from the last gather
	default:
	}
	if s.gatherT == nil {
		s.gatherT = time.NewTimer(s.gatherWait)
	} else {
		s.gatherT.Reset(s.gatherWait)
	}
	defer s.gatherT.Stop()
	for {
		batch = s.take(batch)
		need := want - len(batch)
		if need <= 0 {
			return batch
		}
		// Publish need, then look again: a request queued between take and
		// the publication found need unset and sent no signal.
		s.gatherNeed.Store(int64(need))
		if len(s.reqs) < need {
			select {
			case <-s.gatherFull:
			case <-s.gatherT.C:
				s.gatherNeed.Store(0)
				return s.take(batch)
			case <-s.done:
				s.gatherNeed.Store(0)
				return s.take(batch)
			}
		}
		s.gatherNeed.Store(0)
	}
}

// queued is called by a submitter after queueing its request: when the
// writer is gathering and the queue now holds as many requests as it waits
// for, it wakes the writer.
func (s *Store) queued() {
	if need := s.gatherNeed.Load(); need > 0 && int64(len(s.reqs)) >= need {
		select {
		case s.gatherFull <- struct{}{}:
		default: // already signalled
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

// commit runs one group commit: BEGIN IMMEDIATE, every request (and those
// queued meanwhile, taken before the last one runs), flush, COMMIT; then
// it answers every caller and wakes readers. Requests whose ctx is already
// done are dropped without touching the database.
//
// A request is refused (unknown thread or reply_to, muted, paused, thread
// exists) by checks that run before it writes anything, so a refusal needs
// no savepoint and never disturbs its neighbours. An error while writing is
// the database failing, not the request: the whole batch rolls back and
// every caller gets the error, as when COMMIT fails.
func (s *Store) commit(reqs []*request) {
	b := &s.scratch // empty: every commit resets it when it is done
	defer b.reset()
	live := b.live
	defer func() { s.lastBatch = len(live) }()
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
	// The transaction belongs to the whole batch, not to any one caller, so
	// no caller's cancellation may abort it.
	ctx := context.Background()
	resps := append(b.resps, make([]response, len(live))...)
	err := s.inTx(ctx, func(*sql.Conn) error {
		for i := 0; i < len(live); i++ {
			if i == len(live)-1 {
				// Whoever submitted while BEGIN and the first requests
				// ran joins this commit instead of waiting for the next.
				live = s.takeLive(live)
				resps = append(resps, make([]response, len(live)-len(resps))...)
			}
			resp, err := s.apply(ctx, b, live[i])
			if err != nil {
				return err
			}
			resps[i] = resp
		}
		return s.flush(ctx, b)
	})
	if err != nil {
		// Nothing of the batch is stored; the cache never saw it, but drop
		// it all anyway so that a database in an unknown state is reread.
		clear(s.heads)
		b.live, b.resps = live, resps // for reset
		err = fmt.Errorf("group commit: %w", err)
		s.log.Error("group commit failed", "requests", len(live), "err", err)
		for _, r := range live {
			r.reply <- response{err: err}
		}
		return
	}
	b.live, b.resps = live, resps // for reset
	for i, id := range b.order {
		s.remember(id, b.heads[i])
	}
	if s.sinceCheckpoint++; s.sinceCheckpoint >= checkpointEvery {
		s.sinceCheckpoint = 0
		select {
		case s.checkpoint <- struct{}{}:
		default: // one is already pending
		}
	}
	var committed, replayed, rejected uint64
	for _, resp := range resps {
		switch {
		case resp.isReceipt, resp.suggestion.ID != "":
			// Not appends: they count nowhere and wake no reader.
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

// takeLive appends queued requests to live without blocking, up to the
// batch cap, answering those whose ctx is already done instead.
func (s *Store) takeLive(live []*request) []*request {
	for len(live) < s.max {
		select {
		case r := <-s.reqs:
			if err := r.ctx.Err(); err != nil {
				r.reply <- response{err: fmt.Errorf("write dropped before commit: %w", err)}
				continue
			}
			live = append(live, r)
		default:
			return live
		}
	}
	return live
}

// remember puts a committed head in the cache, dropping another entry when
// the cache is full.
func (s *Store) remember(thread string, h head) {
	h.nameDirty, h.stateDirty = false, false
	if _, ok := s.heads[thread]; !ok && len(s.heads) >= maxCachedHeads {
		for id := range s.heads {
			delete(s.heads, id)
			break
		}
	}
	s.heads[thread] = h
}

// inTx runs fn in a write transaction on the writer's connection. BEGIN
// IMMEDIATE takes the write lock up front (waiting up to the busy timeout
// for another process), so no statement inside fails on a lock upgrade.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Conn) error) error {
	if _, err := s.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(s.conn); err != nil {
		if _, rerr := s.conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
			return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return err
	}
	if _, err := s.conn.ExecContext(ctx, "COMMIT"); err != nil {
		// A failed COMMIT may leave the transaction open (SQLITE_BUSY);
		// end it so the next batch can begin. If SQLite already rolled it
		// back, this ROLLBACK fails harmlessly.
		_, _ = s.conn.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("commit: %w", err)
	}
	return nil
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
	if r.suggest != nil {
		return s.insertSuggestion(ctx, *r.suggest)
	}
	return s.appendEvent(ctx, b, r.append, r.meta)
}

// headOf returns thread's head as this batch sees it: advanced earlier in
// the batch, cached from an earlier commit, or read from the database
// (found is false when there is no such thread).
func (s *Store) headOf(ctx context.Context, b *batch, thread string) (head, bool, error) {
	if i, ok := b.index[thread]; ok {
		return b.heads[i], true, nil
	}
	if h, ok := s.heads[thread]; ok {
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
	err = s.st.selectHead.QueryRowContext(ctx, thread).
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
	if t, err := time.Parse(agentbridge.TimeLayout, lastTS); err == nil {
		h.lastTS = t
	}
	return h, true, nil
}

// appendEvent appends req, whose meta in stored form is meta.
func (s *Store) appendEvent(ctx context.Context, b *batch, req agentbridge.AppendRequest, meta string) (response, error) {
	h, found, err := s.headOf(ctx, b, req.Thread)
	if err != nil {
		return response{}, err
	}
	if !found {
		return response{err: storecore.ThreadNotFound(req.Thread)}, nil
	}
	if req.IdempotencyKey != "" {
		var id string
		err := s.st.selectIdempotency.QueryRowContext(ctx, req.Thread, req.IdempotencyKey).Scan(&id)
		switch {
		case err == nil:
			ev, err := scanEvent(s.st.selectEventByID.QueryRowContext(ctx, id))
			if err != nil {
				return response{}, fmt.Errorf("load idempotent event %s: %w", id, err)
			}
			return response{event: ev, replayed: true}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return response{}, fmt.Errorf("look up idempotency key: %w", err)
		}
	}
	in := req.Input
	var reply agentbridge.ReplyTarget
	if in.Meta.ReplyTo != "" {
		err := s.st.selectReplyTo.QueryRowContext(ctx, in.Meta.ReplyTo, req.Thread).Scan(&reply.Hop)
		switch {
		case err == nil:
			reply.Found = true
		case !errors.Is(err, sql.ErrNoRows):
			return response{}, fmt.Errorf("look up reply_to: %w", err)
		}
	}
	if err := agentbridge.Admit(req.Thread, h.state, in, reply, s.humans); err != nil {
		return response{err: err}, nil
	}
	if in.Type == agentbridge.TypeMessage {
		hop := agentbridge.AssignHop(h.state, in, reply, s.humans, h.messages)
		in.Meta.Hop = &hop
		if meta, err = withHop(in.Meta, meta, hop); err != nil {
			return response{}, err
		}
		h.messages = true
	}
	ev := agentbridge.Event{
		Seq: h.lastSeq + 1, Thread: req.Thread,
		Type: in.Type, From: in.From, To: in.To, Content: in.Content, Meta: in.Meta,
	}
	if err := s.stamp(&ev, &h); err != nil {
		return response{}, err
	}
	if err := s.insertEvent(ctx, &ev, meta, &h); err != nil {
		return response{}, err
	}
	if req.IdempotencyKey != "" {
		if _, err := s.st.insertIdempotency.ExecContext(ctx, req.Thread, req.IdempotencyKey, ev.ID); err != nil {
			return response{}, fmt.Errorf("record idempotency key: %w", err)
		}
	}
	b.put(req.Thread, h)
	return response{event: ev}, nil
}

func (s *Store) createThread(ctx context.Context, b *batch, req agentbridge.CreateThreadRequest) (response, error) {
	id := req.ID
	if id == "" {
		u, err := ulid.New(ulid.Now(), s.entropy)
		if err != nil {
			return response{}, fmt.Errorf("new thread id: %w", err)
		}
		id = u.String()
	}
	_, found, err := s.headOf(ctx, b, id)
	if err != nil {
		return response{}, err
	}
	if found {
		return response{err: &agentbridge.Error{
			Code: agentbridge.ECodeThreadExists, Field: "id", Thread: id,
			Message: fmt.Sprintf("A thread with id %q already exists; choose another id or leave it out.", id),
		}}, nil
	}
	zero, err := storecore.StateKey(agentbridge.ThreadState{})
	if err != nil {
		return response{}, err
	}
	content, err := json.Marshal(req.Name)
	if err != nil {
		return response{}, fmt.Errorf("encode thread name: %w", err)
	}
	h := head{name: req.Name, stateKey: zero}
	ev := agentbridge.Event{
		Seq: 1, Thread: id, Type: agentbridge.TypeThreadCreated,
		From: req.From, To: agentbridge.ToAll, Content: content,
	}
	if err := s.stamp(&ev, &h); err != nil {
		return response{}, err
	}
	if _, err := s.st.insertThread.ExecContext(ctx, id, req.Name, ev.TS); err != nil {
		return response{}, fmt.Errorf("insert thread %s: %w", id, err)
	}
	if _, err := s.st.insertState.ExecContext(ctx, id, zero); err != nil {
		return response{}, fmt.Errorf("insert state of thread %s: %w", id, err)
	}
	meta, err := storecore.StoredMeta(&ev.Meta)
	if err != nil {
		return response{}, err
	}
	if err := s.insertEvent(ctx, &ev, meta, &h); err != nil {
		return response{}, err
	}
	b.put(id, h)
	th := agentbridge.Thread{ID: id, Name: req.Name, CreatedAt: ev.TS, UpdatedAt: ev.TS, LastSeq: 1, EventCount: 1}
	return response{thread: th, event: ev}, nil
}

// stamp gives ev its ts (strictly after the thread's last) and id, and
// moves h's clock to it.
func (s *Store) stamp(ev *agentbridge.Event, h *head) error {
	t := storecore.NextTime(h.lastTS)
	u, err := ulid.New(ulid.Timestamp(t), s.entropy)
	if err != nil {
		return fmt.Errorf("new event id: %w", err)
	}
	ev.ID = u.String()
	ev.TS = agentbridge.FormatTime(t)
	h.lastTS = t
	return nil
}

// withHop returns meta, the stored form of m without a hop, with m's hop
// added. Without extra keys no key sorts before "hop" (the typed keys are
// reply_to, tags and via), so it goes first and needs no re-encoding.
func withHop(m agentbridge.Meta, meta string, hop int) (string, error) {
	if len(m.Extra) > 0 {
		b, err := m.MarshalJSON()
		if err != nil {
			return "", fmt.Errorf("encode meta: %w", err)
		}
		return string(b), nil
	}
	prefix := `{"hop":` + strconv.Itoa(hop)
	if meta == "{}" {
		return prefix + "}", nil
	}
	return prefix + "," + meta[1:], nil
}

// insertEvent stores the stamped ev, with meta its Meta in stored form
// (storecore.StoredMeta), and advances h past it: seq, name, folded state,
// and a state snapshot when a control changed the state. ev.Seq, Thread
// and the client fields must be set, and ev.Meta already passed through
// storecore.StoredMeta; on return ev is exactly what readers will get back. A
// renamed thread's row and a changed thread_state are left to flush.
func (s *Store) insertEvent(ctx context.Context, ev *agentbridge.Event, meta string, h *head) error {
	var content any
	if ev.Content != nil {
		// Bound as text without a copy: the driver hands it to
		// sqlite3_bind_text64 with SQLITE_TRANSIENT, which copies it during
		// the call, and nothing writes to ev.Content meanwhile.
		content = unsafe.String(unsafe.SliceData(ev.Content), len(ev.Content))
	}
	after := agentbridge.Fold(h.state, *ev, s.humans)
	res, err := s.st.insertEvent.ExecContext(ctx,
		ev.ID, ev.Thread, ev.Seq, ev.TS, ev.Type, ev.From, ev.To, content, meta, after.LastHop)
	if err != nil {
		return fmt.Errorf("insert event: %w", err)
	}
	if ev.GSeq, err = res.LastInsertId(); err != nil {
		return fmt.Errorf("read gseq: %w", err)
	}
	if ev.Type == agentbridge.TypeThreadRenamed {
		h.name, h.nameDirty = ev.Text(), true
	}
	h.lastSeq = ev.Seq
	// Besides controls, only a message ending party mode (an exit word)
	// or a scene event (a speech counts a turn) changes the state;
	// comparing the scene pointer keeps plain messages free of the
	// state's encoding.
	partyEnded := h.state.Party.On && !after.Party.On
	sceneChanged := after.Scene != h.state.Scene
	h.state = after
	if ev.Type != agentbridge.TypeControl && !partyEnded && !sceneChanged {
		return nil
	}
	key, err := storecore.StateKey(after)
	if err != nil {
		return err
	}
	if key == h.stateKey {
		return nil
	}
	if _, err := s.st.insertSnapshot.ExecContext(ctx, ev.Thread, ev.Seq, key); err != nil {
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
			if _, err := s.st.updateThread.ExecContext(ctx, h.name, id); err != nil {
				return fmt.Errorf("rename thread %s: %w", id, err)
			}
		}
		if !h.stateDirty {
			continue
		}
		if _, err := s.st.updateState.ExecContext(ctx, h.lastSeq, h.state.LastHop, h.stateKey, id); err != nil {
			return fmt.Errorf("update state of thread %s: %w", id, err)
		}
	}
	return nil
}
