// The writer: callers queue requests (Append, CreateThread, receipts,
// claims and the engine's other writes) and wait for their answer; one goroutine (run) owns the
// connection that writes, gathers what is queued into one group commit and
// answers every caller after COMMIT. The state only it touches is
// writerState; the append path itself is in append.go, the statements in
// writerstmts.go.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// request is one write handed to the writer goroutine: a thread creation
// when create is set, else append. reply is buffered so the writer never
// blocks. Requests are pooled (see Store.reqPool) with their reply channel:
// a new one for every append would be ~600 bytes of garbage.
type request struct {
	ctx    context.Context
	append agentbridge.AppendRequest
	// meta is append's Input.Meta in its stored form, encoded by the
	// caller: the writer is the one serial step of every append, so what
	// can be done before it is done there.
	meta string
	// control is append's control as AppendRequest.Validate parsed it
	// (nil for any other type), for Admit and FoldParsed.
	control *agentbridge.Control
	create  *agentbridge.CreateThreadRequest
	// receipt, when set, makes this a receipt write (see putReceipt).
	receipt *agentbridge.ReceiptInput
	// other, when set, is a write that is neither an event nor a receipt
	// nor a claim (the engine's writes, writeTx; an upload's steps): the
	// writer runs it in its transaction and answers with what it returns.
	other func(ctx context.Context, conn *sql.Conn) (response, error)
	// claim, when set, is a claim write (claims.go): it runs with the
	// batch, so that it may append events and write receipts.
	claim func(ctx context.Context, b *batch) (response, error)
	reply chan response
}

// context is the caller's ctx, which ends its wait before the commit.
func (r *request) context() context.Context { return r.ctx }

// drop answers a request left out of its batch with err.
func (r *request) drop(err error) { r.reply <- response{err: err} }

type response struct {
	event    agentbridge.Event
	thread   agentbridge.Thread
	replayed bool
	// ignored is the Admission's Ignored of a new event.
	ignored *agentbridge.Ignored
	err     error
	// rcpt is a receipt write's answer; isReceipt keeps it out of the
	// append counters, changed says whether it wrote anything.
	rcpt               agentbridge.Receipt
	isReceipt, changed bool
	// value is an other write's answer; isOther keeps it out of the
	// append counters.
	value   any
	isOther bool
}

// writerState is what only the writer goroutine touches: the connection it
// holds for the store's life (so that its statements stay prepared), the
// cache of committed thread heads, the batch every commit reuses and its
// group-commit bookkeeping, and the clocks of the ids it mints. Keeping it
// in one type, away from the fields submitters share (the queue, the
// gather handshake, the counters), is what makes it safe to use without a
// lock.
type writerState struct {
	conn  *sql.Conn
	st    writerStmts
	heads map[string]head // committed heads only; see batch
	// scratch is the batch every commit reuses (see batch).
	scratch batch
	// lastBatch is how many requests the last commit carried, and gatherT
	// the timer that bounds waiting for as many again, for at most
	// gatherWait (groupWait; tests change it) (see gather).
	lastBatch  int
	gatherT    *time.Timer
	gatherWait time.Duration
	// sinceCheckpoint counts the commits since the writer last woke the
	// checkpointer.
	sinceCheckpoint int
	entropy         *ulid.MonotonicEntropy
	// replayed is the event an idempotency key named, from lookups.Replay
	// to the append that asked.
	replayed agentbridge.Event
	// head is the head of the thread of the append being decided, which
	// lookups reads (SenderHopAfter) and advances (Add).
	head head
	// committed is the scratch list of a commit's new events, for the tail.
	committed []agentbridge.Event
}

// Append validates req, hands it to the writer and waits for the commit.
// A request whose ctx is done before the writer takes it is dropped and
// returns ctx's error; once the writer has taken it, it is committed (or
// refused) whatever happens to ctx, and Append waits for that answer.
func (s *Store) Append(ctx context.Context, req agentbridge.AppendRequest) (_ agentbridge.AppendResult, err error) {
	defer s.GuardWrite(time.Now(), &err)
	ctl, meta, err := storecore.PrepareAppend(&req)
	if err != nil {
		return agentbridge.AppendResult{}, err
	}
	r := s.newRequest(ctx)
	r.append, r.meta, r.control = req, meta, ctl
	resp := s.submit(ctx, r)
	if resp.err != nil {
		return agentbridge.AppendResult{}, resp.err
	}
	return agentbridge.AppendResult{Event: resp.event, Replayed: resp.replayed, Ignored: resp.ignored}, nil
}

// CreateThread validates req, then creates the thread and its
// thread.created event through the writer, with Append's ctx rules.
func (s *Store) CreateThread(ctx context.Context, req agentbridge.CreateThreadRequest) (_ agentbridge.Thread, _ agentbridge.Event, err error) {
	defer s.GuardWrite(time.Now(), &err)
	req, err = req.WithDefaults()
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
	if err := storecore.Enqueue(ctx, s.reqs, s.done, r); err != nil {
		return response{err: err}
	}
	s.queued()
	resp := storecore.Await(r.reply, s.stopped, response{err: ErrClosed})
	if resp.err != ErrClosed { // answered: the writer is done with r
		*r = request{reply: r.reply}
		s.reqPool.Put(r)
	}
	return resp
}

// run is the writer goroutine: it blocks for one request, drains whatever
// else is queued (up to the batch cap) and commits them together. After
// Close it commits what is still queued, then exits.
func (s *Store) run() {
	storecore.RunWriter(s.reqs, s.done, s.stopped, s.max, func(first *request) {
		// Let the goroutines that are about to submit run first: on a
		// busy machine this turns many one-append commits into fewer
		// larger ones, and BEGIN/COMMIT cost as much as the appends.
		runtime.Gosched()
		s.commit(s.gather(storecore.Take(s.reqs, []*request{first}, s.max)))
	}, s.commit)
}

// gather waits, up to groupWait, until batch holds as many requests as the
// last commit carried. Concurrent clients come back soon after their
// answer, so the last commit's size is the concurrency to expect; waiting
// for it instead of committing whatever is queued halves the commits at 32
// clients, and a commit (BEGIN, the WAL frames, COMMIT) costs as much as
// several appends. A lone client's commits carry one request, so it never
// waits; after a burst, one commit waits at most groupWait.
//
// It sleeps until enough requests are queued (see queued) rather than
// waking for each one: receiving them one by one would wake the writer ~7
// times per commit, each a round through the scheduler.
func (s *Store) gather(batch []*request) []*request {
	want := min(s.w.lastBatch, s.max)
	if len(batch) >= want {
		return batch
	}
	select {
	case <-s.gatherFull: // a stale signal from the last gather
	default:
	}
	if s.w.gatherT == nil {
		s.w.gatherT = time.NewTimer(s.w.gatherWait)
	} else {
		s.w.gatherT.Reset(s.w.gatherWait)
	}
	defer s.w.gatherT.Stop()
	for {
		batch = storecore.Take(s.reqs, batch, s.max)
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
			case <-s.w.gatherT.C:
				s.gatherNeed.Store(0)
				return storecore.Take(s.reqs, batch, s.max)
			case <-s.done:
				s.gatherNeed.Store(0)
				return storecore.Take(s.reqs, batch, s.max)
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
	b := &s.w.scratch // empty: every commit resets it when it is done
	defer b.reset()
	live := storecore.KeepLive(b.live, reqs, (*request).context, (*request).drop)
	defer func() { s.w.lastBatch = len(live) }()
	if len(live) == 0 {
		return
	}
	// The transaction belongs to the whole batch, not to any one caller, so
	// no caller's cancellation may abort it.
	ctx := context.Background()
	resps := append(b.resps, make([]response, len(live))...)
	err := s.inTx(ctx, func(*sql.Conn) error {
		if err := s.checkFile(); err != nil {
			return err
		}
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
		clear(s.w.heads)
		b.live, b.resps = live, resps // for reset
		err = storecore.CommitFailed(s.Log, unreachable, err, len(live))
		for _, r := range live {
			r.reply <- response{err: err}
		}
		return
	}
	b.live, b.resps = live, resps // for reset
	for i, id := range b.order {
		s.remember(id, b.heads[i])
	}
	if s.w.sinceCheckpoint++; s.w.sinceCheckpoint >= checkpointEvery {
		s.w.sinceCheckpoint = 0
		select {
		case s.checkpoint <- struct{}{}:
		default: // one is already pending
		}
	}
	var committed, replayed, rejected uint64
	evs := s.w.committed[:0]
	for _, resp := range resps {
		switch {
		case resp.isReceipt, resp.isOther:
			// Not appends: they count nowhere and wake no reader.
		case resp.err != nil:
			rejected++
		case resp.replayed:
			replayed++
		default:
			committed++
			evs = append(evs, resp.event)
		}
	}
	// Before the wake-up, so that a woken reader finds them there.
	s.Recent.Add(evs)
	clear(evs)
	s.w.committed = evs[:0]
	s.CountCommit(len(live), committed, replayed, rejected)
	if committed > 0 {
		s.notifier.Wake()
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
			if err := storecore.DroppedBeforeCommit(r.ctx); err != nil {
				r.reply <- response{err: err}
				continue
			}
			live = append(live, r)
		default:
			return live
		}
	}
	return live
}

// writeTx is the engine's write transaction (storecore.WriteFunc): fn
// runs on the writer's connection inside a group commit, and a refusal it
// returns is its caller's answer, not the batch's failure.
func (s *Store) writeTx(ctx context.Context, fn func(ctx context.Context, c storecore.Conn) error) error {
	r := s.newRequest(ctx)
	r.other = func(ctx context.Context, conn *sql.Conn) (response, error) {
		err := fn(ctx, storecore.SQLConn(conn))
		if refusal := storecore.Refusal(err); refusal != nil {
			return response{err: refusal}, nil
		}
		return response{}, err
	}
	return s.submit(ctx, r).err
}

// inTx runs fn in a write transaction on the writer's connection. BEGIN
// IMMEDIATE takes the write lock up front (waiting up to the busy timeout
// for another process), so no statement inside fails on a lock upgrade.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Conn) error) error {
	if _, err := s.w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(s.w.conn); err != nil {
		if _, rerr := s.w.conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
			return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return err
	}
	if _, err := s.w.conn.ExecContext(ctx, "COMMIT"); err != nil {
		// A failed COMMIT may leave the transaction open (SQLITE_BUSY);
		// end it so the next batch can begin. If SQLite already rolled it
		// back, this ROLLBACK fails harmlessly.
		_, _ = s.w.conn.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
