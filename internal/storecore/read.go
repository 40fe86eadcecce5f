package storecore

import (
	"encoding/json"
	"fmt"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// The reads both stores answer alike, over their own SQL: each store runs
// them inside its read transaction, passing the queries (its placeholders
// and tables) and functions that run one query there. queryRow runs a
// query returning at most one row; list runs one returning rows and
// collects them.

// QueryRow runs a one-row query in a store's read transaction.
type QueryRow func(query string, args ...any) Row

// ListEvents runs a query in a store's read transaction and collects its
// EventColumns rows.
type ListEvents func(query string, args ...any) ([]agentbridge.Event, error)

// ThreadEventsQueries are a store's per-thread event queries: LastSeq
// (thread) → the thread's last seq, no row when there is no such thread;
// Range (thread, lo, hi, limit) → the events with lo < seq <= hi in order.
type ThreadEventsQueries struct {
	LastSeq, Range string
}

// ReadThreadEvents answers a checked per-thread query (see ThreadRange):
// firstAfter(last) finds the first seq after q.Since, the one lookup each
// store does its own way; limit is the store's "no cap" for q.Limit 0.
func ReadThreadEvents(queryRow QueryRow, list ListEvents, sql ThreadEventsQueries, q agentbridge.ThreadEventsQuery,
	limit any, firstAfter func(last int64) (int64, error)) ([]agentbridge.Event, error) {
	var last int64
	found, err := Found(queryRow(sql.LastSeq, q.Thread).Scan(&last))
	if err != nil {
		return nil, fmt.Errorf("look up thread %s: %w", q.Thread, err)
	}
	if !found {
		return nil, agentbridge.ThreadNotFound(q.Thread)
	}
	lo, hi, empty, err := ThreadRange(q, last, func() (int64, error) { return firstAfter(last) })
	if err != nil {
		return nil, err
	}
	if empty {
		return []agentbridge.Event{}, nil
	}
	return list(sql.Range, q.Thread, lo, hi, limit)
}

// ReadEvents answers the global log query after a checked (after, limit):
// head is the log's last gseq, rangeQuery (after, limit) the events with
// a greater gseq in order; after past the head is cursor_ahead.
func ReadEvents(head func() (int64, error), list ListEvents, rangeQuery string, after int64, limit int) ([]agentbridge.Event, error) {
	if limit == 0 {
		limit = agentbridge.MaxEventsLimit
	}
	last, err := head()
	if err != nil {
		return nil, err
	}
	if after > last {
		return nil, agentbridge.CursorAhead("", "after", after, last)
	}
	return list(rangeQuery, after, limit)
}

// ThreadsQueries are a store's thread list queries, each ending in a
// limit: First (limit) the first page; UpdatedAt (id) the updated_at of
// one thread (no row when there is none); After (updated_at, id, limit)
// the keyset page after that thread.
type ThreadsQueries struct {
	First, UpdatedAt, After string
}

// ListThreads runs a query in a store's read transaction and collects its
// ThreadColumns rows.
type ListThreads func(query string, args ...any) ([]agentbridge.Thread, error)

// PageThreads answers Threads(after, limit): the first page, or the page
// after the thread whose id is after, as of that thread's current place
// (an unknown after is invalid_field). limit is the store's limit value.
func PageThreads(queryRow QueryRow, list ListThreads, sql ThreadsQueries, after string, limit any) ([]agentbridge.Thread, error) {
	if after == "" {
		return list(sql.First, limit)
	}
	var updated string
	found, err := Found(queryRow(sql.UpdatedAt, after).Scan(&updated))
	if err != nil {
		return nil, fmt.Errorf("look up thread %s: %w", after, err)
	}
	if !found {
		return nil, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "after",
			"after names %q, which is not a thread; pass the id of the last thread of the previous page.", agentbridge.Clip(after, agentbridge.QuoteRunes))
	}
	return list(sql.After, updated, after, limit)
}

// StateQueries are a store's State queries: Head (thread) → the thread's
// last seq, current stored state and last hop, no row when there is no
// such thread; SnapshotAt (thread, seq) → the latest stored state at or
// before seq (no row: the empty state); HopAt (thread, seq) → the hop of
// the event at seq.
type StateQueries struct {
	Head, SnapshotAt, HopAt string
}

// ReadState answers State(thread, at) after a checked at: the current
// state is one row; an older one is the latest snapshot at or before at
// plus that event's hop, two index lookups whatever the thread's length.
// at past the head is cursor_ahead. Slices in the result are never nil.
func ReadState(queryRow QueryRow, sql StateQueries, thread string, at int64) (agentbridge.ThreadState, int64, error) {
	var last int64
	var state string
	var hop int
	found, err := Found(queryRow(sql.Head, thread).Scan(&last, &state, &hop))
	if err != nil {
		return agentbridge.ThreadState{}, 0, fmt.Errorf("load state of thread %s: %w", thread, err)
	}
	if !found {
		return agentbridge.ThreadState{}, 0, agentbridge.ThreadNotFound(thread)
	}
	if at > last {
		return agentbridge.ThreadState{}, 0, agentbridge.CursorAhead(thread, "at", at, last)
	}
	seq := last
	if at != 0 && at != last {
		seq = at
		if state, hop, err = stateAt(queryRow, sql, thread, at); err != nil {
			return agentbridge.ThreadState{}, 0, err
		}
	}
	var st agentbridge.ThreadState
	if err := json.Unmarshal([]byte(state), &st); err != nil {
		return agentbridge.ThreadState{}, 0, fmt.Errorf("decode state of thread %s: %w", thread, err)
	}
	st.LastHop = hop
	return st.Normalize(), seq, nil
}

// stateAt reads the stored state and the hop as of seq at.
func stateAt(queryRow QueryRow, sql StateQueries, thread string, at int64) (state string, hop int, err error) {
	found, err := Found(queryRow(sql.SnapshotAt, thread, at).Scan(&state))
	if err != nil {
		return "", 0, fmt.Errorf("load state snapshot: %w", err)
	}
	if !found {
		state = "{}"
	}
	if err := queryRow(sql.HopAt, thread, at).Scan(&hop); err != nil {
		return "", 0, fmt.Errorf("load hop at seq %d: %w", at, err)
	}
	return state, hop, nil
}
