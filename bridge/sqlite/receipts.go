package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// Receipt statements. Receipts are rare next to appends (a few per
// invocation), so they are not prepared up front like the writer's hot
// statements; the driver caches them on the writer's connection.
const (
	rSelectOne = `SELECT sender, state, reason, invocation, reply, updated_at
		FROM receipts WHERE thread = ? AND event = ? AND participant = ?`
	rUpsert = `INSERT INTO receipts (thread, event, participant, sender, state, reason, invocation, reply, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (thread, event, participant) DO UPDATE SET
			sender = excluded.sender, state = excluded.state, reason = excluded.reason,
			invocation = excluded.invocation, reply = excluded.reply, updated_at = excluded.updated_at`
)

// PutReceipt stores in as its pair's latest receipt through the writer
// goroutine, so that it commits in order with the appends it refers to
// (a receipt for an event appended a moment ago finds it) and never races
// another write for the file.
func (s *Store) PutReceipt(ctx context.Context, in agentbridge.ReceiptInput) (_ agentbridge.Receipt, _ bool, err error) {
	defer s.GuardWrite(time.Now(), &err)
	if err := storecore.CheckReceipt(in); err != nil {
		return agentbridge.Receipt{}, false, err
	}
	r := s.newRequest(ctx)
	r.receipt = &in
	resp := s.submit(ctx, r)
	if resp.err != nil {
		return agentbridge.Receipt{}, false, resp.err
	}
	return resp.rcpt, resp.changed, nil
}

// putReceipt runs inside a group commit: a refusal comes back in the
// response and writes nothing; an error fails the batch.
func (s *Store) putReceipt(ctx context.Context, b *batch, in agentbridge.ReceiptInput) (response, error) {
	if _, found, err := s.headOf(ctx, b, in.Thread); err != nil {
		return response{}, err
	} else if !found {
		return response{err: agentbridge.ThreadNotFound(in.Thread), isReceipt: true}, nil
	}
	var hop int
	var seq int64
	err := s.w.st.selectReplyTo.QueryRowContext(ctx, in.Event, in.Thread).Scan(&hop, &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return response{err: storecore.ReceiptEventNotFound(in), isReceipt: true}, nil
	}
	if err != nil {
		return response{}, fmt.Errorf("look up receipt event: %w", err)
	}
	if in.Fence != nil {
		if refusal, err := s.claimSQL().CheckFence(ctx, *in.Fence); err != nil || refusal != nil {
			return response{err: refusal, isReceipt: true}, err
		}
	}
	old := agentbridge.Receipt{Thread: in.Thread, Event: in.Event, Participant: in.Participant}
	err = s.w.conn.QueryRowContext(ctx, rSelectOne, in.Thread, in.Event, in.Participant).
		Scan(&old.From, &old.State, &old.Reason, &old.Invocation, &old.Reply, &old.UpdatedAt)
	switch {
	case err == nil:
		if old.State == in.State && old.Reason == in.Reason && old.Invocation == in.Invocation && old.Reply == in.Reply {
			return response{rcpt: old, isReceipt: true}, nil
		}
	case !errors.Is(err, sql.ErrNoRows):
		return response{}, fmt.Errorf("load receipt: %w", err)
	}
	rc := agentbridge.Receipt{
		Thread: in.Thread, Event: in.Event, Participant: in.Participant, From: in.From,
		State: in.State, Reason: in.Reason, Invocation: in.Invocation, Reply: in.Reply,
		UpdatedAt: agentbridge.FormatTime(time.Now().UTC().Truncate(time.Microsecond)),
	}
	if _, err := s.w.conn.ExecContext(ctx, rUpsert, rc.Thread, rc.Event, rc.Participant, rc.From,
		rc.State, rc.Reason, rc.Invocation, rc.Reply, rc.UpdatedAt); err != nil {
		return response{}, fmt.Errorf("store receipt: %w", err)
	}
	return response{rcpt: rc, changed: true, isReceipt: true}, nil
}

// WatchReceipts registers nothing (agentbridge.ReceiptWatcher): only this
// process writes the file, so no receipt is stored elsewhere.
func (s *Store) WatchReceipts(func(agentbridge.Receipt)) {}
