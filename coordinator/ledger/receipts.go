package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// PairState is what the receipt reporter needs of an invocation: its pair,
// its status and the reply (or error notice) posted for it.
type PairState struct {
	ID           int64
	Thread       string
	TriggerID    string
	Participant  string
	Status       string
	ReplyEventID string
	// Pending is true while a post is owed (the run ended, its reply,
	// error notice or cancel notice is not yet in the thread).
	Pending bool
	// ClaimID and ClaimFence are the run's claim at the bridge (0 while
	// not claimed): the pair's receipts carry its fence.
	ClaimID    int64
	ClaimFence int64
	// Failure, HandedTo and FinishedAt say why a failed run failed and
	// where its trigger went (contract 8.5): the receipt's reason.
	Failure    *agentbridge.Failure
	HandedTo   string
	FinishedAt string
}

// DecisionRow is a recorded decision in the order decisions were written.
type DecisionRow struct {
	// Row orders decisions by when they were recorded (SQLite's rowid,
	// which only grows: decisions are never deleted).
	Row      int64
	EventID  string
	Thread   string
	Decision json.RawMessage
}

// ReceiptHeads returns the newest invocation id and decision row, where a
// receipt reporter starting up begins (0 for an empty ledger).
func (d *DB) ReceiptHeads(ctx context.Context) (lastInvocation, lastDecision int64, err error) {
	var inv, dec sql.NullInt64
	if err := d.db.QueryRowContext(ctx, `SELECT (SELECT max(id) FROM invocations WHERE owner = ?), (SELECT max(rowid) FROM decisions WHERE owner = ?)`,
		d.db.owner, d.db.owner).Scan(&inv, &dec); err != nil {
		return 0, 0, fmt.Errorf("read receipt heads: %w", err)
	}
	return inv.Int64, dec.Int64, nil
}

// PairStates returns the invocations with id > after (at most limit, by
// id) and those whose id is in ids, ordered by id.
func (d *DB) PairStates(ctx context.Context, after int64, ids []int64, limit int) ([]PairState, error) {
	// A cancelled run's notice is a notice of kind "cancelled:<participant>"
	// (see the coordinator's cancel), posted after the status changed: its
	// event id is the receipt's reply, and the receipt may change until it
	// is posted.
	q := `SELECT i.id, i.thread, i.trigger_id, i.participant, i.status,
			CASE WHEN i.reply_event_id != '' THEN i.reply_event_id ELSE coalesce(n.posted_event_id, '') END,
			i.pending_post != '' OR (n.trigger_id IS NOT NULL AND n.posted_event_id = ''),
			i.claim_id, i.claim_fence, i.failure_class, i.retry_at, i.handed_to, i.finished_at
		FROM invocations i LEFT JOIN notices n ON n.owner = i.owner AND n.trigger_id = i.trigger_id AND n.kind = 'cancelled:' || i.participant
		WHERE i.owner = ? AND (i.id IN (SELECT id FROM invocations WHERE owner = ? AND id > ? ORDER BY id LIMIT ?)`
	args := []any{d.db.owner, d.db.owner, after, limit}
	if len(ids) > 0 {
		q += ` OR i.id IN (?` + strings.Repeat(`, ?`, len(ids)-1) + `)`
		for _, id := range ids {
			args = append(args, id)
		}
	}
	rows, err := d.db.QueryContext(ctx, q+`) ORDER BY i.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read invocation states: %w", err)
	}
	defer rows.Close()
	var out []PairState
	for rows.Next() {
		var p PairState
		var class, retryAt string
		if err := rows.Scan(&p.ID, &p.Thread, &p.TriggerID, &p.Participant, &p.Status, &p.ReplyEventID, &p.Pending, &p.ClaimID, &p.ClaimFence,
			&class, &retryAt, &p.HandedTo, &p.FinishedAt); err != nil {
			return nil, fmt.Errorf("scan invocation state: %w", err)
		}
		if class != "" {
			p.Failure = &agentbridge.Failure{Class: class, RetryAt: retryAt}
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read invocation states: %w", err)
	}
	return out, nil
}

// DecisionsAfter returns up to limit decisions recorded after row, in the
// order they were recorded.
func (d *DB) DecisionsAfter(ctx context.Context, row int64, limit int) ([]DecisionRow, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT rowid, event_id, thread, decision FROM decisions
		WHERE owner = ? AND rowid > ? ORDER BY rowid LIMIT ?`, d.db.owner, row, limit)
	if err != nil {
		return nil, fmt.Errorf("read decisions: %w", err)
	}
	defer rows.Close()
	var out []DecisionRow
	for rows.Next() {
		var r DecisionRow
		var js string
		if err := rows.Scan(&r.Row, &r.EventID, &r.Thread, &js); err != nil {
			return nil, fmt.Errorf("scan decision: %w", err)
		}
		r.Decision = json.RawMessage(js)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read decisions: %w", err)
	}
	return out, nil
}
