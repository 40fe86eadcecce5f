package schedule

import (
	"context"
	"errors"
	"log/slog"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// DefaultCatchUp is how old a missed due time may be and still be posted
// when the bridge gets to it (the bridge config's catch_up).
const DefaultCatchUp = time.Hour

// DefaultPoll is how often the scheduler reads the schedules again without
// being woken: a schedule set through another bridge on the same database
// is seen within it.
const DefaultPoll = 30 * time.Second

// retryAfter is the wait after a step that failed (the database
// unreachable, say).
const retryAfter = time.Second

// Store is what the scheduler needs of the event store: appends (with
// their ScheduleClaim) and the schedules.
type Store interface {
	Append(ctx context.Context, req agentbridge.AppendRequest) (agentbridge.AppendResult, error)
	agentbridge.ScheduleStore
}

// Clock is the scheduler's time: time.Now and time.After in production, a
// test's own clock in tests.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// WallClock is the real time.
type WallClock struct{}

// Now is time.Now.
func (WallClock) Now() time.Time { return time.Now() }

// After is time.After.
func (WallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configures a Scheduler; the zero values are the defaults.
type Options struct {
	// CatchUp: a due time missed by more than this is skipped with one
	// notice instead of posted (DefaultCatchUp).
	CatchUp time.Duration
	// Poll is how often the schedules are read again (DefaultPoll).
	Poll time.Duration
	// Clock is the scheduler's time (the wall clock).
	Clock  Clock
	Logger *slog.Logger
}

// Scheduler posts every schedule's due times. Several schedulers (one per
// bridge on one PostgreSQL) may run at once: each due time is claimed in
// the append's transaction (agentbridge.ScheduleClaim), so exactly one
// posts it. It is safe for concurrent use.
type Scheduler struct {
	store   Store
	catchUp time.Duration
	poll    time.Duration
	clock   Clock
	log     *slog.Logger
	wake    chan struct{}
}

// New returns a scheduler over store; Run starts it.
func New(store Store, opts Options) *Scheduler {
	if opts.CatchUp <= 0 {
		opts.CatchUp = DefaultCatchUp
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Clock == nil {
		opts.Clock = WallClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Scheduler{store: store, catchUp: opts.CatchUp, poll: opts.Poll, clock: opts.Clock,
		log: opts.Logger.With("component", "schedule"), wake: make(chan struct{}, 1)}
}

// Wake makes the scheduler read the schedules again now: one was set or
// removed through this bridge.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run posts due times until ctx ends: a step at start (which posts or
// skips what was missed while the bridge was down), then one at the next
// due time, on a wake-up, or after Poll, whichever comes first.
func (s *Scheduler) Run(ctx context.Context) {
	failing := false
	for {
		now := s.clock.Now()
		next, err := s.Step(ctx, now)
		wait := s.poll
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				s.log.Warn("schedules: a step failed; trying again every second", "err", err)
			}
			failing, wait = true, retryAfter
		default:
			if failing {
				s.log.Info("schedules: stepping again")
			}
			failing = false
			if !next.IsZero() && next.Sub(now) < wait {
				wait = max(next.Sub(now), 0)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-s.clock.After(wait):
		}
	}
}

// Step handles every schedule as of now: a due time that has come is
// posted (the latest one, if it is at most CatchUp old), the due times
// before it are skipped with one notice; it returns the earliest next due
// time (zero when no schedule has one). A due time another bridge handled
// first is left to it.
func (s *Scheduler) Step(ctx context.Context, now time.Time) (time.Time, error) {
	list, err := s.store.Schedules(ctx, "")
	if err != nil {
		return time.Time{}, err
	}
	var next time.Time
	for _, sc := range list {
		n, err := s.stepOne(ctx, sc, now)
		if err != nil {
			return time.Time{}, err
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next, nil
}

// Plan is what one schedule owes as of a time: the due times that have
// come since its cursor (Count of them, from First to Last), whether Last
// is to be posted (within catch-up) and the next due time after now.
type Plan struct {
	Count       int
	First, Last time.Time
	// Skipped is how many due times are skipped (all but Last when it is
	// posted), the earliest First and the latest SkipLast.
	Skipped  int
	SkipLast time.Time
	Post     bool
	Next     time.Time
}

// PlanFor decides what spec owes as of now when its last handled due time
// (or its setting) is cursor: pure, so that the rules are tested alone.
func PlanFor(spec Spec, cursor, now time.Time, catchUp time.Duration) Plan {
	var p Plan
	var prev time.Time
	n := spec.Next(cursor)
	for i := 0; !n.IsZero() && !n.After(now) && i < maxWalk; i++ {
		if p.Count == 0 {
			p.First = n
		}
		p.Count++
		prev, p.Last = p.Last, n
		n = spec.Next(n)
	}
	p.Next = n
	if p.Count == 0 {
		return p
	}
	p.Post = now.Sub(p.Last) <= catchUp
	switch {
	case p.Post && p.Count > 1:
		p.Skipped, p.SkipLast = p.Count-1, prev
	case !p.Post:
		p.Skipped, p.SkipLast = p.Count, p.Last
	}
	return p
}

// stepOne handles one schedule; it returns its next due time.
func (s *Scheduler) stepOne(ctx context.Context, sc agentbridge.Schedule, now time.Time) (time.Time, error) {
	spec, ig := Parse(sc.Cron, sc.TZ)
	if ig != nil {
		return time.Time{}, nil // stored by an older check: never due
	}
	cursor := cursorOf(sc)
	p := PlanFor(spec, cursor, now, s.catchUp)
	if p.Count == 0 {
		return p.Next, nil
	}
	prev := sc.LastDue
	if p.Skipped > 0 {
		claim := &agentbridge.ScheduleClaim{ID: sc.ID, SetSeq: sc.SetSeq, Prev: prev, Due: stamp(p.SkipLast)}
		in := agentbridge.SkippedInput(sc, p.Skipped, p.First, p.SkipLast, s.catchUp)
		posted, err := s.claim(ctx, sc, claim, in)
		if err != nil || !posted {
			return p.Next, err
		}
		s.log.Info("schedule skipped missed due times", "thread", sc.Thread, "schedule", sc.ID, "count", p.Skipped, "last", claim.Due)
		prev = claim.Due
	}
	if p.Post {
		claim := &agentbridge.ScheduleClaim{ID: sc.ID, SetSeq: sc.SetSeq, Prev: prev, Due: stamp(p.Last)}
		posted, err := s.claim(ctx, sc, claim, agentbridge.ScheduledInput(sc, p.Last))
		if err != nil || !posted {
			return p.Next, err
		}
		s.log.Info("schedule posted", "thread", sc.Thread, "schedule", sc.ID, "due", claim.Due, "late", now.Sub(p.Last).Round(time.Millisecond))
	}
	return p.Next, nil
}

// claim appends in under claim; posted is false when another bridge (or
// a change of the schedule) got there first, or when the thread refuses
// it, which is then handled once (refused).
func (s *Scheduler) claim(ctx context.Context, sc agentbridge.Schedule, claim *agentbridge.ScheduleClaim, in agentbridge.EventInput) (bool, error) {
	_, err := s.store.Append(ctx, agentbridge.AppendRequest{Thread: sc.Thread, Input: in, Schedule: claim})
	switch refusal := refusalOf(err); {
	case err == nil:
		return true, nil
	case errors.Is(err, agentbridge.ErrScheduleTaken):
		return false, nil
	case refusal != nil:
		return false, s.refused(ctx, sc, claim, refusal)
	}
	return false, err
}

// refused handles a due time whose post the thread refuses (its sender
// muted, say), which it would refuse at every step: the due time is
// claimed by one notice to the person saying why, or, when the thread
// refuses that too (paused to all but humans, say), with no event and one
// log line. Either way the next due time is tried as usual.
func (s *Scheduler) refused(ctx context.Context, sc agentbridge.Schedule, claim *agentbridge.ScheduleClaim, refusal *agentbridge.Error) error {
	due, _ := time.Parse(time.RFC3339, claim.Due)
	_, err := s.store.Append(ctx, agentbridge.AppendRequest{Thread: sc.Thread, Input: agentbridge.RefusedInput(sc, due, refusal), Schedule: claim})
	noticeRefusal := refusalOf(err)
	switch {
	case err == nil:
		s.log.Info("schedule refused by its thread; the person is told", "thread", sc.Thread, "schedule", sc.ID, "due", claim.Due, "err", refusal)
		return nil
	case errors.Is(err, agentbridge.ErrScheduleTaken):
		return nil
	case noticeRefusal == nil:
		return err
	}
	switch err := s.store.HandleScheduleDue(ctx, sc.Thread, *claim); {
	case errors.Is(err, agentbridge.ErrScheduleTaken):
		return nil
	case err != nil:
		return err
	}
	s.log.Warn("schedule refused by its thread, which refuses the notice too; this due time is given up", "thread", sc.Thread,
		"schedule", sc.ID, "due", claim.Due, "err", refusal, "notice_err", noticeRefusal)
	return nil
}

// refusalOf is err as the thread's refusal, which trying again cannot
// change (nil for no error, a claim that did not hold, or a failure of
// the store).
func refusalOf(err error) *agentbridge.Error {
	var ae *agentbridge.Error
	if errors.As(err, &ae) && ae.Code != agentbridge.ECodeUnavailable && ae.Code != agentbridge.ECodeInternal {
		return ae
	}
	return nil
}

// stamp is a due time as a claim and meta.schedule carry it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
