package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Session is the CLI session kept for one (thread, participant, client).
type Session struct {
	Thread      string `json:"thread"`
	Participant string `json:"participant"`
	Client      string `json:"client"`
	// ID is the CLI's own session id, as the adapter reported it.
	ID string `json:"session_id"`
	// Turns counts the runs that reported this id.
	Turns int `json:"turns"`
	// TriggerSeq is the trigger of the last run that reported it.
	TriggerSeq int64  `json:"trigger_seq"`
	UpdatedAt  string `json:"updated_at"`
}

// Session returns the session kept for the pair and client; a zero
// Session (empty ID) when there is none.
func (d *DB) Session(ctx context.Context, thread, participant, client string) (Session, error) {
	s := Session{Thread: thread, Participant: participant, Client: client}
	err := d.db.QueryRowContext(ctx, `SELECT session_id, turns, trigger_seq, updated_at FROM sessions
		WHERE owner = ? AND thread = ? AND participant = ? AND client = ?`, d.db.owner, thread, participant, client).
		Scan(&s.ID, &s.Turns, &s.TriggerSeq, &s.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return s, nil
	}
	if err != nil {
		return Session{}, fmt.Errorf("read session of %s in %s: %w", participant, thread, err)
	}
	return s, nil
}

// RecordSession keeps the session id a run for the trigger at triggerSeq
// reported: the same id as the last report counts one more turn, another
// id (a new session, or the CLI refused the old one) starts again at one. A report
// from a run whose trigger is not after the pair's latest reset is
// ignored, so a reset is never undone by a run that was already going.
func (d *DB) RecordSession(ctx context.Context, thread, participant, client, id string, triggerSeq int64, now time.Time) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record session: %w", err)
	}
	defer tx.Rollback()
	var reset int64
	err = tx.QueryRowContext(ctx, `SELECT seq FROM session_resets WHERE thread = ? AND participant = ?`, thread, participant).Scan(&reset)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read session reset of %s in %s: %w", participant, thread, err)
	}
	if triggerSeq <= reset {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (owner, thread, participant, client, session_id, turns, trigger_seq, updated_at)
		VALUES (?, ?, ?, ?, ?, 1, ?, ?)
		ON CONFLICT (owner, thread, participant, client) DO UPDATE SET
			turns = CASE WHEN sessions.session_id = excluded.session_id THEN sessions.turns + 1 ELSE 1 END,
			session_id = excluded.session_id, trigger_seq = excluded.trigger_seq, updated_at = excluded.updated_at`,
		tx.owner, thread, participant, client, id, triggerSeq, agentbridge.FormatTime(now)); err != nil {
		return fmt.Errorf("record session of %s in %s: %w", participant, thread, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record session: %w", err)
	}
	return nil
}

// ResetSessions forgets the participant's sessions in the thread (every
// client) as of the reset control at seq. It is idempotent, and replaying
// an old reset never forgets a session reported for a later trigger.
func (d *DB) ResetSessions(ctx context.Context, thread, participant string, seq int64) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("reset sessions: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO session_resets (thread, participant, seq) VALUES (?, ?, ?)
		ON CONFLICT (thread, participant) DO UPDATE SET
			seq = CASE WHEN session_resets.seq > excluded.seq THEN session_resets.seq ELSE excluded.seq END`, thread, participant, seq); err != nil {
		return fmt.Errorf("record session reset of %s in %s: %w", participant, thread, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE owner = ? AND thread = ? AND participant = ? AND trigger_seq < ?`,
		tx.owner, thread, participant, seq); err != nil {
		return fmt.Errorf("forget sessions of %s in %s: %w", participant, thread, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("reset sessions: %w", err)
	}
	return nil
}

// Sessions lists the kept sessions, of one thread when thread is not
// empty, most recently used first.
func (d *DB) Sessions(ctx context.Context, thread string) ([]Session, error) {
	q := `SELECT thread, participant, client, session_id, turns, trigger_seq, updated_at FROM sessions WHERE owner = ?`
	args := []any{d.db.owner}
	if thread != "" {
		q += ` AND thread = ?`
		args = append(args, thread)
	}
	q += ` ORDER BY updated_at DESC, thread, participant, client`
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	out := []Session{}
	for rows.Next() {
		var s Session
		if err := rows.Scan(&s.Thread, &s.Participant, &s.Client, &s.ID, &s.Turns, &s.TriggerSeq, &s.UpdatedAt); err != nil {
			return nil, fmt.Errorf("scan session: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// NoteReply remembers seq as the participant's latest reply in the thread
// (an older seq never replaces a newer one).
func (d *DB) NoteReply(ctx context.Context, thread, participant string, seq int64) error {
	_, err := d.db.ExecContext(ctx, `INSERT INTO last_replies (thread, participant, seq) VALUES (?, ?, ?)
		ON CONFLICT (thread, participant) DO UPDATE SET
			seq = CASE WHEN last_replies.seq > excluded.seq THEN last_replies.seq ELSE excluded.seq END`, thread, participant, seq)
	if err != nil {
		return fmt.Errorf("remember the last reply of %s in %s: %w", participant, thread, err)
	}
	return nil
}

// LastReply returns the seq NoteReply remembered for the pair, and whether
// there is one.
func (d *DB) LastReply(ctx context.Context, thread, participant string) (int64, bool, error) {
	var seq int64
	err := d.db.QueryRowContext(ctx, `SELECT seq FROM last_replies WHERE thread = ? AND participant = ?`, thread, participant).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read the last reply of %s in %s: %w", participant, thread, err)
	}
	return seq, true, nil
}
