// Schedules (contract 8.6): the rows the schedule controls write in their
// append (appendEvent) and the scheduler's claims move; here, their list.

package sqlite

import (
	"context"
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
