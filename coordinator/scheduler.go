package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// job is one queued invocation. trigger is known when the job comes from
// the follow loop; a job recovered from the ledger fetches it from the
// bridge. The participant's profile is the invocation's (inv.Profile).
type job struct {
	inv     ledger.Invocation
	trigger *agentbridge.Event
	// after is the thread's state just after the trigger, when known; a
	// scene step is derived from it (agentbridge.SceneStepFor).
	after *agentbridge.ThreadState
}

type pairKey struct{ thread, participant string }

// scheduler runs jobs: one FIFO per (thread, participant), so a busy
// participant answers its triggers in order; a max_concurrency limit across
// pairs; and max_invocations_per_minute per thread, which delays jobs
// rather than dropping them.
type scheduler struct {
	deps
	// queueDepth counts the jobs queued and not started (metrics.go).
	queueDepth prometheus.Gauge
	runs       schedulerRuns

	// stop ends the taking of new jobs; work bounds running ones.
	stop, work context.Context

	mu      sync.Mutex
	queues  map[pairKey][]job
	active  map[pairKey]bool
	running int
	starts  map[string][]time.Time // per thread, within the last minute
	wakeCh  chan struct{}
	wg      sync.WaitGroup
	notices sync.WaitGroup
}

// schedulerRuns is what the scheduler starts: invoke carries a job out
// (Coordinator.work, invoke.go), advance moves a party round on once one of its turns has
// ended (partyround.go), notice posts a notice (partynotice.go).
type schedulerRuns struct {
	invoke  func(ctx context.Context, j job)
	advance func(ctx context.Context, triggerID string)
	notice  func(ctx context.Context, n ledger.Notice)
}

func newScheduler(d deps, queueDepth prometheus.Gauge, runs schedulerRuns) *scheduler {
	return &scheduler{
		deps:       d,
		queueDepth: queueDepth,
		runs:       runs,
		queues:     make(map[pairKey][]job),
		active:     make(map[pairKey]bool),
		starts:     make(map[string][]time.Time),
		wakeCh:     make(chan struct{}),
	}
}

func (s *scheduler) start(stop, work context.Context) {
	s.stop, s.work = stop, work
}

// wake makes every waiting worker re-check the limits (a slot freed, the
// config changed).
func (s *scheduler) wake() {
	s.mu.Lock()
	close(s.wakeCh)
	s.wakeCh = make(chan struct{})
	s.mu.Unlock()
}

// enqueue appends j to its pair's FIFO, starting the pair's worker if idle.
func (s *scheduler) enqueue(j job) {
	k := pairKey{j.inv.Thread, j.inv.Participant}
	s.mu.Lock()
	s.queues[k] = append(s.queues[k], j)
	start := !s.active[k]
	s.active[k] = true
	s.mu.Unlock()
	s.queueDepth.Inc()
	if start {
		s.wg.Add(1)
		go s.worker(k)
	}
}

// worker drains one pair's FIFO, then exits.
func (s *scheduler) worker(k pairKey) {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		q := s.queues[k]
		if len(q) == 0 || s.stop.Err() != nil {
			delete(s.active, k)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if !s.acquire(k.thread) {
			s.mu.Lock()
			delete(s.active, k)
			s.mu.Unlock()
			return
		}
		// Take the head now, not before acquire: a cancel may have
		// dropped jobs meanwhile.
		s.mu.Lock()
		q = s.queues[k]
		if len(q) == 0 {
			s.mu.Unlock()
			s.release()
			continue
		}
		j := q[0]
		s.queues[k] = q[1:]
		if len(s.queues[k]) == 0 {
			delete(s.queues, k)
		}
		s.mu.Unlock()
		s.queueDepth.Dec()
		s.runs.invoke(s.work, j)
		s.release()
		if j.inv.Round > 0 {
			s.runs.advance(s.work, j.inv.TriggerID)
		}
	}
}

// acquire waits for a concurrency slot and a rate slot in the thread; it
// returns false when the coordinator stops taking jobs meanwhile.
func (s *scheduler) acquire(thread string) bool {
	for {
		ok, ch, wait := s.tryAcquire(thread)
		if ok {
			return true
		}
		if !s.sleep(ch, wait) {
			return false
		}
	}
}

// tryAcquire takes a concurrency slot and a rate slot in the thread when
// both are free. Otherwise it returns the channel woken when a slot may
// have freed and, when the rate is what holds the job, how long until the
// oldest start leaves the minute.
func (s *scheduler) tryAcquire(thread string) (ok bool, woken <-chan struct{}, wait time.Duration) {
	cfg := s.config()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	starts := s.starts[thread]
	for len(starts) > 0 && now.Sub(starts[0]) >= time.Minute {
		starts = starts[1:]
	}
	s.starts[thread] = starts
	rateOK := cfg.MaxInvocationsPerMinute <= 0 || len(starts) < cfg.MaxInvocationsPerMinute
	if !rateOK {
		wait = time.Minute - now.Sub(starts[0])
	}
	if rateOK && (cfg.MaxConcurrency <= 0 || s.running < cfg.MaxConcurrency) {
		s.running++
		s.starts[thread] = append(starts, now)
		return true, nil, 0
	}
	if len(starts) == 0 {
		delete(s.starts, thread)
	}
	return false, s.wakeCh, wait
}

// sleep waits until woken, for wait when it is positive, or until the
// coordinator stops taking jobs (it then returns false).
func (s *scheduler) sleep(woken <-chan struct{}, wait time.Duration) bool {
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-woken:
	case <-timer:
	case <-s.stop.Done():
		return false
	}
	return true
}

func (s *scheduler) release() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
	s.wake()
}

// wait returns when every worker and notice poster has exited.
func (s *scheduler) wait() {
	s.wg.Wait()
	s.notices.Wait()
}

// interruptQueued records every job still waiting as interrupted: a
// restarted coordinator runs it unless its reply is already in the thread.
func (s *scheduler) interruptQueued(ctx context.Context) {
	s.mu.Lock()
	var left []job
	for k, q := range s.queues {
		left = append(left, q...)
		delete(s.queues, k)
	}
	s.mu.Unlock()
	for _, j := range left {
		s.queueDepth.Dec()
		if err := s.db.SetStatus(ctx, j.inv.ID, ledger.StatusInterrupted, "the coordinator stopped before this invocation started"); err != nil {
			s.log.Error("record interrupted invocation", "id", j.inv.ID, "err", err)
		}
	}
}

// drop removes a cancelled job from its queue, if it is still waiting, and
// reports whether it did.
func (s *scheduler) drop(id int64) (dropped bool) {
	s.mu.Lock()
	for k, q := range s.queues {
		for i, j := range q {
			if j.inv.ID != id {
				continue
			}
			// The worker takes q[0] only after acquire; removing it
			// here makes the worker's take pick the next one.
			s.queues[k] = append(q[:i:i], q[i+1:]...)
			if len(s.queues[k]) == 0 {
				delete(s.queues, k)
			}
			dropped = true
			break
		}
	}
	s.mu.Unlock()
	if dropped {
		s.queueDepth.Dec()
	}
	return dropped
}

// postNotice posts a clarification or loop-guard notice in the background,
// retrying transient failures until the work context ends.
func (s *scheduler) postNotice(n ledger.Notice) {
	s.background(func(work context.Context) { s.runs.notice(work, n) })
}

// background runs f on the work context in its own goroutine, which the
// shutdown waits for as for the notices.
func (s *scheduler) background(f func(work context.Context)) {
	s.notices.Add(1)
	go func() {
		defer s.notices.Done()
		f(s.work)
	}()
}
