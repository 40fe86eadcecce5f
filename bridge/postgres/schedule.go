// Schedules (contract 8.6): the rows the schedule controls write in their
// append (appendEvent), the claims of their due times, and their list.

package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

var _ agentbridge.ScheduleStore = (*Store)(nil)

// Schedules lists the schedules of thread ("" for all), by thread and id.
func (s *Store) Schedules(ctx context.Context, thread string) (_ []agentbridge.Schedule, err error) {
	defer s.guard(time.Now(), &err)
	q, args := storecore.SchedulesQuery(thread)
	rows, err := s.pool.Query(ctx, storecore.Rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	return storecore.ScanSchedules(rows)
}

// HandleScheduleDue moves a schedule's last handled due time under c,
// storing no event (agentbridge.ScheduleStore).
func (s *Store) HandleScheduleDue(ctx context.Context, thread string, c agentbridge.ScheduleClaim) (err error) {
	defer s.guard(time.Now(), &err)
	return storecore.ClaimSchedule(ctx, thread, &c, schedExec(s.pool))
}

// execer is a transaction or the pool.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// schedExec runs the schedules' SQL, its placeholders rebound, on e.
func schedExec(e execer) storecore.ExecFunc {
	return func(ctx context.Context, q string, args ...any) (int64, error) {
		tag, err := e.Exec(ctx, storecore.Rebind(q), args...)
		return tag.RowsAffected(), err
	}
}
