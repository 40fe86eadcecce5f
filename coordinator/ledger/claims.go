package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// SetClaim records the bridge's claim of invocation id's run (contract
// 7.1), before the run starts: the run's writes carry its fence, and the
// receipt reporter writes the pair's receipts only once it is set.
func (d *DB) SetClaim(ctx context.Context, id, claimID, fence int64) error {
	if _, err := d.db.ExecContext(ctx, `UPDATE invocations SET claim_id = ?, claim_fence = ? WHERE id = ?`, claimID, fence, id); err != nil {
		return fmt.Errorf("record the claim of invocation %d: %w", id, err)
	}
	return nil
}

// PrepareFailed counts one more failed attempt to prepare invocation id's
// run, at now, and returns how many failed and when the first did: the
// run's retry budget (contract 8.3), kept across restarts.
func (d *DB) PrepareFailed(ctx context.Context, id int64, now time.Time) (failures int, first time.Time, err error) {
	var firstMs int64
	err = d.db.QueryRowContext(ctx, `UPDATE invocations SET prepare_failures = prepare_failures + 1,
		prepare_first_ms = CASE WHEN prepare_first_ms = 0 THEN ? ELSE prepare_first_ms END
		WHERE id = ? RETURNING prepare_failures, prepare_first_ms`, now.UnixMilli(), id).Scan(&failures, &firstMs)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("count a failed preparation of invocation %d: %w", id, err)
	}
	return failures, time.UnixMilli(firstMs), nil
}

// Elsewhere ends invocation id without a run or a post: another
// coordinator holds its claim, or fenced this one's writes. why names the
// holder. A cancelled invocation stays cancelled.
func (d *DB) Elsewhere(ctx context.Context, id int64, why string) error {
	_, err := d.db.ExecContext(ctx, `UPDATE invocations SET status = ?, error = ?, pending_post = '', pid = 0, pgid = 0
		WHERE id = ? AND status != ?`, StatusElsewhere, why, id, StatusCancelled)
	if err != nil {
		return fmt.Errorf("end invocation %d as run elsewhere: %w", id, err)
	}
	return nil
}

// TakeOver queues inv, a run this coordinator took over at the bridge
// (a claim that waited, or whose holder lapsed), as a decision would: a
// new record, or the pair's existing one reset to queued when it has
// ended (elsewhere, or a run whose reply the thread does not hold), or
// held by another owner of a shared ledger (the bridge granted this claim,
// so that owner's run lapsed). The record becomes this coordinator's. ok
// is false when the pair's record is queued or running here already.
func (d *DB) TakeOver(ctx context.Context, inv Invocation, now time.Time) (queued Invocation, ok bool, err error) {
	cmd, err := json.Marshal(inv.Command)
	if err != nil {
		return inv, false, fmt.Errorf("encode command: %w", err)
	}
	ts := agentbridge.FormatTime(now)
	err = d.db.QueryRowContext(ctx, `INSERT INTO invocations
		(thread, trigger_id, trigger_seq, trigger_gseq, participant, agent, command, hop, status, queued_at, round, claim_id, claim_fence, owner, fallback_from)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (trigger_id, participant, round) DO UPDATE SET status = excluded.status, error = '',
			agent = excluded.agent, command = excluded.command, queued_at = excluded.queued_at,
			started_at = '', finished_at = '', duration_ms = 0, exit_code = NULL, reply_event_id = '', pending_post = '',
			pid = 0, pgid = 0, process_started_at = '', claim_id = excluded.claim_id, claim_fence = excluded.claim_fence, owner = excluded.owner,
			prepare_failures = 0, prepare_first_ms = 0,
			failure_class = '', retry_at = '', handed_to = '', fallback_from = excluded.fallback_from
		WHERE invocations.status NOT IN (?, ?) OR invocations.owner != excluded.owner
		RETURNING id`,
		inv.Thread, inv.TriggerID, inv.TriggerSeq, inv.TriggerGSeq, inv.Participant, inv.Agent, string(cmd), inv.Hop,
		StatusQueued, ts, inv.Round, inv.ClaimID, inv.ClaimFence, d.db.owner, inv.FallbackFrom, StatusQueued, StatusRunning).Scan(&inv.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return inv, false, nil
	}
	if err != nil {
		return inv, false, fmt.Errorf("queue the run taken over: %w", err)
	}
	inv.Status, inv.QueuedAt, inv.Error, inv.Owner = StatusQueued, ts, "", d.db.owner
	inv.Failure, inv.HandedTo = nil, ""
	return inv, true, nil
}
