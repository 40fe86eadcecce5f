package schedule_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/postgres"
	"github.com/agent-bridge/agent-bridge/bridge/schedule"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

var pg = pgtest.New()

func TestMain(m *testing.M) { os.Exit(pg.Run(m)) }

// store is what the tests need of a store.
type store interface {
	agentbridge.EventStore
	agentbridge.ScheduleStore
}

func openSQLite(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// setSchedule posts the person's schedule control to thread t.
func setSchedule(t *testing.T, s store, thread, content string) {
	t.Helper()
	res, err := s.Append(context.Background(), agentbridge.AppendRequest{Thread: thread,
		Input: agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user", Content: json.RawMessage(content)}})
	if err != nil || res.Ignored != nil {
		t.Fatalf("set schedule: %+v %v", res.Ignored, err)
	}
}

// posted is the due times the bridge posted to thread (meta.schedule),
// and the skip notices' texts.
func posted(t *testing.T, s store, thread string) (dues []string, notices []string) {
	t.Helper()
	evs, err := s.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		raw, ok := e.Meta.Extra[agentbridge.MetaSchedule]
		if !ok {
			continue
		}
		if e.Meta.Via != agentbridge.ViaSchedule {
			t.Errorf("a scheduled event with via %q", e.Meta.Via)
		}
		var m struct{ ID, Due string }
		_ = json.Unmarshal(raw, &m)
		if e.From == agentbridge.ScheduleSender {
			notices = append(notices, e.Text())
			continue
		}
		if e.From != "user" || e.To != "claude" {
			t.Errorf("scheduled post from %s to %s, want from the person to claude", e.From, e.To)
		}
		dues = append(dues, m.Due)
	}
	return dues, notices
}

// setAt moves the time the schedules of path were set to at, as if set
// then: the store stamps a control with the wall clock, and the tests'
// clocks run in other years.
func setAt(t *testing.T, path string, at time.Time) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE schedules SET set_at = ?`, agentbridge.FormatTime(at)); err != nil {
		t.Fatal(err)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWeekdaysAcrossDaylightSaving: "0 9 * * 1-5" in Europe/Berlin, on an
// injected clock over two weeks around the change to summer time
// (2027-03-28), posts on each of the ten weekdays at 09:00 Berlin time
// (08:00 UTC, then 07:00 UTC) and never at the weekend, however often it
// is stepped.
func TestWeekdaysAcrossDaylightSaving(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "b.db")
	s := openSQLite(t, path)
	if _, _, err := s.CreateThread(context.Background(), agentbridge.CreateThreadRequest{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	setSchedule(t, s, "t", `{"schedule":{"id":"standup","cron":"0 9 * * 1-5","tz":"Europe/Berlin","event":{"to":"claude","content":"summarise the open PRs"}}}`)
	now := mustTime(t, "2027-03-20T00:00:00Z") // a Saturday
	setAt(t, path, now)
	sch := schedule.New(s, schedule.Options{})
	ctx := context.Background()
	end := mustTime(t, "2027-04-04T00:00:00Z")
	for now.Before(end) {
		next, err := sch.Step(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		// Step at the due time (a little late) and every 7 hours between.
		now = now.Add(7 * time.Hour)
		if late := next.Add(1500 * time.Millisecond); late.Before(now) {
			now = late
		}
	}
	dues, notices := posted(t, s, "t")
	want := []string{
		"2027-03-22T08:00:00Z", "2027-03-23T08:00:00Z", "2027-03-24T08:00:00Z", "2027-03-25T08:00:00Z", "2027-03-26T08:00:00Z",
		"2027-03-29T07:00:00Z", "2027-03-30T07:00:00Z", "2027-03-31T07:00:00Z", "2027-04-01T07:00:00Z", "2027-04-02T07:00:00Z",
	}
	if strings.Join(dues, " ") != strings.Join(want, " ") || len(notices) != 0 {
		t.Fatalf("posted %v (notices %v), want %v", dues, notices, want)
	}
}

// TestCatchUpAfterDowntime: a bridge stopped over a due time posts it once
// when it starts within catch_up of it, and skips it with one notice
// beyond; the next due time is posted as usual.
func TestCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "b.db")
	ctx := context.Background()
	s := openSQLite(t, path)
	for _, id := range []string{"near", "far"} {
		if _, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
		setSchedule(t, s, id, `{"schedule":{"id":"daily","cron":"0 12 * * *","event":{"to":"claude","content":"daily"}}}`)
	}
	due := mustTime(t, "2027-06-01T12:00:00Z")
	setAt(t, path, due.Add(-time.Hour))
	if _, err := schedule.New(s, schedule.Options{}).Step(ctx, due.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	// "far" is stepped past the first due time before the stop, so that
	// only its next one is missed beyond catch_up.
	_ = s.Close()

	s = openSQLite(t, path) // the bridge starts again
	sch := schedule.New(s, schedule.Options{CatchUp: time.Hour})
	// near: started 40 min after the due time.
	if _, err := sch.Step(ctx, due.Add(40*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if dues, notices := posted(t, s, "near"); strings.Join(dues, " ") != "2027-06-01T12:00:00Z" || len(notices) != 0 {
		t.Fatalf("within catch_up: posted %v, notices %v", dues, notices)
	}
	// far is 40 min late too: both threads' schedules are due at 12:00, so
	// "far" needs its own downtime: three hours, on a scheduler of its own.
	_ = far(t, ctx, due)
	for range 3 {
		if _, err := sch.Step(ctx, due.Add(50*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if dues, _ := posted(t, s, "near"); len(dues) != 1 {
		t.Fatalf("stepping again posted again: %v", dues)
	}
	if _, err := sch.Step(ctx, due.Add(24*time.Hour+time.Second)); err != nil {
		t.Fatal(err)
	}
	if dues, _ := posted(t, s, "near"); len(dues) != 2 || dues[1] != "2027-06-02T12:00:00Z" {
		t.Fatalf("the next day: %v", dues)
	}
}

// far runs a bridge of its own whose only schedule's due time falls in a
// three-hour stop: at start it skips it with one notice (however often it
// steps) and posts the next day's as usual.
func far(t *testing.T, ctx context.Context, due time.Time) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), "far.db")
	s := openSQLite(t, path)
	if _, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "far"}); err != nil {
		t.Fatal(err)
	}
	setSchedule(t, s, "far", `{"schedule":{"id":"daily","cron":"0 12 * * *","event":{"to":"claude","content":"daily"}}}`)
	setAt(t, path, due.Add(-time.Hour))
	if _, err := schedule.New(s, schedule.Options{}).Step(ctx, due.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	sch := schedule.New(s, schedule.Options{CatchUp: time.Hour})
	for range 3 {
		if _, err := sch.Step(ctx, due.Add(3*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	dues, notices := posted(t, s, "far")
	if len(dues) != 0 || len(notices) != 1 || !strings.Contains(notices[0], "2027-06-01T12:00:00Z") || !strings.Contains(notices[0], "catch_up") {
		t.Fatalf("beyond catch_up: posted %v, notices %q; want one notice and no post", dues, notices)
	}
	if _, err := sch.Step(ctx, due.Add(24*time.Hour+time.Second)); err != nil {
		t.Fatal(err)
	}
	if dues, notices := posted(t, s, "far"); len(dues) != 1 || dues[0] != "2027-06-02T12:00:00Z" || len(notices) != 1 {
		t.Fatalf("the next day: posted %v, notices %v", dues, notices)
	}
	return nil
}

// TestTwoBridgesPostEachDueTimeOnce: two bridges on one PostgreSQL, their
// schedulers stepped at once at each of 100 due times of an every-minute
// schedule (one of them sometimes a minute behind), post each due time
// exactly once.
func TestTwoBridgesPostEachDueTimeOnce(t *testing.T) {
	t.Parallel()
	url := pg.Database(t)
	ctx := context.Background()
	var stores [2]*postgres.Store
	for i := range stores {
		s, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores[i] = s
	}
	if _, _, err := stores[0].CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	setSchedule(t, stores[0], "t", `{"schedule":{"id":"minutely","cron":"* * * * *","event":{"to":"claude","content":"tick"}}}`)
	scheds := [2]*schedule.Scheduler{schedule.New(stores[0], schedule.Options{}), schedule.New(stores[1], schedule.Options{})}
	start := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	for i := range 100 {
		now := start.Add(time.Duration(i)*time.Minute + 200*time.Millisecond)
		var wg sync.WaitGroup
		for b, sch := range scheds {
			at := now
			if b == 1 && i%7 == 3 {
				at = now.Add(-time.Minute) // behind: its read is stale
			}
			wg.Go(func() {
				if _, err := sch.Step(ctx, at); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	dues, notices := posted(t, stores[1], "t")
	if len(dues) != 100 || len(notices) != 0 {
		t.Fatalf("%d posts and %d notices over 100 due times, want 100 and 0", len(dues), len(notices))
	}
	seen := map[string]bool{}
	for i, d := range dues {
		if seen[d] {
			t.Fatalf("due time %s posted twice", d)
		}
		seen[d] = true
		if want := start.Add(time.Duration(i) * time.Minute).Format(time.RFC3339); d != want {
			t.Fatalf("post %d is for %s, want %s", i, d, want)
		}
	}
}

// TestRunPostsOnItsClock: Run, on an injected clock, posts when the clock
// reaches the due time and stops with its context.
func TestRunPostsOnItsClock(t *testing.T) {
	t.Parallel()
	t.Cleanup(testutil.CheckGoroutines(t))
	path := filepath.Join(t.TempDir(), "b.db")
	s := openSQLite(t, path)
	ctx, cancel := context.WithCancel(context.Background())
	if _, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	setSchedule(t, s, "t", `{"schedule":{"id":"h","cron":"@hourly","event":{"to":"claude","content":"hourly"}}}`)
	setAt(t, path, mustTime(t, "2030-01-01T10:30:00Z"))
	clock := newFakeClock(mustTime(t, "2030-01-01T10:59:00Z"))
	sch := schedule.New(s, schedule.Options{Clock: clock})
	done := make(chan struct{})
	go func() { defer close(done); sch.Run(ctx) }()
	clock.waitTimer(t)
	clock.set(mustTime(t, "2030-01-01T11:00:01Z"))
	testutil.WaitFor(t, 10*time.Second, "the post", func() bool {
		dues, _ := posted(t, s, "t")
		return len(dues) == 1 && dues[0] == "2030-01-01T11:00:00Z"
	})
	cancel()
	<-done
}

// fakeClock is a clock the test sets; After fires when the clock passes
// its deadline.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	armed   chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t, armed: make(chan struct{}, 16)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	select {
	case c.armed <- struct{}{}:
	default:
	}
	return ch
}

// set moves the clock to t, firing the waits it passes.
func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.ch <- t
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
}

// waitTimer waits until the scheduler waits on the clock.
func (c *fakeClock) waitTimer(t *testing.T) {
	t.Helper()
	select {
	case <-c.armed:
	case <-time.After(30 * time.Second):
		t.Fatal("the scheduler never waited on its clock")
	}
}

// control appends a control from `from` to thread and fails t unless the
// store takes it without an ignored note.
func control(t *testing.T, s store, thread, from, content string) {
	t.Helper()
	res, err := s.Append(context.Background(), agentbridge.AppendRequest{Thread: thread,
		Input: agentbridge.EventInput{Type: agentbridge.TypeControl, From: from, Content: json.RawMessage(content)}})
	if err != nil || res.Ignored != nil {
		t.Fatalf("control %s: %+v %v", content, res.Ignored, err)
	}
}

// TestRefusedPostIsHandledOnce: a due time whose post the thread refuses
// is not tried again at every step. When the person who set the schedule
// is muted, the due time is handled by one notice to them that says why,
// however often the scheduler steps, and the next due time is tried (and
// noticed) as usual. When the thread refuses the notice too (paused, and
// the person no longer among the humans), the due time is handled with
// no event and one log line.
func TestRefusedPostIsHandledOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	due := mustTime(t, "2027-06-01T12:00:00Z")
	const daily = `{"schedule":{"id":"daily","cron":"0 12 * * *","event":{"to":"claude","content":"daily"}}}`
	lastDue := func(t *testing.T, s store, thread string) string {
		t.Helper()
		list, err := s.Schedules(ctx, thread)
		if err != nil || len(list) != 1 {
			t.Fatalf("schedules of %s: %+v %v", thread, list, err)
		}
		return list[0].LastDue
	}

	t.Run("muted: one notice", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "m.db")
		s, err := sqlite.Open(ctx, path, sqlite.Options{Humans: agentbridge.Humans{"user", "maria"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if _, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "m"}); err != nil {
			t.Fatal(err)
		}
		control(t, s, "m", "maria", daily)
		setAt(t, path, due.Add(-time.Hour))
		control(t, s, "m", "user", `{"mute":{"targets":["maria"]}}`)
		sch := schedule.New(s, schedule.Options{})
		for range 4 {
			if _, err := sch.Step(ctx, due.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		var notices []agentbridge.Event
		evs, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "m", After: -1})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if _, ok := e.Meta.Extra[agentbridge.MetaSchedule]; ok {
				notices = append(notices, e)
			}
		}
		if len(notices) != 1 || notices[0].From != agentbridge.ScheduleSender || notices[0].To != "maria" ||
			!strings.Contains(notices[0].Text(), "2027-06-01T12:00:00Z") || !strings.Contains(notices[0].Text(), "maria is muted") {
			t.Fatalf("after four steps: %d scheduled events %+v; want one notice to maria saying she is muted", len(notices), notices)
		}
		if got := lastDue(t, s, "m"); got != "2027-06-01T12:00:00Z" {
			t.Fatalf("last due %q: the refused due time is not handled", got)
		}
		if _, err := sch.Step(ctx, due.Add(24*time.Hour+time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := lastDue(t, s, "m"); got != "2027-06-02T12:00:00Z" {
			t.Fatalf("the next day: last due %q", got)
		}
	})

	t.Run("notice refused too: one log line", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "p.db")
		s, err := sqlite.Open(ctx, path, sqlite.Options{Humans: agentbridge.Humans{"user", "maria"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "p"}); err != nil {
			t.Fatal(err)
		}
		control(t, s, "p", "maria", daily)
		setAt(t, path, due.Add(-time.Hour))
		control(t, s, "p", "user", `{"pause":{"on":true}}`)
		_ = s.Close()
		// maria is no longer one of the humans: in the paused thread
		// neither her post nor the bridge's notice is taken.
		s, err = sqlite.Open(ctx, path, sqlite.Options{Humans: agentbridge.Humans{"user"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		before, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "p", After: -1})
		if err != nil {
			t.Fatal(err)
		}
		var logs testutil.Buffer
		sch := schedule.New(s, schedule.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		for range 4 {
			if _, err := sch.Step(ctx, due.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		after, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "p", After: -1})
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Fatalf("%d events stored in the paused thread", len(after)-len(before))
		}
		if n := strings.Count(logs.String(), "given up"); n != 1 || !strings.Contains(logs.String(), "thread_paused") {
			t.Fatalf("%d log lines giving the due time up, want 1:\n%s", n, logs.String())
		}
		if got := lastDue(t, s, "p"); got != "2027-06-01T12:00:00Z" {
			t.Fatalf("last due %q: the refused due time is not handled", got)
		}
	})
}
