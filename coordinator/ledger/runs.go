package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Retention of progress records (contract 5.3).
const (
	// KeepProgress is how many records are kept per invocation: the
	// latest ones.
	KeepProgress = 500
	// MaxProgressRecord bounds one stored record (status, kind and
	// detail); a larger one loses its detail.
	MaxProgressRecord = 8 << 10
	// insertChunk is how many records one INSERT stores (5 parameters
	// each, well under SQLite's limit of 32,766).
	insertChunk = 100
)

// Progress is one stored progress record of an invocation.
type Progress struct {
	// ID orders records across the ledger; a follower asks for those
	// after the last one it saw. It is not set on records being stored.
	ID     int64           `json:"id"`
	TS     string          `json:"ts"`
	Status string          `json:"status"`
	Kind   string          `json:"kind"`
	Detail json.RawMessage `json:"detail"`
}

// Usage is a run's cumulative usage.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
}

// ProgressBatch is what one invocation reported since the last flush.
type ProgressBatch struct {
	Invocation int64
	// Records are the new records, oldest first; only the last
	// KeepProgress of them matter.
	Records []Progress
	// Count is the number of records received since the last flush,
	// including any dropped before they reached the batch.
	Count int64
	// Usage is the latest usage reported, nil when none was.
	Usage *Usage
}

// AddProgress stores the batches in one transaction, trims each
// invocation's records to the last KeepProgress and sets its usage, so a
// flood of progress costs one commit per flush, not per line.
func (d *DB) AddProgress(ctx context.Context, batches []ProgressBatch) error {
	if len(batches) == 0 {
		return nil
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	for _, b := range batches {
		recs := b.Records
		if len(recs) > KeepProgress {
			recs = recs[len(recs)-KeepProgress:]
		}
		// Many rows per statement: a flood's flush is a few statements,
		// not one round trip through the driver per record.
		for len(recs) > 0 {
			chunk := recs[:min(len(recs), insertChunk)]
			recs = recs[len(chunk):]
			q := strings.Builder{}
			q.WriteString(`INSERT INTO progress (invocation_id, ts, status, kind, detail) VALUES `)
			args := make([]any, 0, 5*len(chunk))
			for i, r := range chunk {
				if i > 0 {
					q.WriteString(", ")
				}
				q.WriteString("(?, ?, ?, ?, ?)")
				r = clipProgress(r)
				args = append(args, b.Invocation, r.TS, r.Status, r.Kind, string(r.Detail))
			}
			if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
				return fmt.Errorf("store progress of invocation %d: %w", b.Invocation, err)
			}
		}
		if len(b.Records) > 0 {
			_, err := tx.ExecContext(ctx, `DELETE FROM progress WHERE invocation_id = ? AND id <= (
				SELECT id FROM progress WHERE invocation_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
				b.Invocation, b.Invocation, KeepProgress)
			if err != nil {
				return fmt.Errorf("trim progress of invocation %d: %w", b.Invocation, err)
			}
		}
		q := `UPDATE invocations SET progress_count = progress_count + ? WHERE id = ?`
		args := []any{b.Count, b.Invocation}
		if u := b.Usage; u != nil {
			q = `UPDATE invocations SET progress_count = progress_count + ?, input_tokens = ?, output_tokens = ?, cost_usd = ? WHERE id = ?`
			args = []any{b.Count, u.InputTokens, u.OutputTokens, u.CostUSD, b.Invocation}
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("count progress of invocation %d: %w", b.Invocation, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit progress: %w", err)
	}
	return nil
}

// clipProgress keeps a record within MaxProgressRecord: the detail goes
// first, then the status is cut.
func clipProgress(r Progress) Progress {
	if len(r.Status)+len(r.Kind)+len(r.Detail) <= MaxProgressRecord {
		return r
	}
	r.Detail = nil
	if len(r.Kind) > 64 {
		r.Kind = r.Kind[:64]
	}
	if max := MaxProgressRecord - len(r.Kind); len(r.Status) > max {
		// A rune cut in two at the end is dropped.
		r.Status = strings.ToValidUTF8(r.Status[:max], "")
	}
	return r
}

// ProgressOf returns an invocation's kept progress records, oldest first,
// those after the record numbered after (0 for all) and the number of the
// last one returned, so a follower can ask for what is new.
func (d *DB) ProgressOf(ctx context.Context, id, after int64) ([]Progress, int64, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT id, ts, status, kind, detail FROM progress
		WHERE invocation_id = ? AND id > ? ORDER BY id`, id, after)
	if err != nil {
		return nil, after, fmt.Errorf("read progress of invocation %d: %w", id, err)
	}
	defer rows.Close()
	out := []Progress{}
	last := after
	for rows.Next() {
		var p Progress
		var detail string
		if err := rows.Scan(&p.ID, &p.TS, &p.Status, &p.Kind, &detail); err != nil {
			return nil, after, fmt.Errorf("scan progress: %w", err)
		}
		if detail != "" {
			p.Detail = json.RawMessage(detail)
		}
		last = p.ID
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, after, fmt.Errorf("read progress of invocation %d: %w", id, err)
	}
	return out, last, nil
}

// Invocation returns one invocation record, or ErrNotFound.
func (d *DB) Invocation(ctx context.Context, id int64) (Invocation, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+invocationColumns+` FROM invocations WHERE id = ?`, id)
	if err != nil {
		return Invocation{}, fmt.Errorf("read invocation %d: %w", id, err)
	}
	invs, err := scanInvocations(rows)
	if err != nil {
		return Invocation{}, err
	}
	if len(invs) == 0 {
		return Invocation{}, ErrNotFound
	}
	return invs[0], nil
}

// ErrNotRunning is returned by Cancel for an invocation that has already
// ended (or whose outcome is recorded and being posted).
var ErrNotRunning = errors.New("the invocation is not queued or running")

// Cancel marks an invocation cancelled if it has not ended, and returns
// the status it had (queued, running or interrupted). When it was running,
// notice (if its Kind is set) is recorded in the same transaction, so the
// thread gets exactly one notice per stopped run. An invocation whose
// outcome is already recorded is left alone: ErrNotRunning.
func (d *DB) Cancel(ctx context.Context, id int64, reason string, notice Notice) (string, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	var prev string
	err = tx.QueryRowContext(ctx, `SELECT status FROM invocations WHERE id = ? AND owner = ?`, id, tx.owner).Scan(&prev)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("read invocation %d: %w", id, err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE invocations SET status = ?, error = ?
		WHERE id = ? AND status IN (?, ?, ?) AND pending_post = '' AND reply_event_id = ''`,
		StatusCancelled, reason, id, StatusQueued, StatusRunning, StatusInterrupted)
	if err != nil {
		return "", fmt.Errorf("cancel invocation %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return prev, ErrNotRunning
	}
	if prev == StatusRunning && notice.Kind != "" {
		if err := insertNotices(ctx, tx, []Notice{notice}); err != nil {
			return "", fmt.Errorf("record cancel notice: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("commit cancel: %w", err)
	}
	return prev, nil
}

// Active returns this coordinator's queued, running and interrupted
// invocations of a participant in a thread, oldest first: what a cancel
// control stops here.
func (d *DB) Active(ctx context.Context, thread, participant string) ([]Invocation, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+invocationColumns+` FROM invocations
		WHERE owner = ? AND thread = ? AND participant = ? AND status IN (?, ?, ?) AND pending_post = '' AND reply_event_id = '' ORDER BY id`,
		d.db.owner, thread, participant, StatusQueued, StatusRunning, StatusInterrupted)
	if err != nil {
		return nil, fmt.Errorf("list active invocations: %w", err)
	}
	return scanInvocations(rows)
}
