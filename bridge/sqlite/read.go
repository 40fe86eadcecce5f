package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
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

// readTx runs fn in a read transaction on the read-only pool, so that the
// several queries of one answer see one snapshot of the log.
func (s *Store) readTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}

// list returns a function that runs a query in tx and collects its rows
// with scan, for storecore's reads.
func list[T any](ctx context.Context, tx *sql.Tx, what string, scan func(storecore.Row) (T, error)) func(string, ...any) ([]T, error) {
	return func(query string, args ...any) ([]T, error) {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", what, err)
		}
		defer func() { _ = rows.Close() }()
		return storecore.Collect(rows, what, scan)
	}
}

// rowOf returns a function that runs a one-row query in tx.
func rowOf(ctx context.Context, tx *sql.Tx) storecore.QueryRow {
	return func(query string, args ...any) storecore.Row { return tx.QueryRowContext(ctx, query, args...) }
}

// ThreadEvents answers a per-thread query from the (thread, seq) index,
// never by scanning the thread (since=<ts> by firstAfter's search). After and Until past
// the thread's last seq are cursor_ahead errors (with Head set); Since is
// exempt, as in v0. With Tail and Limit both set, it returns the first Limit
// of the last Tail events, so a client can page on with After. Limit 0
// means no cap. An unknown thread is thread_not_found.
func (s *Store) ThreadEvents(ctx context.Context, q agentbridge.ThreadEventsQuery) (_ []agentbridge.Event, err error) {
	defer s.Guard(time.Now(), &err)
	if err := storecore.CheckThreadEventsQuery(q); err != nil {
		return nil, err
	}
	limit := int64(q.Limit)
	if limit == 0 {
		limit = -1 // SQLite: no limit
	}
	var out []agentbridge.Event
	err = s.readTx(ctx, func(tx *sql.Tx) (err error) {
		out, err = storecore.ReadThreadEvents(rowOf(ctx, tx), list(ctx, tx, "events", storecore.ScanEvent),
			storecore.ThreadEventsQueries{LastSeq: sqlLastSeq, Range: sqlThreadRange}, q, limit,
			func(last int64) (int64, error) { return firstAfter(ctx, tx, q.Thread, q.Since, last) })
		return err
	})
	return out, err
}

// firstAfter returns the seq of thread's first event whose ts is greater
// than since, or last+1 when there is none. ts strictly increases with seq
// within a thread, so it searches by seq: it gallops back from the head (a
// v0 client polling with its newest ts is answered by one lookup), then
// bisects; each step is one point lookup on events_by_seq, so a thread of
// n events costs at most about 2·log2(n) lookups and never a scan.
func firstAfter(ctx context.Context, tx *sql.Tx, thread, since string, last int64) (int64, error) {
	stmt, err := tx.PrepareContext(ctx, sqlTSAt)
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

// Events returns events of all threads with gseq > after, in gseq order, at
// most limit (0 means MaxEventsLimit). after past the end of the log is
// cursor_ahead with Head set.
func (s *Store) Events(ctx context.Context, after int64, limit int) (_ []agentbridge.Event, err error) {
	defer s.Guard(time.Now(), &err)
	if err := storecore.CheckEventsQuery(after, limit); err != nil {
		return nil, err
	}
	var out []agentbridge.Event
	err = s.readTx(ctx, func(tx *sql.Tx) (err error) {
		out, err = storecore.ReadEvents(func() (int64, error) { return headOf(ctx, tx) },
			list(ctx, tx, "events", storecore.ScanEvent), sqlGlobalRange, after, limit)
		return err
	})
	return out, err
}

// Head returns the last gseq of the log, 0 when it is empty.
func (s *Store) Head(ctx context.Context) (_ int64, err error) {
	defer s.Guard(time.Now(), &err)
	var head int64
	err = s.readTx(ctx, func(tx *sql.Tx) (err error) {
		head, err = headOf(ctx, tx)
		return err
	})
	return head, err
}

func headOf(ctx context.Context, tx *sql.Tx) (int64, error) {
	var head sql.NullInt64
	if err := tx.QueryRowContext(ctx, sqlHead).Scan(&head); err != nil {
		return 0, fmt.Errorf("read head: %w", err)
	}
	return head.Int64, nil
}

// selectThread reads threads with their heads (storecore.ScanThread).
const selectThread = `SELECT ` + storecore.ThreadColumns + ` FROM thread_heads`

// Threads lists threads most recently updated first (ties by id,
// descending), starting after the thread whose id is after, at most limit
// (0 = all). Paging is keyset on (updated_at, id) as of the after thread's
// current position: a thread updated between two pages moves to the front
// and is not repeated further down. An unknown after is invalid_field.
func (s *Store) Threads(ctx context.Context, after string, limit int) (_ []agentbridge.Thread, err error) {
	defer s.Guard(time.Now(), &err)
	if err := storecore.CheckThreadsLimit(limit); err != nil {
		return nil, err
	}
	lim := int64(limit)
	if lim == 0 {
		lim = -1
	}
	var out []agentbridge.Thread
	err = s.readTx(ctx, func(tx *sql.Tx) (err error) {
		out, err = storecore.PageThreads(rowOf(ctx, tx), list(ctx, tx, "threads", storecore.ScanThread), storecore.ThreadsQueries{
			First:     selectThread + ` ORDER BY updated_at DESC, id DESC LIMIT ?`,
			UpdatedAt: `SELECT updated_at FROM thread_heads WHERE id = ?`,
			After:     sqlThreadsAfter,
		}, after, lim)
		return err
	})
	return out, err
}

// State returns a thread's derived state as of revision at (0 = now) and
// the seq it reflects. The current state is one row; an older one is the
// latest snapshot at or before at plus that event's hop: two index lookups,
// whatever the thread's length. at past the head is cursor_ahead. Slices
// in the result are never nil (ThreadState.Normalize).
func (s *Store) State(ctx context.Context, thread string, at int64) (_ agentbridge.ThreadState, _ int64, err error) {
	defer s.Guard(time.Now(), &err)
	if err := storecore.CheckAt(at); err != nil {
		return agentbridge.ThreadState{}, 0, err
	}
	var st agentbridge.ThreadState
	var seq int64
	err = s.readTx(ctx, func(tx *sql.Tx) (err error) {
		st, seq, err = storecore.ReadState(rowOf(ctx, tx), storecore.StateQueries{Head: sqlState, SnapshotAt: sqlSnapshotAt, HopAt: sqlHopAt}, thread, at)
		return err
	})
	return st, seq, err
}
