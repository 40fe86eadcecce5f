package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

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
	return out, changed, nil
}

// putReceiptTx stores in as its pair's latest receipt in tx
// (storecore.PutReceiptIn) and announces a change to the other bridges
// at COMMIT.
func (s *Store) putReceiptTx(ctx context.Context, tx pgx.Tx, in agentbridge.ReceiptInput) (out agentbridge.Receipt, changed bool, err error) {
	if found, err := threadExists(ctx, tx, in.Thread); err != nil || !found {
		if err == nil {
			err = agentbridge.ThreadNotFound(in.Thread)
		}
		return out, false, err
	}
	if out, changed, err = s.PutReceiptIn(ctx, pgConn{tx}, in); err != nil || !changed {
		return out, changed, err
	}
	// Delivered at COMMIT, to every bridge on the database.
	notice, err := json.Marshal(receiptNotice{Origin: s.origin, Receipt: out})
	if err != nil {
		return out, false, fmt.Errorf("encode receipt notice: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, receiptChannel, string(notice)); err != nil {
		return out, false, fmt.Errorf("announce receipt: %w", err)
	}
	return out, true, nil
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
