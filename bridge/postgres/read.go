package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// selectEvent selects the columns storecore.ScanEvent reads.
const selectEvent = `SELECT ` + storecore.EventColumns + ` FROM events`

// selectThread reads threads with their heads (storecore.ScanThread).
const selectThread = `SELECT ` + storecore.ThreadColumns + ` FROM threads`

// readTx runs fn in a read-only REPEATABLE READ transaction, so that the
// several queries of one answer see one snapshot of the log.
func (s *Store) readTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// list returns a function that runs a query in tx and collects its rows
// with scan, for storecore's reads.
func list[T any](ctx context.Context, tx pgx.Tx, what string, scan func(storecore.Row) (T, error)) func(string, ...any) ([]T, error) {
	return func(query string, args ...any) ([]T, error) {
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", what, err)
		}
		defer rows.Close()
		return storecore.Collect(rows, what, scan)
	}
}

// rowOf returns a function that runs a one-row query in tx.
func rowOf(ctx context.Context, tx pgx.Tx) storecore.QueryRow {
	return func(query string, args ...any) storecore.Row { return tx.QueryRow(ctx, query, args...) }
}

// ThreadEvents answers a per-thread query from the (thread, seq) index.
// Its rules are the SQLite store's (see there): After wins over Since over
// Tail, Until caps, cursors past the head are cursor_ahead.
func (s *Store) ThreadEvents(ctx context.Context, q agentbridge.ThreadEventsQuery) (_ []agentbridge.Event, err error) {
	defer s.Guard(time.Now(), &err)
	if err := storecore.CheckThreadEventsQuery(q); err != nil {
		return nil, err
	}
	var limit any // NULL: no limit
	if q.Limit > 0 {
		limit = q.Limit
	}
	var out []agentbridge.Event
	err = s.readTx(ctx, func(tx pgx.Tx) (err error) {
		out, err = storecore.ReadThreadEvents(rowOf(ctx, tx), list(ctx, tx, "events", storecore.ScanEvent), storecore.ThreadEventsQueries{
			LastSeq: `SELECT last_seq FROM threads WHERE id = $1`,
			Range:   selectEvent + ` WHERE thread = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4`,
		}, q, limit, func(last int64) (int64, error) {
			// ts compares as bytes: the column's collation is C.
			var first *int64
			if err := tx.QueryRow(ctx, `SELECT min(seq) FROM events WHERE thread = $1 AND ts > $2`,
				q.Thread, q.Since).Scan(&first); err != nil {
				return 0, fmt.Errorf("look up since: %w", err)
			}
			if first == nil {
				return last + 1, nil
			}
			return *first, nil
		})
		return err
	})
	return out, err
}

// Events returns events of all threads with gseq > after, in gseq order, at
// most limit (0 means MaxEventsLimit). Every event with a smaller gseq than
// one a reader sees has committed before it (see write), so a follower never
// skips one.
func (s *Store) Events(ctx context.Context, after int64, limit int) (_ []agentbridge.Event, err error) {
	defer s.Guard(time.Now(), &err)
	if err := storecore.CheckEventsQuery(after, limit); err != nil {
		return nil, err
	}
	var out []agentbridge.Event
	err = s.readTx(ctx, func(tx pgx.Tx) (err error) {
		out, err = storecore.ReadEvents(func() (int64, error) { return headOf(ctx, tx) },
			list(ctx, tx, "events", storecore.ScanEvent), selectEvent+` WHERE gseq > $1 ORDER BY gseq LIMIT $2`, after, limit)
		return err
	})
	return out, err
}

// Head returns the last gseq of the log, 0 when it is empty.
func (s *Store) Head(ctx context.Context) (_ int64, err error) {
	defer s.Guard(time.Now(), &err)
	var head int64
	err = s.readTx(ctx, func(tx pgx.Tx) (err error) {
		head, err = headOf(ctx, tx)
		return err
	})
	return head, err
}

func headOf(ctx context.Context, tx pgx.Tx) (int64, error) {
	var head int64
	if err := tx.QueryRow(ctx, `SELECT gseq FROM log_head`).Scan(&head); err != nil {
		return 0, fmt.Errorf("read head: %w", err)
	}
	return head, nil
}

// Threads lists threads most recently updated first (ties by id,
// descending), keyset-paged after the thread whose id is after.
func (s *Store) Threads(ctx context.Context, after string, limit int) (_ []agentbridge.Thread, err error) {
	defer s.Guard(time.Now(), &err)
	if err := storecore.CheckThreadsLimit(limit); err != nil {
		return nil, err
	}
	var lim any
	if limit > 0 {
		lim = limit
	}
	var out []agentbridge.Thread
	err = s.readTx(ctx, func(tx pgx.Tx) (err error) {
		out, err = storecore.PageThreads(rowOf(ctx, tx), list(ctx, tx, "threads", storecore.ScanThread), storecore.ThreadsQueries{
			First:     selectThread + ` ORDER BY updated_at DESC, id DESC LIMIT $1`,
			UpdatedAt: `SELECT updated_at FROM threads WHERE id = $1`,
			After:     selectThread + ` WHERE (updated_at, id) < ($1, $2) ORDER BY updated_at DESC, id DESC LIMIT $3`,
		}, after, lim)
		return err
	})
	return out, err
}

// State returns a thread's derived state as of revision at (0 = now) and
// the seq it reflects: the current state is the thread row; an older one
// the latest snapshot at or before at plus that event's hop.
func (s *Store) State(ctx context.Context, thread string, at int64) (_ agentbridge.ThreadState, _ int64, err error) {
	defer s.Guard(time.Now(), &err)
	if err := storecore.CheckAt(at); err != nil {
		return agentbridge.ThreadState{}, 0, err
	}
	var st agentbridge.ThreadState
	var seq int64
	err = s.readTx(ctx, func(tx pgx.Tx) (err error) {
		st, seq, err = storecore.ReadState(rowOf(ctx, tx), storecore.StateQueries{
			Head:       `SELECT last_seq, state, last_hop FROM threads WHERE id = $1`,
			SnapshotAt: `SELECT state FROM state_snapshots WHERE thread = $1 AND seq <= $2 ORDER BY seq DESC LIMIT 1`,
			HopAt:      `SELECT hop FROM events WHERE thread = $1 AND seq = $2`,
		}, thread, at)
		return err
	})
	return st, seq, err
}
