// The writer: callers queue requests (Append and CreateThread) and wait
// for their answer; one goroutine (run) gathers what is queued into one
// transaction, locks the threads it touches, runs the append path
// (append.go), then writes the batch under the log_head lock and answers
// every caller after COMMIT. Receipts and suggestions are not events (no
// gseq to hand out) and skip the writer: each is one statement of its own
// (receipts.go, suggest.go).

package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// request is one write handed to the writer goroutine: a thread creation
// when create is set, else append.
type request struct {
	ctx    context.Context
	append agentbridge.AppendRequest
	meta   string // append's meta in stored form
	// control is append's control as AppendRequest.Validate parsed it.
	control *agentbridge.Control
	create  *agentbridge.CreateThreadRequest
	// expire, when set, is a waiting claim to expire (claims.go): its
	// error message is appended in the batch, to append.Thread.
	expire int64
	reply  chan response
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
	// expired and rcpt are an expiry's answer: whether it expired the
	// claim, and its failed receipt when that changed.
	expired bool
	rcpt    *agentbridge.Receipt
	// pending is 1 + the index in the batch's new events of the event this
	// response returns (filled once gseqs are assigned); 0 when event is
	// complete already.
	pending int
}

// Append validates req, hands it to the writer and waits for the commit.
// Once the writer has taken the request it is committed (or refused)
// whatever happens to ctx, and Append waits for that answer.
func (s *Store) Append(ctx context.Context, req agentbridge.AppendRequest) (_ agentbridge.AppendResult, err error) {
	defer s.GuardWrite(time.Now(), &err)
	ctl, meta, err := storecore.PrepareAppend(&req)
	if err != nil {
		return agentbridge.AppendResult{}, err
	}
	resp := s.submit(ctx, &request{ctx: ctx, append: req, meta: meta, control: ctl})
	if resp.err != nil {
		return agentbridge.AppendResult{}, resp.err
	}
	return agentbridge.AppendResult{Event: resp.event, Replayed: resp.replayed, Ignored: resp.ignored}, nil
}

// CreateThread validates req, then creates the thread and its
// thread.created event through the writer.
func (s *Store) CreateThread(ctx context.Context, req agentbridge.CreateThreadRequest) (_ agentbridge.Thread, _ agentbridge.Event, err error) {
	defer s.GuardWrite(time.Now(), &err)
	req, err = req.WithDefaults()
	if err != nil {
		return agentbridge.Thread{}, agentbridge.Event{}, err
	}
	resp := s.submit(ctx, &request{ctx: ctx, create: &req})
	return resp.thread, resp.event, resp.err
}

// submit queues r and waits for the writer's answer.
func (s *Store) submit(ctx context.Context, r *request) response {
	r.reply = make(chan response, 1)
	if err := storecore.Enqueue(ctx, s.reqs, s.done, r); err != nil {
		return response{err: err}
	}
	return storecore.Await(r.reply, s.stopped, response{err: ErrClosed})
}

// run is the writer goroutine: it takes one request, drains whatever else
// is queued (up to the cap) and commits them together. After Close it
// commits what is still queued, then exits.
func (s *Store) run() {
	storecore.RunWriter(s.reqs, s.done, s.stopped, s.max, func(first *request) {
		s.commit(storecore.Take(s.reqs, []*request{first}, s.max))
	}, s.commit)
}

// commit runs one group commit. Refusals are decided before the refused
// request writes anything, so they never disturb their neighbours; a
// database error rolls the whole batch back and every caller gets it.
func (s *Store) commit(reqs []*request) {
	live := storecore.KeepLive(reqs[:0:0], reqs, (*request).context, (*request).drop)
	if len(live) == 0 {
		return
	}
	// The transaction belongs to the whole batch, not to any one caller.
	// A serialization failure or a deadlock runs it again from the start,
	// with everything it decided thrown away.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var resps []response
	var b *batch
	err := s.retry(ctx, "group commit", func() error {
		resps = make([]response, len(live))
		b = &batch{heads: map[string]*head{}, keys: map[string]int{}, ids: map[string]batchEvent{}}
		return s.commitTx(ctx, b, live, resps)
	})
	if err != nil {
		err = storecore.CommitFailed(s.Log, unreachable, err, len(live))
		for _, r := range live {
			r.reply <- response{err: err}
		}
		return
	}
	if len(b.events) > 0 {
		s.notifier.Wake()
	}
	var committed, replayed, rejected uint64
	for i, r := range live {
		switch {
		case r.expire != 0: // not an append
		case resps[i].err != nil:
			rejected++
		case resps[i].replayed:
			replayed++
		default:
			committed++
		}
	}
	s.CountCommit(len(live), committed, replayed, rejected)
	for i, r := range live {
		resp := resps[i]
		if resp.pending > 0 {
			resp.event = b.events[resp.pending-1]
			resp.pending = 0
		}
		r.reply <- resp
	}
}

// commitTx runs one try of the group commit live in a transaction of its
// own, filling resps and b.
func (s *Store) commitTx(ctx context.Context, b *batch, live []*request, resps []response) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.lockThreads(ctx, tx, b, live); err != nil {
			return err
		}
		l := &lookups{s: s, tx: tx, b: b, legacyKeys: s.legacyKeys}
		for i, r := range live {
			var err error
			switch {
			case r.create != nil:
				resps[i], err = s.createThread(ctx, tx, b, *r.create)
			case r.expire != 0:
				resps[i], err = s.expireClaim(ctx, l, r.expire)
			default:
				resps[i], err = s.appendEvent(ctx, l, r.append, r.meta, r.control)
			}
			if err != nil {
				return err
			}
		}
		return s.write(ctx, tx, b)
	})
}

// lockThreads locks the rows of every existing thread the batch names, in
// id order (two bridges locking in one order cannot deadlock), and reads
// their heads; then the claims the batch names, in id order too.
//
// A thread's row is locked FOR NO KEY UPDATE: it serialises the writers
// of the thread, as the head they update needs, and leaves alone the FOR
// KEY SHARE lock that a receipt's insert takes on its thread (its foreign
// key's check, and putReceiptTx's first statement). With FOR UPDATE that
// check waited for the writer while the receipt's transaction held its
// claim, which the writer's fenced append then waited for: a deadlock
// PostgreSQL broke by failing one of them (contract 8.3).
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
		FROM threads t WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE OF t`, ids)
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
		if t, err := agentbridge.ParseTime(updated); err == nil {
			h.lastTS = t
		}
		b.heads[id] = h
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	return lockClaims(ctx, tx, live)
}

// lockClaims locks the claims that the batch's fenced appends and
// expiries name, in id order, when there are several: each request then
// finds its claim locked already, so two batches (of two bridges) that
// name the same claims take them in one order.
func lockClaims(ctx context.Context, tx pgx.Tx, live []*request) error {
	var ids []int64
	for _, r := range live {
		switch {
		case r.expire != 0:
			ids = append(ids, r.expire)
		case r.create == nil && r.append.Fence != nil:
			ids = append(ids, r.append.Fence.ID)
		}
	}
	slices.Sort(ids)
	if ids = slices.Compact(ids); len(ids) < 2 {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT id FROM claims WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids); err != nil {
		return fmt.Errorf("lock claims: %w", err)
	}
	return nil
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
	indexBatch(&pb, b.events)
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
