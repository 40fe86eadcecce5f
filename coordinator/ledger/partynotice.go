package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// NoticeOf returns the notice of kind owed for a trigger, posted or not,
// or ErrNotFound. A coordinator that let another one post a notice it
// owed (the other held the bridge's notice claim) reads it here when that
// claim comes back to it.
func (d *DB) NoticeOf(ctx context.Context, triggerID, kind string) (Notice, error) {
	n := Notice{TriggerID: triggerID, Kind: kind}
	var post string
	err := d.db.QueryRowContext(ctx, `SELECT thread, post FROM notices WHERE trigger_id = ? AND kind = ?`, triggerID, kind).Scan(&n.Thread, &post)
	if errors.Is(err, sql.ErrNoRows) {
		return Notice{}, ErrNotFound
	}
	if err != nil {
		return Notice{}, fmt.Errorf("read notice: %w", err)
	}
	if err := decodeNotice(&n, post); err != nil {
		return Notice{}, err
	}
	return n, nil
}
