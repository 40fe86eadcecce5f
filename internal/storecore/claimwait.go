package storecore

import (
	"context"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Waiting for a usage limit (contract 8.5, agentbridge.ClaimWaitStore):
// the holder of a running run claim puts it back to waiting, due at the
// time its participant's limit resets. Both stores decide it here, over
// their SQL in their own transaction.

// NotDue reports whether c is a waiting claim whose due time has not come:
// nobody may take it yet.
func NotDue(c ClaimRow) bool {
	return c.State == agentbridge.ClaimWaiting && c.DueMs > 0 && c.NowMs < c.DueMs
}

// WaitTx is what a wait needs of a store inside its transaction.
type WaitTx interface {
	// ClaimByID reads (and, on PostgreSQL, locks) claim id; nil: none.
	ClaimByID(ctx context.Context, id int64) (*ClaimRow, error)
	// SetWaiting makes claim id waiting with no holder, due at dueMs and
	// expiring at expiresMs.
	SetWaiting(ctx context.Context, id, dueMs, expiresMs int64) error
	// PutReceipt writes a receipt in the transaction.
	PutReceipt(ctx context.Context, in agentbridge.ReceiptInput) error
}

// WriteWait applies req (validated, due its due time) through tx:
// refusal is the client's error (no such claim, not its holder, a due
// time past the pending ttl), err a failure of the store.
func WriteWait(ctx context.Context, tx WaitTx, req agentbridge.ClaimWaitRequest, due time.Time) (c agentbridge.Claim, refusal, err error) {
	row, err := tx.ClaimByID(ctx, req.ID)
	if err != nil {
		return c, nil, err
	}
	if row == nil {
		return c, agentbridge.ClaimNotFound(req.ID), nil
	}
	f := agentbridge.ClaimFence{ID: req.ID, Fence: req.Fence, Coordinator: req.Coordinator}
	if err := f.Check(row.Claim); err != nil {
		return c, err, nil
	}
	if row.State != agentbridge.ClaimRunning || !row.IsRun() {
		return c, &agentbridge.Error{Code: agentbridge.ECodeFenced, Thread: row.Thread, Participant: row.Participant,
			Message: fmt.Sprintf("Claim %d is %s: only a running claim of a run can wait for a due time.", row.ID, row.State)}, nil
	}
	ttl := time.Duration(req.PendingTTLMillis) * time.Millisecond
	expires := row.CreatedMs + req.PendingTTLMillis
	if due.UnixMilli() >= expires {
		return c, agentbridge.TooLateToWait(due, ttl), nil
	}
	if err := tx.SetWaiting(ctx, row.ID, due.UnixMilli(), expires); err != nil {
		return c, nil, fmt.Errorf("put claim %d back to waiting: %w", row.ID, err)
	}
	if err := tx.PutReceipt(ctx, agentbridge.ReceiptInput{
		Thread: row.Thread, Event: row.Event, Participant: row.Participant, From: req.Coordinator,
		State: agentbridge.ReceiptQueued, Reason: req.Reason,
	}); err != nil {
		return c, nil, err
	}
	if row, err = tx.ClaimByID(ctx, row.ID); err != nil || row == nil {
		return c, nil, fmt.Errorf("reload claim %d: %w", req.ID, err)
	}
	return row.Claim, nil, nil
}
