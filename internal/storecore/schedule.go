package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// The schedules' SQL, the same on both databases (PostgreSQL's
// placeholders are rebound by its store): a schedule control that counts
// upserts or deletes its row in the append's transaction, and a
// schedule's post moves its last handled due time only from the one its
// scheduler read (ScheduleClaim), so that of several bridges exactly one
// posts a due time.
const (
	SQLUpsertSchedule = `INSERT INTO schedules (thread, id, cron, tz, event, sender, set_seq, set_at, last_due)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, '')
		ON CONFLICT (thread, id) DO UPDATE SET cron = excluded.cron, tz = excluded.tz, event = excluded.event,
			sender = excluded.sender, set_seq = excluded.set_seq, set_at = excluded.set_at, last_due = ''`
	SQLDeleteSchedule = `DELETE FROM schedules WHERE thread = ? AND id = ?`
	SQLClaimSchedule  = `UPDATE schedules SET last_due = ? WHERE thread = ? AND id = ? AND set_seq = ? AND last_due = ?`
	SQLSchedules      = `SELECT thread, id, cron, tz, event, sender, set_seq, set_at, last_due FROM schedules`
)

// SchedulesQuery is the query of SQLSchedules for thread ("" for every
// thread), by thread and id, and its arguments.
func SchedulesQuery(thread string) (string, []any) {
	if thread == "" {
		return SQLSchedules + ` ORDER BY thread, id`, nil
	}
	return SQLSchedules + ` WHERE thread = ? ORDER BY id`, []any{thread}
}

// ScheduleChange is what a stored event does to the thread's schedules:
// Set is the row to write, or Off the id to remove; nil from
// ScheduleChangeOf when it does nothing.
type ScheduleChange struct {
	Set *agentbridge.Schedule
	Off string
}

// ScheduleChangeOf is the change ev (whose parsed control is ctl, and
// whose append's ignored note is ignored) makes: a schedule control from a
// human that the bridge could read.
func ScheduleChangeOf(ev agentbridge.Event, ctl *agentbridge.Control, ignored *agentbridge.Ignored, humans agentbridge.Humans) *ScheduleChange {
	if ctl == nil || ctl.Schedule == nil || ignored != nil || !humans.Has(ev.From) {
		return nil
	}
	sc := ctl.Schedule
	if sc.Off {
		return &ScheduleChange{Off: sc.ID}
	}
	return &ScheduleChange{Set: &agentbridge.Schedule{
		Thread: ev.Thread, ID: sc.ID, Cron: sc.Cron, TZ: sc.TZ, Event: *sc.Event,
		From: ev.From, SetSeq: ev.Seq, SetAt: ev.TS,
	}}
}

// Write makes c in the append's transaction with exec and returns the
// append's ignored note: turning off a schedule the thread does not have
// changes nothing and is no_schedule.
func (c ScheduleChange) Write(ctx context.Context, thread string, db Conn) (*agentbridge.Ignored, error) {
	if c.Set == nil {
		n, err := db.Exec(ctx, SQLDeleteSchedule, thread, c.Off)
		if err != nil {
			return nil, fmt.Errorf("remove schedule %s: %w", c.Off, err)
		}
		if n == 0 {
			return agentbridge.NoScheduleIgnored(c.Off), nil
		}
		return nil, nil
	}
	s := c.Set
	ev, err := json.Marshal(s.Event)
	if err != nil {
		return nil, fmt.Errorf("encode schedule event: %w", err)
	}
	if _, err := db.Exec(ctx, SQLUpsertSchedule, s.Thread, s.ID, s.Cron, s.TZ, string(ev), s.From, s.SetSeq, s.SetAt); err != nil {
		return nil, fmt.Errorf("write schedule %s: %w", s.ID, err)
	}
	return nil, nil
}

// ClaimSchedule moves the last handled due time of thread's schedule
// under claim c with exec, in the transaction of the post (or of
// HandleScheduleDue): agentbridge.ErrScheduleTaken when the claim does
// not hold, and nothing may then be written.
func ClaimSchedule(ctx context.Context, thread string, c *agentbridge.ScheduleClaim, db Conn) error {
	n, err := db.Exec(ctx, SQLClaimSchedule, c.Due, thread, c.ID, c.SetSeq, c.Prev)
	if err != nil {
		return fmt.Errorf("claim schedule %s: %w", c.ID, err)
	}
	if n == 0 {
		return agentbridge.ErrScheduleTaken
	}
	return nil
}

var _ agentbridge.ScheduleStore = (*Engine)(nil)

// Schedules lists the schedules of thread ("" for all), by thread and id.
func (e *Engine) Schedules(ctx context.Context, thread string) (_ []agentbridge.Schedule, err error) {
	defer e.Guard(time.Now(), &err)
	q, args := SchedulesQuery(thread)
	rows, err := e.Read.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	return scanSchedules(rows)
}

// HandleScheduleDue moves a schedule's last handled due time under c,
// storing no event (agentbridge.ScheduleStore).
func (e *Engine) HandleScheduleDue(ctx context.Context, thread string, cl agentbridge.ScheduleClaim) (err error) {
	defer e.Guard(time.Now(), &err)
	taken := false
	err = e.Write(ctx, func(ctx context.Context, c Conn) error {
		err := ClaimSchedule(ctx, thread, &cl, c)
		// A claim that does not hold wrote nothing: an answer, not a
		// failure of SQLite's group commit.
		if taken = errors.Is(err, agentbridge.ErrScheduleTaken); taken {
			return nil
		}
		return err
	})
	if err == nil && taken {
		err = agentbridge.ErrScheduleTaken
	}
	return err
}

// scanSchedules reads SQLSchedules' rows.
func scanSchedules(rows Rows) ([]agentbridge.Schedule, error) {
	var out []agentbridge.Schedule
	for rows.Next() {
		var s agentbridge.Schedule
		var ev string
		if err := rows.Scan(&s.Thread, &s.ID, &s.Cron, &s.TZ, &ev, &s.From, &s.SetSeq, &s.SetAt, &s.LastDue); err != nil {
			return nil, fmt.Errorf("read schedule: %w", err)
		}
		if err := json.Unmarshal([]byte(ev), &s.Event); err != nil {
			return nil, fmt.Errorf("decode schedule %s of thread %s: %w", s.ID, s.Thread, err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
