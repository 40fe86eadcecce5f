package storecore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// SweepTx is what the sweeper's writes need of a store inside the
// transaction they run in: each method is the store's SQL on that
// transaction's connection (Registrations and PutReceipt as in ClaimTx).
type SweepTx interface {
	// Registrations reads every registration.
	Registrations(ctx context.Context) ([]agentbridge.CoordinatorInfo, error)
	// PutReceipt writes a receipt in the transaction.
	PutReceipt(ctx context.Context, in agentbridge.ReceiptInput) error
	// ClaimByID reads claim id (nil: none).
	ClaimByID(ctx context.Context, id int64) (*ClaimRow, error)
	// MarkInterrupted records that claim id's receipt is interrupted at
	// its fence.
	MarkInterrupted(ctx context.Context, id int64) error
	// MarkExpired sets claim id's state to expired.
	MarkExpired(ctx context.Context, id int64) error
	// PendingTTL is how long claim id was to wait, from its stored times.
	PendingTTL(ctx context.Context, id int64) (time.Duration, error)
	// ReceiptOf reads the receipt of run claim c's pair; found is false
	// when there is none.
	ReceiptOf(ctx context.Context, c agentbridge.Claim) (_ agentbridge.Receipt, found bool, _ error)
	// AppendMessage appends req (validated, its meta stored and its
	// control parsed by PrepareAppend) in the transaction; refusal is
	// the thread's refusal of it.
	AppendMessage(ctx context.Context, req agentbridge.AppendRequest, meta string, ctl *agentbridge.Control) (refusal, err error)
}

// InterruptClaim writes, through tx, the interrupted receipt of claim id
// at fence when it is still due (InterruptDue) and its pair's receipt has
// not ended; false when it writes nothing.
func InterruptClaim(ctx context.Context, tx SweepTx, id, fence int64) (bool, error) {
	row, err := tx.ClaimByID(ctx, id)
	if err != nil || row == nil || row.Fence != fence {
		return false, err
	}
	regs, err := tx.Registrations(ctx)
	if err != nil || !InterruptDue(*row, regs) {
		return false, err
	}
	if err := tx.MarkInterrupted(ctx, id); err != nil {
		return false, fmt.Errorf("mark claim %d interrupted: %w", id, err)
	}
	old, found, err := tx.ReceiptOf(ctx, row.Claim)
	if err != nil {
		return false, err
	}
	in, ok := InterruptedReceipt(row.Claim, old, found)
	if !ok {
		return false, nil
	}
	return true, tx.PutReceipt(ctx, in)
}

// ExpireClaim expires claim id through tx when it is still due
// (ExpireDue): a run claim also gets the bridge's error message in its
// thread and a failed receipt, in the same transaction. A thread that
// refuses the message (paused, say) is logged, and the claim still
// expires and its receipt still fails. false: nothing was due.
func ExpireClaim(ctx context.Context, log *slog.Logger, tx SweepTx, id int64) (bool, error) {
	row, err := tx.ClaimByID(ctx, id)
	if err != nil || row == nil || !ExpireDue(*row) {
		return false, err
	}
	if err := tx.MarkExpired(ctx, id); err != nil {
		return false, fmt.Errorf("expire claim %d: %w", id, err)
	}
	if !row.IsRun() {
		return true, nil
	}
	ttl, err := tx.PendingTTL(ctx, id)
	if err != nil {
		return false, fmt.Errorf("load the ttl of claim %d: %w", id, err)
	}
	req := ExpiredMessage(row.Claim, ttl)
	ctl, meta, err := PrepareAppend(&req)
	if err != nil {
		return false, fmt.Errorf("build the expiry message of claim %d: %w", id, err)
	}
	refusal, err := tx.AppendMessage(ctx, req, meta, ctl)
	if err != nil {
		return false, err
	}
	if refusal != nil {
		log.Warn("the expiry message of a claim was refused", "claim", id, "thread", row.Thread, "err", refusal)
	}
	return true, tx.PutReceipt(ctx, FailedReceipt(row.Claim, ttl))
}
