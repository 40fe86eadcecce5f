package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// selectEvent selects the columns storecore.ScanEvent reads.
const selectEvent = `SELECT ` + storecore.EventColumns + ` FROM events`

// The read queries that must never scan; TestQueryPlansUseIndexes checks
// each one's plan.
const (
	// sqlThreadRange: events of a thread with lo < seq <= hi, in order.
	sqlThreadRange = selectEvent + ` WHERE thread = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?`
	// sqlTSAt: the ts of one event, a point lookup on events_by_seq;
	// firstAfter's binary search for since=<ts> is made of these.
	sqlTSAt = `SELECT ts FROM events WHERE thread = ? AND seq = ?`
	// sqlGlobalRange: events of all threads with gseq > after, in order.
	sqlGlobalRange = selectEvent + ` WHERE gseq > ? ORDER BY gseq LIMIT ?`
	// sqlHead: the last gseq; a bare MAX over the rowid is answered from
	// the end of the b-tree.
	sqlHead = `SELECT MAX(gseq) FROM events`
	// sqlSnapshotAt: the latest state snapshot at or before a seq.
	sqlSnapshotAt = `SELECT state FROM state_snapshots WHERE thread = ? AND seq <= ? ORDER BY seq DESC LIMIT 1`
	// sqlHopAt: the thread's last_hop as of a seq.
	sqlHopAt = `SELECT hop FROM events WHERE thread = ? AND seq = ?`
	// sqlState: a thread's head and current state. thread_state is written
	// only when a control changes the state; the current last_hop is the
	// hop of the thread's last event.
	sqlState = `SELECT e.seq, s.state, e.hop FROM thread_state s
		JOIN events e ON e.thread = s.thread
			AND e.seq = (SELECT max(seq) FROM events WHERE thread = s.thread)
		WHERE s.thread = ?`
	// sqlLastSeq: a thread's last seq, no row when there is no such thread.
	sqlLastSeq = `SELECT last_seq FROM thread_heads WHERE id = ?`
	// sqlThreadsAfter: the keyset page of threads after (updated_at, id).
	// It sorts the threads (each head one seek on events_by_seq): appends
	// keep no index by update time (schema version 3 drops it), which
	// would cost each append a write.
	sqlThreadsAfter = selectThread + ` WHERE (updated_at, id) < (?, ?) ORDER BY updated_at DESC, id DESC LIMIT ?`
)

// reads are the engine's read queries in SQLite (storecore.ReadSQL).
var reads = &storecore.ReadSQL{
	LastSeq: sqlLastSeq, Range: sqlThreadRange, GlobalRange: sqlGlobalRange, Head: sqlHead,
	State: sqlState, SnapshotAt: sqlSnapshotAt, HopAt: sqlHopAt,
	ThreadsFirst:    selectThread + ` ORDER BY updated_at DESC, id DESC LIMIT ?`,
	ThreadUpdatedAt: `SELECT updated_at FROM thread_heads WHERE id = ?`, ThreadsAfter: sqlThreadsAfter,
	NoLimit: -1, FirstAfter: firstAfter,
}

// readTx runs fn in a read transaction on the read-only pool, so that the
// several queries of one answer see one snapshot of the log.
func (s *Store) readTx(ctx context.Context, fn func(ctx context.Context, c storecore.Conn) error) error {
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	return fn(ctx, readConn{storecore.SQLConn(tx), tx})
}

// readConn is a read transaction's Conn, with its *sql.Tx for firstAfter's
// prepared statement.
type readConn struct {
	storecore.Conn
	tx *sql.Tx
}

// selectThread reads threads with their heads (storecore.ScanThread).
const selectThread = `SELECT ` + storecore.ThreadColumns + ` FROM thread_heads`

// firstAfter returns the seq of thread's first event whose ts is greater
// than since, or last+1 when there is none. ts strictly increases with seq
// within a thread, so it searches by seq: it gallops back from the head (a
// v0 client polling with its newest ts is answered by one lookup), then
// bisects; each step is one point lookup on events_by_seq, so a thread of
// n events costs at most about 2·log2(n) lookups and never a scan.
func firstAfter(ctx context.Context, c storecore.Conn, thread, since string, last int64) (int64, error) {
	stmt, err := c.(readConn).tx.PrepareContext(ctx, sqlTSAt)
	if err != nil {
		return 0, fmt.Errorf("look up since: %w", err)
	}
	defer func() { _ = stmt.Close() }()
	isAfter := func(seq int64) (bool, error) {
		var ts string
		if err := stmt.QueryRowContext(ctx, thread, seq).Scan(&ts); err != nil {
			return false, fmt.Errorf("look up since: ts of seq %d: %w", seq, err)
		}
		return ts > since, nil
	}
	// Every seq < lo is at or before since; every seq >= hi is after it.
	lo, hi := int64(1), last+1
	for step := int64(1); lo < hi; step *= 2 {
		probe := hi - step
		if probe < lo {
			break
		}
		after, err := isAfter(probe)
		if err != nil {
			return 0, err
		}
		if !after {
			lo = probe + 1
			break
		}
		hi = probe
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		after, err := isAfter(mid)
		if err != nil {
			return 0, err
		}
		if after {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}
