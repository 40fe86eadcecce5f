package sqlite

import (
	"context"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// Claims (contract 7.1, agentbridge.ClaimStore): every claim write is a
// request to the writer goroutine, so it is decided and written in one
// transaction, in order with the appends and receipts it fences. The
// rules and the SQL are storecore's (claimsql.go).

// claimOp submits fn as a writer request: it runs in the group commit's
// transaction with the batch, so that it may append events and write
// receipts as the writer does.
func (s *Store) claimOp(ctx context.Context, fn func(ctx context.Context, b *batch) (response, error)) response {
	r := s.newRequest(ctx)
	r.claim = fn
	return s.submit(ctx, r)
}

// claimWrite is the engine's claim transaction (Engine.ClaimWrite): fn
// runs in the writer's batch, and a refusal it returns is its caller's
// answer, not the batch's failure.
func (s *Store) claimWrite(ctx context.Context, fn func(ctx context.Context, t storecore.ClaimWriteTx) error) error {
	return s.claimOp(ctx, func(ctx context.Context, b *batch) (response, error) {
		err := fn(ctx, s.claimTx(b))
		if refusal := storecore.Refusal(err); refusal != nil {
			return response{err: refusal, isOther: true}, nil
		}
		return response{isOther: true}, err
	}).err
}

// claimSQL is the claims' SQL on the writer's connection.
func (s *Store) claimSQL() storecore.ClaimSQL {
	return storecore.ClaimSQL{E: &s.Engine, C: storecore.SQLConn(s.w.conn)}
}

// claimTx is storecore.ClaimWriteTx on the writer's connection, within
// batch b.
type claimTx struct {
	storecore.ClaimSQL
	s *Store
	b *batch
	// appended is AppendMessage's answer (when it ran) and receipt
	// PutReceipt's: what the sweeper's writes answer with.
	appended *response
	receipt  response
}

func (s *Store) claimTx(b *batch) *claimTx { return &claimTx{ClaimSQL: s.claimSQL(), s: s, b: b} }

// ThreadExists looks thread up in the batch, the writer's heads, then the
// database.
func (t *claimTx) ThreadExists(ctx context.Context, thread string) (bool, error) {
	_, found, err := t.s.headOf(ctx, t.b, thread)
	return found, err
}

// PutReceipt writes in in the batch; a refusal of the receipt leaves the
// claim as written.
func (t *claimTx) PutReceipt(ctx context.Context, in agentbridge.ReceiptInput) (err error) {
	t.receipt, err = t.s.putReceipt(ctx, t.b, in)
	return err
}

// Written is the receipt PutReceipt wrote.
func (t *claimTx) Written() (agentbridge.Receipt, bool) { return t.receipt.rcpt, t.receipt.changed }

// StateNow is thread's state as the writer's batch sees it.
func (t *claimTx) StateNow(ctx context.Context, thread string) (agentbridge.ThreadState, error) {
	h, _, err := t.s.headOf(ctx, t.b, thread)
	return h.state, err
}

// AppendMessage appends req in the batch.
func (t *claimTx) AppendMessage(ctx context.Context, req agentbridge.AppendRequest, meta string, ctl *agentbridge.Control) (refusal, err error) {
	resp, err := t.s.appendEvent(ctx, t.b, req, meta, ctl)
	if err != nil {
		return nil, err
	}
	t.appended = &resp
	return resp.err, nil
}

// ExpireClaim expires waiting claim id through the writer, when it is
// still due: the claim, the bridge's error message and the failed receipt
// commit together.
func (s *Store) ExpireClaim(ctx context.Context, id int64) (_ *agentbridge.Event, _ *agentbridge.Receipt, _ bool, err error) {
	defer s.GuardWrite(time.Now(), &err)
	resp := s.claimOp(ctx, func(ctx context.Context, b *batch) (response, error) {
		tx := s.claimTx(b)
		expired, err := storecore.ExpireClaim(ctx, s.Log, tx, id, s.Humans)
		if err != nil || !expired {
			return response{isOther: true}, err
		}
		resp := response{isOther: true}
		if tx.appended != nil && tx.appended.err == nil {
			resp = *tx.appended
		}
		resp.rcpt, resp.changed, resp.value = tx.receipt.rcpt, tx.receipt.changed, true
		return resp, nil
	})
	if resp.err != nil || resp.value == nil {
		return nil, nil, false, resp.err
	}
	var ev *agentbridge.Event
	if resp.event.ID != "" {
		ev = &resp.event
	}
	var rc *agentbridge.Receipt
	if resp.changed {
		rc = &resp.rcpt
	}
	return ev, rc, true, nil
}
