package coordinator

import (
	"context"
	"fmt"
)

// After a restore of the bridge from an older backup, the bridge's log
// after the backup's last event is not the one the coordinator read: its
// gseqs and seqs repeat ones the cursors passed, with other events. The
// coordinator learns it in two ways (docs/delivery.md, "After a restore"):
//
//   - the bridge's log epoch (agentbridge.LogEpoch, on GET /ping) is not the
//     one its cursors were kept in: checked before following and before
//     every reconnection, so a restore is seen however many events were
//     posted since;
//   - the bridge answers cursor_ahead: its log ends before the cursor (a
//     bridge that keeps no epoch, PostgreSQL).
//
// Either way it rebases: the global cursor goes back to where the two logs
// part (the epoch's base, or the head), every thread cursor is dropped, the
// cached thread states are forgotten, and one line says what it did. Every
// event after that point is then read and decided as new.

// checkEpoch compares the bridge's log epoch with the one the cursors were
// kept in, and returns the cursor to read from: cursor itself, or the
// epoch's base when the log was restored since. A first meeting (a fresh
// ledger, or a bridge that has just started keeping epochs) records the
// epoch and keeps the cursor; so does rebase false (startup_mode end, where
// the cursor was just set to the head of this very log). A bridge that
// keeps no epoch, or does not answer, leaves the cursor as it is.
func (c *Coordinator) checkEpoch(ctx context.Context, cursor int64, rebase bool) (int64, error) {
	info, err := c.bridge.Ping(ctx)
	if err != nil || info.Epoch == nil {
		// The connection that follows fails the same way and is retried;
		// without epochs, cursor_ahead still catches a shorter log.
		return cursor, nil
	}
	stored, ok, err := c.db.BridgeEpoch(ctx)
	if err != nil {
		return 0, err
	}
	switch {
	case ok && stored == info.Epoch.ID:
		return cursor, nil
	case !ok || !rebase:
		if err := c.db.SetBridgeEpoch(ctx, info.Epoch.ID); err != nil {
			return 0, err
		}
		return cursor, nil
	}
	return c.rebase(ctx, cursor, min(cursor, info.Epoch.Base), info.Epoch.ID, "the bridge's log was restored from a backup")
}

// cursorAhead handles the bridge's cursor_ahead answer (its log ends at
// head, before the cursor): a restore, which the epoch tells unless the
// bridge keeps none.
func (c *Coordinator) cursorAhead(ctx context.Context, cursor, head int64) (int64, error) {
	if to, err := c.checkEpoch(ctx, cursor, true); err != nil || to <= head {
		return to, err
	}
	return c.rebase(ctx, cursor, head, 0, "the bridge's log ends before our cursor")
}

// rebase moves the cursors back to gseq for a log that parts from the one
// read after it, and says so once.
func (c *Coordinator) rebase(ctx context.Context, from, to, epoch int64, why string) (int64, error) {
	dropped, err := c.db.Rebase(ctx, to, epoch)
	if err != nil {
		return 0, fmt.Errorf("rebase on the bridge's restored log: %w", err)
	}
	c.dropStaged()
	c.threads.Reset()
	c.cursor.Store(to)
	c.log.Warn(why+"; answering every event after the point where the logs part",
		"cursor", from, "rebased_to", to, "thread_cursors_dropped", dropped)
	return to, nil
}
