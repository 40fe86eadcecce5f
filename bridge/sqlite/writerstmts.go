// The writer's SQL, prepared once on the connection it holds.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The writer's statements, prepared once on its connection.
const (
	wSelectHead = `SELECT t.name, e.ts, e.seq, s.state, e.hop,
			EXISTS (SELECT 1 FROM events WHERE thread = t.id AND type = 'message')
		FROM threads t JOIN thread_state s ON s.thread = t.id
		JOIN events e ON e.thread = t.id
			AND e.seq = (SELECT max(seq) FROM events WHERE thread = t.id)
		WHERE t.id = ?`
	wSelectIdempotency = `SELECT event_id FROM idempotency WHERE thread = ? AND key = ?`
	wSelectLegacyKey   = `SELECT event_id FROM idempotency_legacy WHERE thread = ? AND key = ?`
	wSelectEventByID   = selectEvent + ` WHERE id = ?`
	wSelectReplyTo     = `SELECT hop, seq FROM events WHERE id = ? AND thread = ?`
	wSelectSenderHop   = `SELECT max(hop) FROM events WHERE thread = ? AND seq > ? AND sender = ? AND type = 'message'`
	wSelectAnswers     = selectEvent + ` WHERE thread = ? AND seq > ? AND (instr(content, ?) > 0 OR instr(meta, ?) > 0) ORDER BY seq`
	wInsertEvent       = `INSERT INTO events (id, thread, seq, ts, type, sender, recipient, content, meta, hop)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	wInsertIdempotency = `INSERT INTO idempotency (thread, key, event_id) VALUES (?, ?, ?)`
	wInsertSnapshot    = `INSERT INTO state_snapshots (thread, seq, state) VALUES (?, ?, ?)`
	wInsertThread      = `INSERT INTO threads (id, name, created_at) VALUES (?, ?, ?)`
	wInsertState       = `INSERT INTO thread_state (thread, seq, last_hop, state) VALUES (?, 0, 0, ?)`
	wUpdateThread      = `UPDATE threads SET name = ? WHERE id = ?`
	wUpdateState       = `UPDATE thread_state SET seq = ?, last_hop = ?, state = ? WHERE thread = ?`
)

// writerStmts are the writer's statements, prepared once on the connection
// it holds, so that its hot path neither parses SQL nor looks it up in the
// driver's per-connection cache.
type writerStmts struct {
	selectHead, selectIdempotency, selectEventByID, selectReplyTo             *sql.Stmt
	selectAnswers, selectSenderHop, selectLegacyKey                           *sql.Stmt
	insertEvent, insertIdempotency, insertSnapshot, insertThread, insertState *sql.Stmt
	updateThread, updateState                                                 *sql.Stmt
	insertFTS                                                                 *sql.Stmt
}

// prepareWriter prepares every writer statement on conn. On error the
// statements prepared so far are closed.
func prepareWriter(ctx context.Context, conn *sql.Conn) (writerStmts, error) {
	var st writerStmts
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&st.selectHead, wSelectHead}, {&st.selectIdempotency, wSelectIdempotency},
		{&st.selectEventByID, wSelectEventByID}, {&st.selectReplyTo, wSelectReplyTo},
		{&st.selectAnswers, wSelectAnswers}, {&st.selectSenderHop, wSelectSenderHop},
		{&st.selectLegacyKey, wSelectLegacyKey}, {&st.insertEvent, wInsertEvent},
		{&st.insertIdempotency, wInsertIdempotency}, {&st.insertSnapshot, wInsertSnapshot},
		{&st.insertThread, wInsertThread}, {&st.insertState, wInsertState},
		{&st.updateThread, wUpdateThread}, {&st.updateState, wUpdateState},
		{&st.insertFTS, wInsertFTS},
	} {
		stmt, err := conn.PrepareContext(ctx, p.query)
		if err != nil {
			_ = st.close()
			return writerStmts{}, fmt.Errorf("prepare writer statement: %w", err)
		}
		*p.dst = stmt
	}
	return st, nil
}

// close closes every prepared statement (nil ones are skipped).
func (st writerStmts) close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{
		st.selectHead, st.selectIdempotency, st.selectEventByID, st.selectReplyTo,
		st.selectAnswers, st.selectSenderHop, st.selectLegacyKey, st.insertEvent, st.insertIdempotency, st.insertSnapshot, st.insertThread, st.insertState,
		st.updateThread, st.updateState, st.insertFTS,
	} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}
