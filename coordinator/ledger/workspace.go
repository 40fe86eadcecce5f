package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Worktree states.
const (
	WorktreeMaking   = "making"
	WorktreeReady    = "ready"
	WorktreeRemoving = "removing"
)

// Worktree is one (thread, participant) worktree this coordinator made
// (contract 8.1).
type Worktree struct {
	Thread      string `json:"thread"`
	Participant string `json:"participant"`
	Workspace   string `json:"workspace"`
	Repo        string `json:"repo"`
	Path        string `json:"path"`
	Branch      string `json:"branch"`
	Base        string `json:"base"`
	State       string `json:"state"`
	CreatedAt   string `json:"created_at"`
}

const worktreeColumns = `thread, participant, workspace, repo, path, branch, base, state, created_at`

func scanWorktree(r interface{ Scan(...any) error }) (Worktree, error) {
	var w Worktree
	err := r.Scan(&w.Thread, &w.Participant, &w.Workspace, &w.Repo, &w.Path, &w.Branch, &w.Base, &w.State, &w.CreatedAt)
	return w, err
}

// BeginWorktree records that w (state making) is being made, unless the
// pair has a worktree row already; it returns the pair's row either way.
func (d *DB) BeginWorktree(ctx context.Context, w Worktree) (Worktree, error) {
	_, err := d.db.ExecContext(ctx, `INSERT INTO worktrees (owner, `+worktreeColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (owner, thread, participant) DO NOTHING`, d.db.owner, w.Thread, w.Participant, w.Workspace, w.Repo, w.Path,
		w.Branch, w.Base, WorktreeMaking, agentbridge.FormatTime(time.Now()))
	if err != nil {
		return Worktree{}, fmt.Errorf("record the worktree of %s in %s: %w", w.Participant, w.Thread, err)
	}
	got, ok, err := d.Worktree(ctx, w.Thread, w.Participant)
	if err == nil && !ok {
		err = fmt.Errorf("the worktree of %s in %s was removed meanwhile", w.Participant, w.Thread)
	}
	return got, err
}

// Worktree returns the pair's worktree row; ok is false when it has none.
func (d *DB) Worktree(ctx context.Context, thread, participant string) (Worktree, bool, error) {
	w, err := scanWorktree(d.db.QueryRowContext(ctx, `SELECT `+worktreeColumns+` FROM worktrees WHERE owner = ? AND thread = ? AND participant = ?`,
		d.db.owner, thread, participant))
	if errors.Is(err, sql.ErrNoRows) {
		return Worktree{}, false, nil
	}
	if err != nil {
		return Worktree{}, false, fmt.Errorf("read the worktree of %s in %s: %w", participant, thread, err)
	}
	return w, true, nil
}

// Worktrees lists this coordinator's worktrees, of one thread when thread
// is not empty, oldest first.
func (d *DB) Worktrees(ctx context.Context, thread string) ([]Worktree, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+worktreeColumns+` FROM worktrees WHERE owner = ? AND (? = '' OR thread = ?) ORDER BY created_at, thread, participant`,
		d.db.owner, thread, thread)
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	defer rows.Close()
	var out []Worktree
	for rows.Next() {
		w, err := scanWorktree(rows)
		if err != nil {
			return nil, fmt.Errorf("scan worktree: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	return out, nil
}

// SetWorktreeState moves the pair's worktree row to state.
func (d *DB) SetWorktreeState(ctx context.Context, thread, participant, state string) error {
	_, err := d.db.ExecContext(ctx, `UPDATE worktrees SET state = ? WHERE owner = ? AND thread = ? AND participant = ?`, state, d.db.owner, thread, participant)
	if err != nil {
		return fmt.Errorf("mark the worktree of %s in %s %s: %w", participant, thread, state, err)
	}
	return nil
}

// DeleteWorktree forgets the pair's worktree, once it and its branch are
// removed.
func (d *DB) DeleteWorktree(ctx context.Context, thread, participant string) error {
	_, err := d.db.ExecContext(ctx, `DELETE FROM worktrees WHERE owner = ? AND thread = ? AND participant = ?`, d.db.owner, thread, participant)
	if err != nil {
		return fmt.Errorf("forget the worktree of %s in %s: %w", participant, thread, err)
	}
	return nil
}

// RunParent records parent, the worktree's HEAD when invocation id's run
// begins, unless a run of it began before (a crash cut it short): it
// returns the first run's parent, which the run starts again from, and
// again set for such a run.
func (d *DB) RunParent(ctx context.Context, id int64, parent string) (first string, again bool, err error) {
	if err := d.db.QueryRowContext(ctx, `SELECT ws_parent FROM invocations WHERE id = ?`, id).Scan(&first); err != nil {
		return "", false, fmt.Errorf("read the worktree parent of invocation %d: %w", id, err)
	}
	if first != "" {
		return first, true, nil
	}
	if _, err := d.db.ExecContext(ctx, `UPDATE invocations SET ws_parent = ? WHERE id = ? AND ws_parent = ''`, parent, id); err != nil {
		return "", false, fmt.Errorf("record the worktree parent of invocation %d: %w", id, err)
	}
	return parent, false, nil
}

// Change operations and their states.
const (
	OpMerge   = "merge"
	OpDiscard = "discard"

	OpBegun     = "begun"
	OpCommitted = "committed"
	OpMerged    = "merged"
	OpDiscarded = "discarded"
	OpRefused   = "refused"
	OpDone      = "done"
)

// ChangeOp is a person's merge or discard of a participant's branch, by
// its control event.
type ChangeOp struct {
	EventID     string `json:"event_id"`
	Thread      string `json:"thread"`
	Participant string `json:"participant"`
	Op          string `json:"op"`
	Into        string `json:"into,omitempty"`
	Squash      bool   `json:"squash,omitempty"`
	Sender      string `json:"sender"`
	State       string `json:"state"`
	From        string `json:"from_commit,omitempty"`
	Commit      string `json:"merge_commit,omitempty"`
}

const changeOpColumns = `event_id, thread, participant, op, into_branch, squash, sender, state, from_commit, merge_commit`

func scanChangeOp(r interface{ Scan(...any) error }) (ChangeOp, error) {
	var o ChangeOp
	err := r.Scan(&o.EventID, &o.Thread, &o.Participant, &o.Op, &o.Into, &o.Squash, &o.Sender, &o.State, &o.From, &o.Commit)
	return o, err
}

// BeginChangeOp records o (state begun) unless its event's op is recorded
// already: the follow loop records it before its cursor passes the
// control, so a crash in between records it again, once.
func (d *DB) BeginChangeOp(ctx context.Context, o ChangeOp) error {
	_, err := d.db.ExecContext(ctx, `INSERT INTO change_ops (owner, `+changeOpColumns+`, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', ?)
		ON CONFLICT (owner, event_id) DO NOTHING`, d.db.owner, o.EventID, o.Thread, o.Participant, o.Op, o.Into, o.Squash, o.Sender,
		OpBegun, agentbridge.FormatTime(time.Now()))
	if err != nil {
		return fmt.Errorf("record the %s of %s in %s: %w", o.Op, o.Participant, o.Thread, err)
	}
	return nil
}

// ChangeOp returns the op recorded for a control event, or ErrNotFound.
func (d *DB) ChangeOp(ctx context.Context, eventID string) (ChangeOp, error) {
	o, err := scanChangeOp(d.db.QueryRowContext(ctx, `SELECT `+changeOpColumns+` FROM change_ops WHERE owner = ? AND event_id = ?`, d.db.owner, eventID))
	if errors.Is(err, sql.ErrNoRows) {
		return ChangeOp{}, ErrNotFound
	}
	if err != nil {
		return ChangeOp{}, fmt.Errorf("read change op %s: %w", eventID, err)
	}
	return o, nil
}

// OpenChangeOps lists the ops not done yet, oldest first: a restart
// finishes them.
func (d *DB) OpenChangeOps(ctx context.Context) ([]ChangeOp, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+changeOpColumns+` FROM change_ops WHERE owner = ? AND state != ? ORDER BY created_at, event_id`, d.db.owner, OpDone)
	if err != nil {
		return nil, fmt.Errorf("list open change ops: %w", err)
	}
	defer rows.Close()
	var out []ChangeOp
	for rows.Next() {
		o, err := scanChangeOp(rows)
		if err != nil {
			return nil, fmt.Errorf("scan change op: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list open change ops: %w", err)
	}
	return out, nil
}

// MergeCommitted records the merge commit an op made and the tip of the
// branch it goes on, before the repository is moved to it.
func (d *DB) MergeCommitted(ctx context.Context, eventID, from, commit string) error {
	_, err := d.db.ExecContext(ctx, `UPDATE change_ops SET state = ?, from_commit = ?, merge_commit = ? WHERE owner = ? AND event_id = ? AND state = ?`,
		OpCommitted, from, commit, d.db.owner, eventID, OpBegun)
	if err != nil {
		return fmt.Errorf("record the merge commit of %s: %w", eventID, err)
	}
	return nil
}

// EndChangeOp records the op's outcome (merged, discarded or refused) and
// the notice that says it, in one transaction: the notice is then posted
// once (PendingNotices after a crash). A merged or discarded op marks the
// pair's worktree removing. ended is false when the op had ended already
// (nothing is recorded then, and no notice is owed).
func (d *DB) EndChangeOp(ctx context.Context, o ChangeOp, state string, n Notice) (ended bool, err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("end change op %s: %w", o.EventID, err)
	}
	defer tx.Rollback()
	stored := state
	if state == OpRefused {
		stored = OpDone // nothing to remove
	}
	res, err := tx.ExecContext(ctx, `UPDATE change_ops SET state = ? WHERE owner = ? AND event_id = ? AND state IN (?, ?)`,
		stored, tx.owner, o.EventID, OpBegun, OpCommitted)
	if err != nil {
		return false, fmt.Errorf("end change op %s: %w", o.EventID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err // ended already
	}
	if err := insertNotices(ctx, tx, []Notice{n}); err != nil {
		return false, err
	}
	if state == OpMerged || state == OpDiscarded {
		if _, err := tx.ExecContext(ctx, `UPDATE worktrees SET state = ? WHERE owner = ? AND thread = ? AND participant = ?`,
			WorktreeRemoving, tx.owner, o.Thread, o.Participant); err != nil {
			return false, fmt.Errorf("mark the worktree of %s removing: %w", o.Participant, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("end change op %s: commit: %w", o.EventID, err)
	}
	return true, nil
}

// ChangeOpDone closes an op whose worktree removal (if any) is done.
func (d *DB) ChangeOpDone(ctx context.Context, eventID string) error {
	_, err := d.db.ExecContext(ctx, `UPDATE change_ops SET state = ? WHERE owner = ? AND event_id = ?`, OpDone, d.db.owner, eventID)
	if err != nil {
		return fmt.Errorf("close change op %s: %w", eventID, err)
	}
	return nil
}
