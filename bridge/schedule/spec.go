// Package schedule is the bridge's schedules (contract 8.6): reading a
// schedule's cron and time zone (robfig/cron/v3's syntax), deciding which
// due times to post and which to skip after downtime, and the Scheduler
// that posts each due time exactly once per time, through the store's
// claim of (schedule, due time), whichever of several bridges on one
// database gets there first. The clock is injected, so tests need no
// waiting.
package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// minEvery is the shortest period "@every" may have: a schedule posts a
// message a person reads, and each post may wake agents.
const minEvery = time.Minute

// Spec is a schedule's parsed cron in its time zone.
type Spec struct {
	s cron.Schedule
}

// parser reads the standard five fields and the descriptors (@daily,
// @every 1h …); seconds are not offered.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads expr in zone tz. A bad one is an *agentbridge.Ignored whose
// sentence names the field (schedule.cron or schedule.tz).
func Parse(expr, tz string) (Spec, *agentbridge.Ignored) {
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "" || strings.EqualFold(tz, "local") {
		return Spec{}, bad("schedule.tz: %q is not a time zone this bridge knows; use an IANA name such as \"Europe/Berlin\" or \"UTC\", so the schedule has no effect", tz)
	}
	up := strings.ToUpper(strings.TrimSpace(expr))
	if strings.HasPrefix(up, "TZ=") || strings.HasPrefix(up, "CRON_TZ=") {
		return Spec{}, bad("schedule.cron: %q names a zone inside the cron; put the zone in tz instead, so the schedule has no effect", expr)
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return Spec{}, bad("schedule.cron: %q is not a cron the bridge can read (%v); use five fields such as \"0 9 * * 1-5\", or @daily, @hourly, @every 1h, so the schedule has no effect", expr, err)
	}
	switch c := s.(type) {
	case *cron.SpecSchedule:
		c.Location = loc
	case cron.ConstantDelaySchedule:
		if c.Delay < minEvery {
			return Spec{}, bad("schedule.cron: %q is more often than once a minute, which a schedule may not be, so the schedule has no effect", expr)
		}
	}
	sp := Spec{s: s}
	probe := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if sp.Next(probe).IsZero() {
		return Spec{}, bad("schedule.cron: %q is never due, so the schedule has no effect", expr)
	}
	return sp, nil
}

// bad is the ignored note of a schedule the bridge cannot read.
func bad(format string, args ...any) *agentbridge.Ignored {
	return &agentbridge.Ignored{Code: agentbridge.IgnoredBadSchedule, Reason: fmt.Sprintf(format, args...)}
}

// Check is the ignored note of a schedule control whose cron or zone the
// bridge cannot read, nil for one it can (or one that turns a schedule
// off).
func Check(sc *agentbridge.ScheduleControl) *agentbridge.Ignored {
	if sc == nil || sc.Off {
		return nil
	}
	_, ig := Parse(sc.Cron, sc.TZ)
	return ig
}

// maxWalk bounds how many due times one walk from a cursor visits (a
// minute's schedule over a year of downtime is 525,600).
const maxWalk = 1 << 20

// Next is the first due time after t (zero when there is none within five
// years), in UTC, whole seconds.
func (s Spec) Next(t time.Time) time.Time {
	n := s.s.Next(t)
	if n.IsZero() {
		return n
	}
	return n.UTC().Truncate(time.Second)
}

// NextOf is the next due time of a stored schedule after now: the first
// after its last handled due time (or its setting) and after now, "" when
// it cannot be read.
func NextOf(sc agentbridge.Schedule, now time.Time) string {
	sp, ig := Parse(sc.Cron, sc.TZ)
	if ig != nil {
		return ""
	}
	n := sp.Next(cursorOf(sc))
	for i := 0; !n.IsZero() && !n.After(now) && i < maxWalk; i++ {
		n = sp.Next(n)
	}
	if n.IsZero() || !n.After(now) {
		return ""
	}
	return n.Format(time.RFC3339)
}

// cursorOf is the time a schedule's next due time follows: its last
// handled due time, else the time it was set.
func cursorOf(sc agentbridge.Schedule) time.Time {
	if t, err := time.Parse(time.RFC3339, sc.LastDue); err == nil && sc.LastDue != "" {
		return t
	}
	t, _ := agentbridge.ParseTime(sc.SetAt)
	return t
}
