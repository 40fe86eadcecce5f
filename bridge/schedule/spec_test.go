package schedule

import (
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestParse: crons and zones the bridge reads, and the ones it answers
// ignored, naming the field.
func TestParse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ cron, tz, field string }{
		{"0 9 * * 1-5", "Europe/Berlin", ""},
		{"@daily", "UTC", ""},
		{"@every 1h", "UTC", ""},
		{"*/15 * * * *", "America/New_York", ""},
		{"0 9 * * 1-5", "Mars/Olympus", "schedule.tz"},
		{"0 9 * * 1-5", "Local", "schedule.tz"},
		{"61 9 * * *", "UTC", "schedule.cron"},
		{"0 9 * *", "UTC", "schedule.cron"},
		{"@every 10s", "UTC", "schedule.cron"},
		{"CRON_TZ=Asia/Tokyo 0 9 * * *", "UTC", "schedule.cron"},
		{"0 0 30 2 *", "UTC", "schedule.cron"},
	} {
		_, ig := Parse(c.cron, c.tz)
		switch {
		case c.field == "" && ig != nil:
			t.Errorf("%q in %s: %v", c.cron, c.tz, ig.Reason)
		case c.field != "" && (ig == nil || ig.Code != agentbridge.IgnoredBadSchedule || !strings.HasPrefix(ig.Reason, c.field)):
			t.Errorf("%q in %s: %+v, want ignored naming %s", c.cron, c.tz, ig, c.field)
		}
	}
}

// TestPlanFor: what a schedule owes as of a time, from its cursor.
func TestPlanFor(t *testing.T) {
	t.Parallel()
	hourly, _ := Parse("0 * * * *", "UTC")
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	for _, c := range []struct {
		name, cursor, now string
		post              bool
		count, skipped    int
		last, next        string
	}{
		{"not yet", "2026-01-01T10:00:00Z", "2026-01-01T10:59:59Z", false, 0, 0, "", "2026-01-01T11:00:00Z"},
		{"on time", "2026-01-01T10:00:00Z", "2026-01-01T11:00:02Z", true, 1, 0, "2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"},
		{"late within catch-up", "2026-01-01T10:00:00Z", "2026-01-01T11:59:00Z", true, 1, 0, "2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"},
		{"three missed, the last within", "2026-01-01T10:00:00Z", "2026-01-01T13:30:00Z", true, 3, 2, "2026-01-01T13:00:00Z", "2026-01-01T14:00:00Z"},
		{"missed beyond catch-up", "2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z", true, 1, 0, "2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"},
	} {
		p := PlanFor(hourly, at(c.cursor), at(c.now), time.Hour)
		last := ""
		if !p.Last.IsZero() {
			last = p.Last.Format(time.RFC3339)
		}
		if p.Post != c.post || p.Count != c.count || p.Skipped != c.skipped || last != c.last || p.Next.Format(time.RFC3339) != c.next {
			t.Errorf("%s: %+v", c.name, p)
		}
	}
	p := PlanFor(hourly, at("2026-01-01T10:00:00Z"), at("2026-01-01T14:30:00Z"), 20*time.Minute)
	if p.Post || p.Count != 4 || p.Skipped != 4 || p.SkipLast.Format(time.RFC3339) != "2026-01-01T14:00:00Z" {
		t.Errorf("all beyond catch-up: %+v", p)
	}
}
