package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// Claims (contract 7.1, agentbridge.ClaimStore): each claim write is one
// transaction that locks the claim's row (SELECT … FOR UPDATE), so two
// bridges on the database decide a key one after the other; a fenced
// append or receipt locks the same row in its own transaction. Locks are
// taken threads first, then claims, then receipts, in every path (an
// append's thread FOR NO KEY UPDATE, a claim's or a receipt's FOR KEY
// SHARE, which no path's thread lock conflicts with); a transaction
// PostgreSQL ends with a serialization failure or a deadlock all the same
// is run again (tx.go). The rules and the SQL are storecore's
// (claimsql.go).

// claimWrite is the engine's claim transaction (Engine.ClaimWrite).
func (s *Store) claimWrite(ctx context.Context, fn func(ctx context.Context, t storecore.ClaimWriteTx) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return fn(ctx, s.claimTx(tx, nil)) })
}

// claimTx is storecore.ClaimWriteTx in transaction tx; l is the writer's
// batch, for an expiry's message.
type claimTx struct {
	storecore.ClaimSQL
	s  *Store
	tx pgx.Tx
	l  *lookups
	// appended is AppendMessage's answer (when it ran), rcpt and changed
	// PutReceipt's: what the sweeper's writes answer with.
	appended *response
	rcpt     agentbridge.Receipt
	changed  bool
}

func (s *Store) claimTx(tx pgx.Tx, l *lookups) *claimTx {
	return &claimTx{ClaimSQL: storecore.ClaimSQL{E: &s.Engine, C: pgConn{tx}}, s: s, tx: tx, l: l}
}

// ThreadExists looks thread up, taking its row's FOR KEY SHARE lock first
// in the transaction, as the one lock order has it (threads, claims,
// receipts).
func (t *claimTx) ThreadExists(ctx context.Context, thread string) (bool, error) {
	return threadExists(ctx, t.tx, thread)
}

// threadExists looks thread up in tx, taking its row's FOR KEY SHARE
// lock: the lock a foreign key to the row takes anyway, with which no
// writer's lock conflicts.
func threadExists(ctx context.Context, tx pgx.Tx, thread string) (bool, error) {
	var one int
	found, err := storecore.Found(tx.QueryRow(ctx, `SELECT 1 FROM threads WHERE id = $1 FOR KEY SHARE`, thread).Scan(&one))
	if err != nil {
		return false, fmt.Errorf("look up thread %s: %w", thread, err)
	}
	return found, nil
}

// PutReceipt writes in in tx.
func (t *claimTx) PutReceipt(ctx context.Context, in agentbridge.ReceiptInput) (err error) {
	t.rcpt, t.changed, err = t.s.putReceiptTx(ctx, t.tx, in)
	return err
}

// Written is the receipt PutReceipt wrote.
func (t *claimTx) Written() (agentbridge.Receipt, bool) { return t.rcpt, t.changed }

// StateNow is thread's state: as the writer's batch holds it in an
// expiry (the writer locked the thread), else as committed.
func (t *claimTx) StateNow(ctx context.Context, thread string) (agentbridge.ThreadState, error) {
	if t.l != nil {
		if h, ok := t.l.b.heads[thread]; ok {
			return h.state, nil
		}
	}
	var state []byte
	if err := t.tx.QueryRow(ctx, `SELECT state FROM threads WHERE id = $1`, thread).Scan(&state); err != nil {
		return agentbridge.ThreadState{}, fmt.Errorf("load the state of thread %s: %w", thread, err)
	}
	var st agentbridge.ThreadState
	if err := json.Unmarshal(state, &st); err != nil {
		return st, fmt.Errorf("decode the state of thread %s: %w", thread, err)
	}
	return st.Normalize(), nil
}

// AppendMessage appends req in the writer's batch.
func (t *claimTx) AppendMessage(ctx context.Context, req agentbridge.AppendRequest, meta string, ctl *agentbridge.Control) (refusal, err error) {
	resp, err := t.s.appendEvent(ctx, t.l, req, meta, ctl)
	if err != nil {
		return nil, err
	}
	t.appended = &resp
	return resp.err, nil
}

// ExpireClaim expires waiting claim id through the writer, when it is
// still due: the claim, the bridge's error message and the failed receipt
// commit in the writer's transaction.
func (s *Store) ExpireClaim(ctx context.Context, id int64) (_ *agentbridge.Event, _ *agentbridge.Receipt, _ bool, err error) {
	defer s.GuardWrite(time.Now(), &err)
	var thread string
	err = s.pool.QueryRow(ctx, `SELECT thread FROM claims WHERE id = $1`, id).Scan(&thread)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("load claim %d: %w", id, err)
	}
	// append.Thread makes the writer lock the thread first, as for an
	// append, before expireClaim locks the claim.
	resp := s.submit(ctx, &request{ctx: ctx, expire: id, append: agentbridge.AppendRequest{Thread: thread}})
	if resp.err != nil || !resp.expired {
		return nil, nil, false, resp.err
	}
	var ev *agentbridge.Event
	if resp.event.ID != "" {
		ev = &resp.event
	}
	return ev, resp.rcpt, true, nil
}

// expireClaim runs in the writer's transaction: it locks claim id and,
// when it is still due, expires it, queues the bridge's error message in
// the batch and fails the receipt.
func (s *Store) expireClaim(ctx context.Context, l *lookups, id int64) (response, error) {
	t := s.claimTx(l.tx, l)
	expired, err := storecore.ExpireClaim(ctx, s.Log, t, id, s.Humans)
	if err != nil || !expired {
		return response{}, err
	}
	var resp response
	if t.appended != nil && t.appended.err == nil {
		resp = *t.appended
	}
	resp.expired = true
	if t.changed {
		resp.rcpt = &t.rcpt
	}
	return resp, nil
}
