// Search (contract 8.6): the FTS5 index written with each event
// (insertEvent), the migration of the events stored before it, the
// query, and the threads an agent may search.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

var _ agentbridge.SearchStore = (*Store)(nil)

// ErrNoFTS5 refuses to open the bridge's database in a binary built
// without SQLite's full-text search (the sqlite_fts5 build tag): every
// append writes the search index in its transaction, so such a binary
// could neither create the index nor append to a database that has one.
// It never opens the file, so it can neither corrupt it nor leave events
// unindexed.
var ErrNoFTS5 = errors.New("this agent-bridge was built without SQLite full-text search (FTS5), which the bridge's database needs for search: build it with `go build -tags sqlite_fts5 ./cmd/agent-bridge` (the release binaries have it)")

// checkFTS5 refuses a SQLite library compiled without FTS5.
func checkFTS5(ctx context.Context, db *sql.DB) error {
	var on bool
	if err := db.QueryRowContext(ctx, `SELECT sqlite_compileoption_used('ENABLE_FTS5')`).Scan(&on); err != nil {
		return fmt.Errorf("ask SQLite for FTS5: %w", err)
	}
	if !on {
		return ErrNoFTS5
	}
	return nil
}

// wInsertFTS indexes one event; its rowid is the event's gseq.
const wInsertFTS = `INSERT INTO events_fts (rowid, body, thread, sender, type) VALUES (?, ?, ?, ?, ?)`

// index writes ev's row of the search index, when it has text, with
// stmt (the writer's prepared statement, or the migration's).
func index(ctx context.Context, stmt *sql.Stmt, ev agentbridge.Event) error {
	doc, ok := storecore.SearchDocOf(ev)
	if !ok {
		return nil
	}
	if _, err := stmt.ExecContext(ctx, ev.GSeq, doc.Body, doc.Thread, doc.Sender, doc.Type); err != nil {
		return fmt.Errorf("index event for search: %w", err)
	}
	return nil
}

// backfill indexes the events stored before the index (migration 0012),
// a chunk per transaction on the writer's connection, before the writer
// starts.
func (s *Store) backfill(ctx context.Context, conn *sql.Conn) error {
	return storecore.Backfill(ctx, s.Log, func(ctx context.Context) (from, done, target int64, err error) {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return 0, 0, 0, err
		}
		defer func() { _ = tx.Rollback() }()
		if err := tx.QueryRowContext(ctx, `SELECT done, target FROM search_backfill`).Scan(&done, &target); err != nil {
			return 0, 0, 0, err
		}
		if done >= target {
			return done, done, target, nil
		}
		upto := min(done+storecore.BackfillChunk, target)
		stmt, err := tx.PrepareContext(ctx, wInsertFTS)
		if err != nil {
			return 0, 0, 0, err
		}
		defer stmt.Close()
		rows, err := tx.QueryContext(ctx, selectEvent+` WHERE gseq > ? AND gseq <= ? ORDER BY gseq`, done, upto)
		if err != nil {
			return 0, 0, 0, err
		}
		evs, err := storecore.ScanEvents(rows)
		rows.Close()
		if err != nil {
			return 0, 0, 0, err
		}
		for _, ev := range evs {
			if err := index(ctx, stmt, ev); err != nil {
				return 0, 0, 0, err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE search_backfill SET done = ?`, upto); err != nil {
			return 0, 0, 0, err
		}
		return done, upto, target, tx.Commit()
	})
}

// hitColumns are the event's columns (storecore.EventColumns, of events e)
// and the rank, which storecore.ScanHits reads.
const hitColumns = `e.gseq, e.id, e.thread, e.seq, e.ts, e.type, e.sender, e.recipient, e.content, e.meta`

// Search answers req from the index, newest first: FTS5 walks the matches
// by rowid (gseq) downwards and stops at the page's end, so a page costs
// about the same whatever the number of matches. The rank is the
// bridge's (agentbridge.SearchRank), not bm25, which reads every match.
func (s *Store) Search(ctx context.Context, req agentbridge.SearchRequest) (_ []agentbridge.SearchHit, err error) {
	defer s.Guard(time.Now(), &err)
	if req.Threads != nil && len(req.Threads) == 0 {
		return nil, nil
	}
	var where []string
	args := []any{ftsMatch(req)}
	if req.Cursor > 0 {
		where, args = append(where, `f.rowid < ?`), append(args, req.Cursor)
	}
	if req.After != "" {
		where, args = append(where, `e.ts >= ?`), append(args, req.After)
	}
	if req.Before != "" {
		where, args = append(where, `e.ts < ?`), append(args, req.Before)
	}
	// The filter tokens are exact already; these keep the answer right
	// even if two values ever shared a token.
	if req.From != "" {
		where, args = append(where, `e.sender = ?`), append(args, req.From)
	}
	if req.Type != "" {
		where, args = append(where, `e.type = ?`), append(args, req.Type)
	}
	q := `SELECT ` + hitColumns + `, 0.0 FROM events_fts f JOIN events e ON e.gseq = f.rowid
		WHERE events_fts MATCH ?`
	for _, w := range where {
		q += ` AND ` + w
	}
	q += ` ORDER BY f.rowid DESC LIMIT ?`
	args = append(args, req.Limit)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	defer rows.Close()
	return storecore.ScanHits(rows)
}

// ftsMatch is req's FTS5 query: every term in the body, and the filters'
// tokens in their columns. Tokens are letters and digits only
// (agentbridge.SearchTokens), so quoting them needs no escape.
func ftsMatch(req agentbridge.SearchRequest) string {
	var b strings.Builder
	b.WriteString("body : (")
	for i, t := range req.Query.Terms {
		if i > 0 {
			b.WriteString(" AND ")
		}
		b.WriteString(`"` + strings.Join(t.Tokens, " ") + `"`)
		if t.Prefix {
			b.WriteString(" *")
		}
	}
	b.WriteString(")")
	if req.Threads != nil {
		b.WriteString(" AND thread : (")
		for i, id := range req.Threads {
			if i > 0 {
				b.WriteString(" OR ")
			}
			b.WriteString(`"` + storecore.ThreadToken(id) + `"`)
		}
		b.WriteString(")")
	}
	if req.From != "" {
		b.WriteString(` AND sender : "` + storecore.SenderToken(req.From) + `"`)
	}
	if req.Type != "" {
		b.WriteString(` AND type : "` + storecore.TypeToken(req.Type) + `"`)
	}
	return b.String()
}

// ThreadsInvited lists the threads whose current state invites
// participant: it reads every thread's state, which grows with the
// threads, not the events.
func (s *Store) ThreadsInvited(ctx context.Context, participant string) (_ []string, err error) {
	defer s.Guard(time.Now(), &err)
	rows, err := s.rdb.QueryContext(ctx, `SELECT s.thread FROM thread_state s
		WHERE EXISTS (SELECT 1 FROM json_each(s.state, '$.participants.invited') j WHERE json_extract(j.value, '$.id') = ?)
		ORDER BY s.thread`, participant)
	if err != nil {
		return nil, fmt.Errorf("threads invited: %w", err)
	}
	defer rows.Close()
	return storecore.ScanStrings(rows)
}
