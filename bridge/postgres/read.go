package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// selectEvent selects the columns scanEvent reads.
const selectEvent = `SELECT gseq, id, thread, seq, ts, type, sender, recipient, content, meta FROM events`

// selectThread reads threads with their heads (scanThread).
const selectThread = `SELECT id, name, created_at, updated_at, last_seq FROM threads`

func scanEvent(r pgx.Row) (agentbridge.Event, error) {
	var ev agentbridge.Event
	var content []byte
	var meta string
	if err := r.Scan(&ev.GSeq, &ev.ID, &ev.Thread, &ev.Seq, &ev.TS, &ev.Type, &ev.From, &ev.To, &content, &meta); err != nil {
		return agentbridge.Event{}, err
	}
	if content != nil {
		ev.Content = json.RawMessage(content)
	}
	if meta == "{}" {
		return ev, nil
	}
	if err := json.Unmarshal([]byte(meta), &ev.Meta); err != nil {
		return agentbridge.Event{}, fmt.Errorf("decode meta of event %s: %w", ev.ID, err)
	}
	return ev, nil
}

func scanThread(r pgx.Row) (agentbridge.Thread, error) {
	var t agentbridge.Thread
	var name []byte
	err := r.Scan(&t.ID, &name, &t.CreatedAt, &t.UpdatedAt, &t.LastSeq)
	t.Name, t.EventCount = string(name), t.LastSeq
	return t, err
}

// readTx runs fn in a read-only REPEATABLE READ transaction, so that the
// several queries of one answer see one snapshot of the log.
func (s *Store) readTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func queryEvents(ctx context.Context, tx pgx.Tx, query string, args ...any) ([]agentbridge.Event, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query events: %w", err)
	}
	defer rows.Close()
	events := []agentbridge.Event{}
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("scan event: %w", err)
		}
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query events: %w", err)
	}
	return events, nil
}

// ThreadEvents answers a per-thread query from the (thread, seq) index.
// Its rules are the SQLite store's (see there): After wins over Since over
// Tail, Until caps, cursors past the head are cursor_ahead.
func (s *Store) ThreadEvents(ctx context.Context, q agentbridge.ThreadEventsQuery) (_ []agentbridge.Event, err error) {
	defer s.guard(time.Now(), &err)
	if err := storecore.CheckThreadEventsQuery(q); err != nil {
		return nil, err
	}
	var limit any // NULL: no limit
	if q.Limit > 0 {
		limit = q.Limit
	}
	var out []agentbridge.Event
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		var last int64
		err := tx.QueryRow(ctx, `SELECT last_seq FROM threads WHERE id = $1`, q.Thread).Scan(&last)
		if errors.Is(err, pgx.ErrNoRows) {
			return agentbridge.ThreadNotFound(q.Thread)
		}
		if err != nil {
			return fmt.Errorf("look up thread %s: %w", q.Thread, err)
		}
		lo, hi, empty, err := storecore.ThreadRange(q, last, func() (int64, error) {
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
		if err != nil || empty {
			out = []agentbridge.Event{}
			return err
		}
		out, err = queryEvents(ctx, tx, selectEvent+` WHERE thread = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4`,
			q.Thread, lo, hi, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Events returns events of all threads with gseq > after, in gseq order, at
// most limit (0 means MaxEventsLimit). Every event with a smaller gseq than
// one a reader sees has committed before it (see write), so a follower never
// skips one.
func (s *Store) Events(ctx context.Context, after int64, limit int) (_ []agentbridge.Event, err error) {
	defer s.guard(time.Now(), &err)
	if err := storecore.CheckEventsQuery(after, limit); err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = agentbridge.MaxEventsLimit
	}
	var out []agentbridge.Event
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		head, err := headOf(ctx, tx)
		if err != nil {
			return err
		}
		if after > head {
			return agentbridge.CursorAhead("", "after", after, head)
		}
		out, err = queryEvents(ctx, tx, selectEvent+` WHERE gseq > $1 ORDER BY gseq LIMIT $2`, after, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Head returns the last gseq of the log, 0 when it is empty.
func (s *Store) Head(ctx context.Context) (_ int64, err error) {
	defer s.guard(time.Now(), &err)
	var head int64
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		var err error
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

// Thread returns one thread, or thread_not_found.
func (s *Store) Thread(ctx context.Context, id string) (_ agentbridge.Thread, err error) {
	defer s.guard(time.Now(), &err)
	t, err := scanThread(s.pool.QueryRow(ctx, selectThread+` WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return agentbridge.Thread{}, agentbridge.ThreadNotFound(id)
	}
	if err != nil {
		return agentbridge.Thread{}, fmt.Errorf("load thread %s: %w", id, err)
	}
	return t, nil
}

// Threads lists threads most recently updated first (ties by id,
// descending), keyset-paged after the thread whose id is after.
func (s *Store) Threads(ctx context.Context, after string, limit int) (_ []agentbridge.Thread, err error) {
	defer s.guard(time.Now(), &err)
	if err := storecore.CheckThreadsLimit(limit); err != nil {
		return nil, err
	}
	var lim any
	if limit > 0 {
		lim = limit
	}
	out := []agentbridge.Thread{}
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		var rows pgx.Rows
		var err error
		if after == "" {
			rows, err = tx.Query(ctx, selectThread+` ORDER BY updated_at DESC, id DESC LIMIT $1`, lim)
		} else {
			var updated string
			err = tx.QueryRow(ctx, `SELECT updated_at FROM threads WHERE id = $1`, after).Scan(&updated)
			if errors.Is(err, pgx.ErrNoRows) {
				return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "after",
					"after names %q, which is not a thread; pass the id of the last thread of the previous page.", agentbridge.Clip(after, agentbridge.QuoteRunes))
			}
			if err != nil {
				return fmt.Errorf("look up thread %s: %w", after, err)
			}
			rows, err = tx.Query(ctx, selectThread+` WHERE (updated_at, id) < ($1, $2) ORDER BY updated_at DESC, id DESC LIMIT $3`,
				updated, after, lim)
		}
		if err != nil {
			return fmt.Errorf("list threads: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanThread(rows)
			if err != nil {
				return fmt.Errorf("scan thread: %w", err)
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// State returns a thread's derived state as of revision at (0 = now) and
// the seq it reflects: the current state is the thread row; an older one
// the latest snapshot at or before at plus that event's hop.
func (s *Store) State(ctx context.Context, thread string, at int64) (_ agentbridge.ThreadState, _ int64, err error) {
	defer s.guard(time.Now(), &err)
	if err := storecore.CheckAt(at); err != nil {
		return agentbridge.ThreadState{}, 0, err
	}
	var st agentbridge.ThreadState
	var seq int64
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		var last int64
		var state string
		var hop int
		err := tx.QueryRow(ctx, `SELECT last_seq, state, last_hop FROM threads WHERE id = $1`, thread).Scan(&last, &state, &hop)
		if errors.Is(err, pgx.ErrNoRows) {
			return agentbridge.ThreadNotFound(thread)
		}
		if err != nil {
			return fmt.Errorf("load state of thread %s: %w", thread, err)
		}
		if at > last {
			return agentbridge.CursorAhead(thread, "at", at, last)
		}
		seq = last
		if at != 0 && at != last {
			seq = at
			err := tx.QueryRow(ctx, `SELECT state FROM state_snapshots WHERE thread = $1 AND seq <= $2 ORDER BY seq DESC LIMIT 1`,
				thread, at).Scan(&state)
			if errors.Is(err, pgx.ErrNoRows) {
				state = "{}"
			} else if err != nil {
				return fmt.Errorf("load state snapshot: %w", err)
			}
			if err := tx.QueryRow(ctx, `SELECT hop FROM events WHERE thread = $1 AND seq = $2`, thread, at).Scan(&hop); err != nil {
				return fmt.Errorf("load hop at seq %d: %w", at, err)
			}
		}
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
