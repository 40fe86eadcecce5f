package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

const receiptColumns = storecore.ReceiptColumns

// PutReceipt stores in as its pair's latest receipt. Receipts are not
// events (no gseq), so they skip the writer: one statement inserts or
// updates the pair's row only when it says something new, which keeps a
// retried report from moving updated_at even when two bridges race.
func (s *Store) PutReceipt(ctx context.Context, in agentbridge.ReceiptInput) (_ agentbridge.Receipt, _ bool, err error) {
	defer s.GuardWrite(time.Now(), &err)
	if err := storecore.CheckReceipt(in); err != nil {
		return agentbridge.Receipt{}, false, err
	}
	var out agentbridge.Receipt
	var changed bool
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, changed, err = s.putReceiptTx(ctx, tx, in)
		return err
	})
	if err != nil {
		return agentbridge.Receipt{}, false, err
	}
	out.Thread = in.Thread
	return out, changed, nil
}

// putReceiptTx stores in as its pair's latest receipt in tx, after
// checking its thread, its event and its fence, and announces a change to
// the other bridges at COMMIT. Its locks follow the one order: the
// thread's row first (FOR KEY SHARE, the lock the receipt's foreign key
// takes anyway; no writer's lock conflicts with it), then the fence's
// claim, then the receipt.
func (s *Store) putReceiptTx(ctx context.Context, tx pgx.Tx, in agentbridge.ReceiptInput) (out agentbridge.Receipt, changed bool, err error) {
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM threads WHERE id = $1 FOR KEY SHARE`, in.Thread).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, false, agentbridge.ThreadNotFound(in.Thread)
	}
	if err != nil {
		return out, false, fmt.Errorf("look up thread %s: %w", in.Thread, err)
	}
	err = tx.QueryRow(ctx, `SELECT 1 FROM events WHERE id = $1 AND thread = $2`, in.Event, in.Thread).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, false, storecore.ReceiptEventNotFound(in)
	}
	if err != nil {
		return out, false, fmt.Errorf("look up receipt event: %w", err)
	}
	if in.Fence != nil {
		if err := s.checkFence(ctx, tx, *in.Fence); err != nil {
			return out, false, err
		}
	}
	now := agentbridge.FormatTime(time.Now().UTC().Truncate(time.Microsecond))
	out, err = storecore.ScanReceipt(tx.QueryRow(ctx, `INSERT INTO receipts (thread, `+receiptColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (thread, event, participant) DO UPDATE SET
			sender = excluded.sender, state = excluded.state, reason = excluded.reason,
			invocation = excluded.invocation, reply = excluded.reply, updated_at = excluded.updated_at
		WHERE (receipts.state, receipts.reason, receipts.invocation, receipts.reply)
			IS DISTINCT FROM (excluded.state, excluded.reason, excluded.invocation, excluded.reply)
		RETURNING `+receiptColumns,
		in.Thread, in.Event, in.Participant, in.From, in.State, in.Reason, in.Invocation, in.Reply, now))
	if err == nil {
		// Delivered at COMMIT, to every bridge on the database.
		out.Thread = in.Thread
		notice, err := json.Marshal(receiptNotice{Origin: s.origin, Receipt: out})
		if err != nil {
			return out, false, fmt.Errorf("encode receipt notice: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, receiptChannel, string(notice)); err != nil {
			return out, false, fmt.Errorf("announce receipt: %w", err)
		}
		return out, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return out, false, fmt.Errorf("store receipt: %w", err)
	}
	// The pair already said exactly this: answer with it as it is.
	out, err = storecore.ScanReceipt(tx.QueryRow(ctx, `SELECT `+receiptColumns+` FROM receipts
		WHERE thread = $1 AND event = $2 AND participant = $3`, in.Thread, in.Event, in.Participant))
	if err != nil {
		return out, false, fmt.Errorf("load receipt: %w", err)
	}
	out.Thread = in.Thread
	return out, false, nil
}

// receiptNotice is the payload of a receiptChannel notification: the
// receipt as stored and the store that stored it. A receipt fits in
// PostgreSQL's 8000-byte payload: its fields are capped (MaxReceiptReason,
// MaxReceiptID), at most about 3 KB once JSON-escaped.
type receiptNotice struct {
	Origin  string              `json:"origin"`
	Receipt agentbridge.Receipt `json:"receipt"`
}

// WatchReceipts registers fn for the receipts other processes store
// (agentbridge.ReceiptWatcher); the listener calls it.
func (s *Store) WatchReceipts(fn func(agentbridge.Receipt)) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	s.watchers = append(s.watchers, fn)
}

// receiptNoticed hands a receipt another process stored to the watchers.
// This store's own notices are skipped: its bridge announced them already.
func (s *Store) receiptNoticed(payload string) {
	var n receiptNotice
	if err := json.Unmarshal([]byte(payload), &n); err != nil {
		s.Log.Warn("unreadable receipt notice", "err", err)
		return
	}
	if n.Origin == s.origin {
		return
	}
	s.watchMu.Lock()
	watchers := slices.Clone(s.watchers)
	s.watchMu.Unlock()
	for _, fn := range watchers {
		fn(n.Receipt)
	}
}
