// Schedules (contract 8.6): the rows the schedule controls write in their
// append (appendEvent), the claims of their due times, and their list.

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

var _ agentbridge.ScheduleStore = (*Store)(nil)

// Schedules lists the schedules of thread ("" for all), by thread and id.
func (s *Store) Schedules(ctx context.Context, thread string) (_ []agentbridge.Schedule, err error) {
	defer s.guard(time.Now(), &err)
	q, args := storecore.SchedulesQuery(thread)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	return storecore.ScanSchedules(rows)
}

// HandleScheduleDue moves a schedule's last handled due time under c
// through the writer, storing no event (agentbridge.ScheduleStore).
func (s *Store) HandleScheduleDue(ctx context.Context, thread string, c agentbridge.ScheduleClaim) (err error) {
	defer s.guard(time.Now(), &err)
	taken := false
	err = s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
		err := storecore.ClaimSchedule(ctx, thread, &c, connExec(conn))
		// A claim that does not hold is an answer, not a failure of the
		// group commit, which would roll back its other requests.
		taken = errors.Is(err, agentbridge.ErrScheduleTaken)
		if taken {
			return nil
		}
		return err
	})
	if err == nil && taken {
		err = agentbridge.ErrScheduleTaken
	}
	return err
}

// connExec runs the schedules' SQL on the writer's connection, inside its
// transaction.
func connExec(conn *sql.Conn) storecore.ExecFunc {
	return func(ctx context.Context, q string, args ...any) (int64, error) {
		res, err := conn.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
}
