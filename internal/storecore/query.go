package storecore

import (
	"context"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// The read rules both stores apply before and around their SQL: which
// parameters are valid, and which seq range a thread query reads.

// CheckLimit refuses a limit outside 0 (no cap) … MaxEventsLimit.
func CheckLimit(limit int) error {
	if limit < 0 || limit > agentbridge.MaxEventsLimit {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "limit",
			"limit must be between 1 and %d (or left out).", agentbridge.MaxEventsLimit)
	}
	return nil
}

// CheckThreadEventsQuery refuses a per-thread query's invalid parameters;
// cursors past the thread's head are refused later, by ThreadRange.
func CheckThreadEventsQuery(q agentbridge.ThreadEventsQuery) error {
	if err := CheckLimit(q.Limit); err != nil {
		return err
	}
	switch {
	case q.After < -1:
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "after", "after must be a seq, 0 or greater.")
	case q.Until < 0:
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "until", "until must be a seq, 1 or greater.")
	case q.Tail < 0:
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "tail", "tail must be a count, 1 or greater.")
	}
	return nil
}

// CheckEventsQuery refuses the global log query's invalid parameters.
func CheckEventsQuery(after int64, limit int) error {
	if err := CheckLimit(limit); err != nil {
		return err
	}
	if after < 0 {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "after", "after must be a gseq, 0 or greater.")
	}
	return nil
}

// CheckThreadsLimit refuses a negative thread list limit (0 = no cap).
func CheckThreadsLimit(limit int) error {
	if limit < 0 {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "limit", "limit must be 1 or greater (or left out).")
	}
	return nil
}

// CheckAt refuses a negative revision for State (0 = now).
func CheckAt(at int64) error {
	if at < 0 {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "at", "at must be a seq, 1 or greater.")
	}
	return nil
}

// ThreadRange turns a checked per-thread query into the seq range it reads,
// (lo, hi], for a thread whose last seq is last: After wins over Since over
// Tail, and Until caps. firstAfter finds the seq of the first event after
// q.Since (last+1 when there is none); it is only called for a Since query,
// which is the one that needs a lookup (ts strictly increases with seq in a
// thread, so the first event after since turns the ts cursor into a seq
// cursor). After or Until past last is cursor_ahead; empty reports a
// range with nothing in it.
func ThreadRange(q agentbridge.ThreadEventsQuery, last int64, firstAfter func() (int64, error)) (lo, hi int64, empty bool, err error) {
	if q.After > last {
		return 0, 0, false, agentbridge.CursorAhead(q.Thread, "after", q.After, last)
	}
	if q.Until > last {
		return 0, 0, false, agentbridge.CursorAhead(q.Thread, "until", q.Until, last)
	}
	hi = last
	if q.Until > 0 {
		hi = q.Until
	}
	switch {
	case q.After >= 0:
		lo = q.After
	case q.Since != "":
		first, err := firstAfter()
		if err != nil {
			return 0, 0, false, err
		}
		if first > last {
			return 0, 0, true, nil
		}
		lo = first - 1
	case q.Tail > 0:
		// seq is gapless, so the last Tail events are a seq range.
		lo = max(hi-int64(q.Tail), 0)
	}
	return lo, hi, false, nil
}

// CheckReceipt refuses a receipt before any store looks at its thread:
// ReceiptInput.Validate, and a malformed thread id (thread_not_found).
func CheckReceipt(in agentbridge.ReceiptInput) error {
	if err := in.Validate(); err != nil {
		return err
	}
	if !agentbridge.ThreadIDPattern.MatchString(in.Thread) {
		return agentbridge.ThreadNotFound(in.Thread)
	}
	return nil
}

// ReceiptEventNotFound is the error for a receipt naming an event that is
// not in its thread.
func ReceiptEventNotFound(in agentbridge.ReceiptInput) *agentbridge.Error {
	return &agentbridge.Error{
		Code: agentbridge.ECodeEventNotFound, Field: "event", Thread: in.Thread,
		Message: fmt.Sprintf("There is no event %q in thread %q.", agentbridge.Clip(in.Event, agentbridge.QuoteRunes), in.Thread),
	}
}

// PutReceiptIn stores in as its pair's latest receipt in the write
// transaction c, after checking its event and its fence (a refusal is the
// error, an *agentbridge.Error); the caller has found its thread, taking
// the thread's lock first on PostgreSQL (FOR KEY SHARE, the lock the
// receipt's foreign key takes anyway), as the one lock order has it
// (docs/storage.md, "Lock order": the thread, the fence's claim, the
// receipt). When the pair said exactly this already, it answers with the
// stored receipt and changed false, so that a retried report does not move
// updated_at, even when two bridges race.
func (e *Engine) PutReceiptIn(ctx context.Context, c Conn, in agentbridge.ReceiptInput) (_ agentbridge.Receipt, changed bool, err error) {
	var one int
	found, err := Found(c.QueryRow(ctx, `SELECT 1 FROM events WHERE id = ? AND thread = ?`, in.Event, in.Thread).Scan(&one))
	switch {
	case err != nil:
		return agentbridge.Receipt{}, false, fmt.Errorf("look up receipt event: %w", err)
	case !found:
		return agentbridge.Receipt{}, false, ReceiptEventNotFound(in)
	}
	if in.Fence != nil {
		refusal, err := ClaimSQL{E: e, C: c}.CheckFence(ctx, *in.Fence)
		if err != nil {
			return agentbridge.Receipt{}, false, err
		}
		if refusal != nil {
			return agentbridge.Receipt{}, false, refusal
		}
	}
	now := agentbridge.FormatTime(time.Now().UTC().Truncate(time.Microsecond))
	out, err := ScanReceipt(c.QueryRow(ctx, `INSERT INTO receipts (thread, `+ReceiptColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (thread, event, participant) DO UPDATE SET
			sender = excluded.sender, state = excluded.state, reason = excluded.reason,
			invocation = excluded.invocation, reply = excluded.reply, updated_at = excluded.updated_at
		WHERE (receipts.state, receipts.reason, receipts.invocation, receipts.reply)
			<> (excluded.state, excluded.reason, excluded.invocation, excluded.reply)
		RETURNING `+ReceiptColumns,
		in.Thread, in.Event, in.Participant, in.From, in.State, in.Reason, in.Invocation, in.Reply, now))
	if changed, err = Found(err); err != nil {
		return agentbridge.Receipt{}, false, fmt.Errorf("store receipt: %w", err)
	}
	if !changed {
		out, err = ScanReceipt(c.QueryRow(ctx, `SELECT `+ReceiptColumns+` FROM receipts
			WHERE thread = ? AND event = ? AND participant = ?`, in.Thread, in.Event, in.Participant))
		if err != nil {
			return agentbridge.Receipt{}, false, fmt.Errorf("load receipt: %w", err)
		}
	}
	out.Thread = in.Thread
	return out, changed, nil
}

// Receipts reads a thread's receipts (agentbridge.ReceiptsQuery): one seek
// on the table's key (thread, event, participant), then a range.
func (e *Engine) Receipts(ctx context.Context, q agentbridge.ReceiptsQuery) (_ []agentbridge.Receipt, err error) {
	defer e.Guard(time.Now(), &err)
	if _, err := e.Thread(ctx, q.Thread); err != nil {
		return nil, err
	}
	query, from := `SELECT `+ReceiptColumns+` FROM receipts WHERE thread = ? AND event >= ? ORDER BY event, participant LIMIT ?`, q.FromEvent
	if q.Event != "" {
		query, from = `SELECT `+ReceiptColumns+` FROM receipts WHERE thread = ? AND event = ? ORDER BY participant LIMIT ?`, q.Event
	}
	list, err := List(ctx, e.Read, "receipts", ScanReceipt, query, q.Thread, from, ReceiptsLimit(q))
	if err != nil {
		return nil, fmt.Errorf("list receipts of %s: %w", q.Thread, err)
	}
	return list, nil
}

// ReceiptsLimit is q's limit within 1 … MaxEventsLimit (0 or out of range:
// MaxEventsLimit).
func ReceiptsLimit(q agentbridge.ReceiptsQuery) int {
	if q.Limit <= 0 || q.Limit > agentbridge.MaxEventsLimit {
		return agentbridge.MaxEventsLimit
	}
	return q.Limit
}
