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
	// MarkNotATrigger sets claim id's state to not_a_trigger.
	MarkNotATrigger(ctx context.Context, id int64) error
	// PendingTTL is how long claim id was to wait, from its stored times.
	PendingTTL(ctx context.Context, id int64) (time.Duration, error)
	// ReceiptOf reads the receipt of run claim c's pair; found is false
	// when there is none.
	ReceiptOf(ctx context.Context, c agentbridge.Claim) (_ agentbridge.Receipt, found bool, _ error)
	// AppendMessage appends req (validated, its meta stored and its
	// control parsed by PrepareAppend) in the transaction; refusal is
	// the thread's refusal of it.
	AppendMessage(ctx context.Context, req agentbridge.AppendRequest, meta string, ctl *agentbridge.Control) (refusal, err error)
	// StateNow is thread's derived state as the transaction sees it.
	StateNow(ctx context.Context, thread string) (agentbridge.ThreadState, error)
	// LastUnserved is the last "nobody served" notice of (thread,
	// participant): when it was posted, in the database's milliseconds,
	// and the newest claim it counted; found is false when none was.
	LastUnserved(ctx context.Context, thread, participant string) (postedMs, lastClaim int64, found bool, err error)
	// PutUnserved records a "nobody served" notice of (thread,
	// participant) posted at nowMs, counting the claims up to lastClaim.
	PutUnserved(ctx context.Context, thread, participant string, nowMs, lastClaim int64) error
	// CountWaited counts the run claims of (thread, participant) after
	// claim after that wait or expired, and returns the newest's id.
	CountWaited(ctx context.Context, thread, participant string, after int64) (n int, newest int64, err error)
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
// (ExpireDue): a run claim's receipt fails, in the same transaction, and
// the bridge says so in its thread at most once per (thread, participant)
// per pending ttl, naming how many messages waited, and only for an
// invited participant that is not one of humans (contract 8.3): one
// filer's flood of waiting claims is one notice, and one push. A thread
// that refuses the message (paused, say) is logged, and the claim still
// expires and its receipt still fails. false: nothing was due.
func ExpireClaim(ctx context.Context, log *slog.Logger, tx SweepTx, id int64, humans agentbridge.Humans) (bool, error) {
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
	waited, err := unservedNotice(ctx, tx, *row, ttl, humans)
	if err != nil {
		return false, err
	}
	if waited > 0 {
		req := ExpiredMessage(row.Claim, ttl, waited)
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
	}
	return true, tx.PutReceipt(ctx, FailedReceipt(row.Claim, ttl))
}

// unservedNotice decides whether expired run claim c gets the "nobody
// served" notice: not for a participant that is a human or is not
// invited, nor within ttl of the last one of its (thread, participant).
// It returns how many messages waited (the claims of the pair, waiting or
// expired, that the last notice did not count), recording the notice, or
// 0 for none.
func unservedNotice(ctx context.Context, tx SweepTx, c ClaimRow, ttl time.Duration, humans agentbridge.Humans) (int, error) {
	if humans.Has(c.Participant) {
		return 0, nil
	}
	st, err := tx.StateNow(ctx, c.Thread)
	if err != nil {
		return 0, fmt.Errorf("read the state of thread %s: %w", c.Thread, err)
	}
	if _, ok := st.Invited(c.Participant); !ok {
		return 0, nil
	}
	last, counted, found, err := tx.LastUnserved(ctx, c.Thread, c.Participant)
	if err != nil {
		return 0, fmt.Errorf("read the last unserved notice: %w", err)
	}
	if found && c.NowMs-last < ttl.Milliseconds() {
		return 0, nil
	}
	n, newest, err := tx.CountWaited(ctx, c.Thread, c.Participant, counted)
	if err != nil {
		return 0, fmt.Errorf("count the messages that waited: %w", err)
	}
	if err := tx.PutUnserved(ctx, c.Thread, c.Participant, c.NowMs, max(newest, counted)); err != nil {
		return 0, fmt.Errorf("record the unserved notice: %w", err)
	}
	return max(n, 1), nil
}

// EndNotATrigger ends claim id as not a trigger through tx, when
// coordinator holds it at fence (else refusal, ECodeFenced): the claim is
// marked so, and its pair's receipt, while queued or running, becomes
// skipped with why. wrote reports whether a receipt was written.
func EndNotATrigger(ctx context.Context, tx SweepTx, id, fence int64, coordinator, why string) (c agentbridge.Claim, wrote bool, refusal, err error) {
	row, err := tx.ClaimByID(ctx, id)
	if err != nil {
		return c, false, nil, err
	}
	if row == nil {
		return c, false, agentbridge.ClaimNotFound(id), nil
	}
	if refusal := (agentbridge.ClaimFence{ID: id, Fence: fence, Coordinator: coordinator}).Check(row.Claim); refusal != nil {
		return c, false, refusal, nil
	}
	if err := tx.MarkNotATrigger(ctx, id); err != nil {
		return c, false, nil, fmt.Errorf("end claim %d: %w", id, err)
	}
	c = row.Claim
	c.State = agentbridge.ClaimNotATrigger
	if !c.IsRun() {
		return c, false, nil, nil
	}
	old, found, err := tx.ReceiptOf(ctx, c)
	if err != nil || (found && old.State != agentbridge.ReceiptQueued && old.State != agentbridge.ReceiptRunning) {
		return c, false, nil, err
	}
	return c, true, nil, tx.PutReceipt(ctx, agentbridge.ReceiptInput{
		Thread: c.Thread, Event: c.Event, Participant: c.Participant, From: agentbridge.ClaimSender,
		State: agentbridge.ReceiptSkipped, Reason: agentbridge.NotATriggerReason(why),
	})
}
