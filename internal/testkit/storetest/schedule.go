package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// testSchedules: a person's schedule control writes its schedule, a bad
// cron or zone is ignored naming the field and writes none, another
// sender's counts not; a claim moves the last due time once, from the
// value read, and of concurrent claims exactly one holds; setting a
// schedule again starts it afresh; a due time is handled with no event
// once; off removes it, and turning off one the thread does not have is
// ignored with a sentence.
func testSchedules(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ss, ok := s.(agentbridge.ScheduleStore)
	if !ok {
		t.Skip("the store keeps no schedules")
	}
	ctx := context.Background()
	NewThread(t, s, "t")
	set := MustAppend(t, s, "t", Control("user", `{"schedule":{"id":"standup","cron":"0 9 * * 1-5","tz":"Europe/Berlin","event":{"to":"claude","content":"summarise the open PRs"}}}`))
	for _, c := range []struct{ content, field string }{
		{`{"schedule":{"id":"bad","cron":"61 9 * * *","event":{"content":"x"}}}`, "schedule.cron"},
		{`{"schedule":{"id":"bad","cron":"0 9 * * *","tz":"Mars/Olympus","event":{"content":"x"}}}`, "schedule.tz"},
	} {
		res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: Control("user", c.content)})
		if err != nil || res.Ignored == nil || res.Ignored.Code != agentbridge.IgnoredBadSchedule || !contains(res.Ignored.Reason, c.field) {
			t.Errorf("%s: %+v %v, want ignored bad_schedule naming %s", c.content, res.Ignored, err, c.field)
		}
	}
	MustAppend(t, s, "t", Control("claude", `{"schedule":{"id":"agent","cron":"@daily","event":{"content":"x"}}}`))
	list, err := ss.Schedules(ctx, "t")
	if err != nil || len(list) != 1 {
		t.Fatalf("schedules: %+v %v, want the standup only", list, err)
	}
	sc := list[0]
	if sc.ID != "standup" || sc.Cron != "0 9 * * 1-5" || sc.TZ != "Europe/Berlin" || sc.From != "user" || sc.SetSeq != set.Seq ||
		sc.SetAt != set.TS || sc.LastDue != "" || sc.Event.To != "claude" || string(sc.Event.Content) != `"summarise the open PRs"` {
		t.Fatalf("schedule: %+v", sc)
	}
	post := func(prev, due string) error {
		_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: Msg("user", "due "+due),
			Schedule: &agentbridge.ScheduleClaim{ID: "standup", SetSeq: sc.SetSeq, Prev: prev, Due: due}})
		return err
	}
	const d1, d2 = "2026-03-02T08:00:00Z", "2026-03-03T08:00:00Z"
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Go(func() {
			err := post("", d1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case !errors.Is(err, agentbridge.ErrScheduleTaken):
				t.Errorf("a concurrent claim: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d of 8 concurrent claims of one due time held, want 1", won)
	}
	if err := post("", d2); !errors.Is(err, agentbridge.ErrScheduleTaken) {
		t.Fatalf("a claim from a stale last due time: %v, want taken", err)
	}
	if err := post(d1, d2); err != nil {
		t.Fatal(err)
	}
	if list, _ := ss.Schedules(ctx, ""); len(list) != 1 || list[0].LastDue != d2 {
		t.Fatalf("after two posts: %+v", list)
	}
	evs, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "t", After: -1})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if contains(e.Text(), "due ") {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d posts stored, want 2", n)
	}
	again := MustAppend(t, s, "t", Control("user", `{"schedule":{"id":"standup","cron":"@hourly","event":{"content":"hourly"}}}`))
	if list, _ := ss.Schedules(ctx, "t"); len(list) != 1 || list[0].LastDue != "" || list[0].SetSeq != again.Seq || list[0].TZ != "UTC" {
		t.Fatalf("set again: %+v", list)
	}
	if err := post(d2, "2026-03-04T08:00:00Z"); !errors.Is(err, agentbridge.ErrScheduleTaken) {
		t.Fatalf("a claim of the replaced schedule: %v, want taken", err)
	}
	// A due time handled with no event (its post and notice refused)
	// moves the last due time as a post would, once.
	if err := ss.HandleScheduleDue(ctx, "t", agentbridge.ScheduleClaim{ID: "standup", SetSeq: again.Seq, Prev: "", Due: d1}); err != nil {
		t.Fatal(err)
	}
	if err := ss.HandleScheduleDue(ctx, "t", agentbridge.ScheduleClaim{ID: "standup", SetSeq: again.Seq, Prev: "", Due: d1}); !errors.Is(err, agentbridge.ErrScheduleTaken) {
		t.Fatalf("handling a due time twice: %v, want taken", err)
	}
	if list, _ := ss.Schedules(ctx, "t"); len(list) != 1 || list[0].LastDue != d1 {
		t.Fatalf("after a due time handled with no event: %+v", list)
	}
	MustAppend(t, s, "t", Control("user", `{"schedule":{"id":"standup","off":true}}`))
	if list, _ := ss.Schedules(ctx, ""); len(list) != 0 {
		t.Fatalf("after off: %+v", list)
	}
	res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: Control("user", `{"schedule":{"id":"standup","off":true}}`)})
	if err != nil || res.Ignored == nil || res.Ignored.Code != agentbridge.IgnoredNoSchedule || !contains(res.Ignored.Reason, `no schedule "standup"`) {
		t.Fatalf("turning off a schedule the thread does not have: %+v %v, want ignored no_schedule naming it", res.Ignored, err)
	}
	if err := ss.HandleScheduleDue(ctx, "t", agentbridge.ScheduleClaim{ID: "standup", SetSeq: again.Seq, Prev: "", Due: d1}); !errors.Is(err, agentbridge.ErrScheduleTaken) {
		t.Fatalf("handling a due time of a removed schedule: %v, want taken", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
