package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// selectEvent selects the columns storecore.ScanEvent reads.
const selectEvent = `SELECT ` + storecore.EventColumns + ` FROM events`

// selectThread reads threads with their heads (storecore.ScanThread).
const selectThread = `SELECT ` + storecore.ThreadColumns + ` FROM threads`

// reads are the engine's read queries in PostgreSQL (storecore.ReadSQL).
// Every event with a smaller gseq than one a reader sees has committed
// before it (see write), so a follower never skips one.
var reads = &storecore.ReadSQL{
	LastSeq:         `SELECT last_seq FROM threads WHERE id = ?`,
	Range:           selectEvent + ` WHERE thread = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`,
	GlobalRange:     selectEvent + ` WHERE gseq > ? ORDER BY gseq LIMIT ?`,
	Head:            `SELECT gseq FROM log_head`,
	State:           `SELECT last_seq, state, last_hop FROM threads WHERE id = ?`,
	SnapshotAt:      `SELECT state FROM state_snapshots WHERE thread = ? AND seq <= ? ORDER BY seq DESC LIMIT 1`,
	HopAt:           `SELECT hop FROM events WHERE thread = ? AND seq = ?`,
	ThreadsFirst:    selectThread + ` ORDER BY updated_at DESC, id DESC LIMIT ?`,
	ThreadUpdatedAt: `SELECT updated_at FROM threads WHERE id = ?`,
	ThreadsAfter:    selectThread + ` WHERE (updated_at, id) < (?, ?) ORDER BY updated_at DESC, id DESC LIMIT ?`,
	NoLimit:         nil, // LIMIT NULL
	FirstAfter: func(ctx context.Context, c storecore.Conn, thread, since string, last int64) (int64, error) {
		// ts compares as bytes: the column's collation is C.
		var first *int64
		if err := c.QueryRow(ctx, `SELECT min(seq) FROM events WHERE thread = ? AND ts > ?`, thread, since).Scan(&first); err != nil {
			return 0, fmt.Errorf("look up since: %w", err)
		}
		if first == nil {
			return last + 1, nil
		}
		return *first, nil
	},
}

// readTx runs fn in a read-only REPEATABLE READ transaction, so that the
// several queries of one answer see one snapshot of the log.
func (s *Store) readTx(ctx context.Context, fn func(ctx context.Context, c storecore.Conn) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(ctx, pgConn{tx}) })
}
