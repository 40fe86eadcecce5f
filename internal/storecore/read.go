package storecore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// The reads of the event log, once for both databases: each runs in a
// read transaction of its driver (ReadTx), so that the several queries of
// one answer see one snapshot of the log, over its driver's queries
// (ReadSQL: the schemas differ where each database is fastest).

// ReadSQL is a driver's read queries, with ? placeholders.
type ReadSQL struct {
	// LastSeq (thread) → the thread's last seq, no row when there is no
	// such thread; Range (thread, lo, hi, limit) → the events with lo <
	// seq <= hi in order.
	LastSeq, Range string
	// GlobalRange (after, limit) → the events with a greater gseq in
	// order; Head → the last gseq (NULL or 0 when the log is empty).
	GlobalRange, Head string
	// State (thread) → the thread's last seq, current stored state and
	// last hop, no row when there is no such thread; SnapshotAt (thread,
	// seq) → the latest stored state at or before seq (no row: the empty
	// state); HopAt (thread, seq) → the hop of the event at seq.
	State, SnapshotAt, HopAt string
	// ThreadsFirst (limit) the first page of threads; ThreadUpdatedAt
	// (id) the updated_at of one thread (no row when there is none);
	// ThreadsAfter (updated_at, id, limit) the keyset page after it.
	ThreadsFirst, ThreadUpdatedAt, ThreadsAfter string
	// NoLimit is the limit argument that caps nothing.
	NoLimit any
	// FirstAfter finds, in a read transaction, the seq of thread's first
	// event after since (last+1 when there is none): the one lookup each
	// driver does its own way.
	FirstAfter func(ctx context.Context, c Conn, thread, since string, last int64) (int64, error)
}

// limit is n as a query's limit: 0 caps nothing.
func (r *ReadSQL) limit(n int) any {
	if n == 0 {
		return r.NoLimit
	}
	return n
}

// ThreadEvents answers a per-thread query from the (thread, seq) index,
// never by scanning the thread. After wins over Since over Tail, Until
// caps (ThreadRange); After and Until past the thread's last seq are
// cursor_ahead errors (with Head set); Since is exempt, as in v0. With
// Tail and Limit both set, it returns the first Limit of the last Tail
// events, so a client can page on with After. Limit 0 means no cap. An
// unknown thread is thread_not_found.
func (e *Engine) ThreadEvents(ctx context.Context, q agentbridge.ThreadEventsQuery) (_ []agentbridge.Event, err error) {
	defer e.Guard(time.Now(), &err)
	if err := CheckThreadEventsQuery(q); err != nil {
		return nil, err
	}
	var out []agentbridge.Event
	err = e.ReadTx(ctx, func(ctx context.Context, c Conn) error {
		var last int64
		found, err := Found(c.QueryRow(ctx, e.Reads.LastSeq, q.Thread).Scan(&last))
		if err != nil {
			return fmt.Errorf("look up thread %s: %w", q.Thread, err)
		}
		if !found {
			return agentbridge.ThreadNotFound(q.Thread)
		}
		lo, hi, empty, err := ThreadRange(q, last, func() (int64, error) { return e.Reads.FirstAfter(ctx, c, q.Thread, q.Since, last) })
		if err != nil || empty {
			out = []agentbridge.Event{}
			return err
		}
		out, err = List(ctx, c, "events", ScanEvent, e.Reads.Range, q.Thread, lo, hi, e.Reads.limit(q.Limit))
		return err
	})
	return out, err
}

// Events returns events of all threads with gseq > after, in gseq order,
// at most limit (0 means MaxEventsLimit). after past the end of the log is
// cursor_ahead with Head set. Every event with a smaller gseq than one a
// reader sees has committed before it, so a follower never skips one.
func (e *Engine) Events(ctx context.Context, after int64, limit int) (_ []agentbridge.Event, err error) {
	defer e.Guard(time.Now(), &err)
	if err := CheckEventsQuery(after, limit); err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = agentbridge.MaxEventsLimit
	}
	var out []agentbridge.Event
	err = e.ReadTx(ctx, func(ctx context.Context, c Conn) error {
		last, err := e.head(ctx, c)
		if err != nil {
			return err
		}
		if after > last {
			return agentbridge.CursorAhead("", "after", after, last)
		}
		out, err = List(ctx, c, "events", ScanEvent, e.Reads.GlobalRange, after, limit)
		return err
	})
	return out, err
}

// Head returns the last gseq of the log, 0 when it is empty.
func (e *Engine) Head(ctx context.Context) (_ int64, err error) {
	defer e.Guard(time.Now(), &err)
	return e.head(ctx, e.Read)
}

func (e *Engine) head(ctx context.Context, c Conn) (int64, error) {
	var head *int64
	if err := c.QueryRow(ctx, e.Reads.Head).Scan(&head); err != nil {
		return 0, fmt.Errorf("read head: %w", err)
	}
	if head == nil {
		return 0, nil
	}
	return *head, nil
}

// Threads lists threads most recently updated first (ties by id,
// descending), starting after the thread whose id is after, at most limit
// (0 = all). Paging is keyset on (updated_at, id) as of the after thread's
// current position: a thread updated between two pages moves to the front
// and is not repeated further down. An unknown after is invalid_field.
func (e *Engine) Threads(ctx context.Context, after string, limit int) (_ []agentbridge.Thread, err error) {
	defer e.Guard(time.Now(), &err)
	if err := CheckThreadsLimit(limit); err != nil {
		return nil, err
	}
	lim := e.Reads.limit(limit)
	var out []agentbridge.Thread
	err = e.ReadTx(ctx, func(ctx context.Context, c Conn) error {
		if after == "" {
			out, err = List(ctx, c, "threads", ScanThread, e.Reads.ThreadsFirst, lim)
			return err
		}
		var updated string
		found, err := Found(c.QueryRow(ctx, e.Reads.ThreadUpdatedAt, after).Scan(&updated))
		if err != nil {
			return fmt.Errorf("look up thread %s: %w", after, err)
		}
		if !found {
			return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "after",
				"after names %q, which is not a thread; pass the id of the last thread of the previous page.", agentbridge.Clip(after, agentbridge.QuoteRunes))
		}
		out, err = List(ctx, c, "threads", ScanThread, e.Reads.ThreadsAfter, updated, after, lim)
		return err
	})
	return out, err
}

// State returns a thread's derived state as of revision at (0 = now) and
// the seq it reflects. The current state is one row; an older one is the
// latest snapshot at or before at plus that event's hop: two index
// lookups, whatever the thread's length. at past the head is cursor_ahead.
// Slices in the result are never nil (ThreadState.Normalize).
func (e *Engine) State(ctx context.Context, thread string, at int64) (_ agentbridge.ThreadState, _ int64, err error) {
	defer e.Guard(time.Now(), &err)
	if err := CheckAt(at); err != nil {
		return agentbridge.ThreadState{}, 0, err
	}
	var st agentbridge.ThreadState
	var seq int64
	err = e.ReadTx(ctx, func(ctx context.Context, c Conn) error {
		var state string
		var hop int
		found, err := Found(c.QueryRow(ctx, e.Reads.State, thread).Scan(&seq, &state, &hop))
		if err != nil {
			return fmt.Errorf("load state of thread %s: %w", thread, err)
		}
		if !found {
			return agentbridge.ThreadNotFound(thread)
		}
		if at > seq {
			return agentbridge.CursorAhead(thread, "at", at, seq)
		}
		if at != 0 && at != seq {
			seq = at
			if state, hop, err = e.stateAt(ctx, c, thread, at); err != nil {
				return err
			}
		}
		st = agentbridge.ThreadState{}
		if err := json.Unmarshal([]byte(state), &st); err != nil {
			return fmt.Errorf("decode state of thread %s: %w", thread, err)
		}
		st.LastHop = hop
		return nil
	})
	if err != nil {
		return agentbridge.ThreadState{}, 0, err
	}
	return st.Normalize(), seq, nil
}

// stateAt reads the stored state and the hop as of seq at.
func (e *Engine) stateAt(ctx context.Context, c Conn, thread string, at int64) (state string, hop int, err error) {
	found, err := Found(c.QueryRow(ctx, e.Reads.SnapshotAt, thread, at).Scan(&state))
	if err != nil {
		return "", 0, fmt.Errorf("load state snapshot: %w", err)
	}
	if !found {
		state = "{}"
	}
	if err := c.QueryRow(ctx, e.Reads.HopAt, thread, at).Scan(&hop); err != nil {
		return "", 0, fmt.Errorf("load hop at seq %d: %w", at, err)
	}
	return state, hop, nil
}
