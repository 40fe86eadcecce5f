package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// Runs you can watch and stop (contract 5.3, 5.4): while an invocation is
// being worked on it is registered with its cancel function, and its
// progress records are buffered in memory and flushed to the ledger in
// batches.

const (
	// progressFlush is how often buffered progress reaches the ledger: a
	// follower sees it this late at most, and a flooding adapter costs
	// one commit per period.
	progressFlush = 200 * time.Millisecond
	// presenceMinInterval caps status-driven presence updates at four a
	// second per participant.
	presenceMinInterval = 250 * time.Millisecond
	// presenceDelay is how long a run goes before its participant is
	// reported thinking: a fast reply is not slowed by a presence post
	// competing with its adapter for the CPU.
	presenceDelay = 100 * time.Millisecond
	// maxStatusChars bounds the status shown as presence details.
	maxStatusChars = 200
)

// runRegistry maps the invocations being worked on to their cancel
// functions.
//
// It also remembers the cancels of jobs that are neither queued nor
// registered: a job a worker has taken but not registered yet, or one not
// handed to the scheduler yet (just committed, or being recovered at
// start-up), learns of its cancel when it registers, without a ledger read
// on every run's way to its start. Every cancel of this coordinator goes
// through cancelInvocation, ledger first, then the scheduler's queue, then
// here. (On a PostgreSQL ledger, a former lease holder still in its
// shutdown grace could cancel through its own status server; the ledger
// then keeps the run from posting, but its adapter runs.)
type runRegistry struct {
	mu   sync.Mutex
	runs map[int64]context.CancelCauseFunc
	// missed holds the ids of the last maxMissedCancels cancels that found
	// no run, in order, and missedSet the same ids.
	missed    []int64
	missedSet map[int64]bool
}

// maxMissedCancels bounds the cancels remembered for runs not registered
// yet. Such a run registers within moments of its cancel, and a cancel
// that finds the run ended or interrupted (the rest of what is kept)
// comes from a person, not a burst.
const maxMissedCancels = 4096

func newRunRegistry() *runRegistry {
	return &runRegistry{runs: make(map[int64]context.CancelCauseFunc), missedSet: make(map[int64]bool)}
}

// add registers a run and reports whether a cancel came for it before.
func (r *runRegistry) add(id int64, cancel context.CancelCauseFunc) (cancelled bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs[id] = cancel
	return r.missedSet[id]
}

// count is how many runs are registered: the adapters running now.
func (r *runRegistry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.runs)
}

func (r *runRegistry) remove(id int64) {
	r.mu.Lock()
	delete(r.runs, id)
	r.mu.Unlock()
}

// cancel stops the run's adapter (if it is being worked on here), or
// remembers the cancel for when it registers.
func (r *runRegistry) cancel(id int64) {
	r.mu.Lock()
	cancel := r.runs[id]
	if cancel == nil && !r.missedSet[id] {
		if len(r.missed) == maxMissedCancels {
			delete(r.missedSet, r.missed[0])
			r.missed = r.missed[1:]
		}
		r.missed = append(r.missed, id)
		r.missedSet[id] = true
	}
	r.mu.Unlock()
	if cancel != nil {
		cancel(adapters.ErrCancelled)
	}
}

// runMonitor collects one run's progress records as the adapter writes
// them and flushes them to the ledger every progressFlush. Its memory is
// bounded: only the last ledger.KeepProgress unflushed records are kept.
type runMonitor struct {
	db  *ledger.DB
	log *slog.Logger
	// metrics counts the usage reported; giveUp stops the run when the
	// adapter reports a failure (runRegistry.giveUp).
	metrics     *metrics
	giveUp      func(id int64)
	id          int64
	participant string
	// counted is the usage already added to the metrics.
	counted ledger.Usage

	mu      sync.Mutex
	pending []ledger.Progress
	count   int64
	usage   *ledger.Usage
	status  string
	// session is the last CLI session id the adapter reported.
	session string
	// failure is the first failure the adapter reported (contract 8.5):
	// the run is stopped when it comes.
	failure *agentbridge.Failure
	// statusCh is signalled (never blocking) when status changes.
	statusCh chan struct{}

	stop chan struct{}
	done chan struct{}
}

// startMonitor starts the flusher of invocation id; stopMonitor must be
// called, and flushes what is left.
func (c *Coordinator) startMonitor(keep context.Context, inv ledger.Invocation) *runMonitor {
	m := &runMonitor{db: c.db, log: c.log, metrics: c.metrics, giveUp: c.runs.giveUp, id: inv.ID, participant: inv.Participant, statusCh: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(progressFlush)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				m.flush(keep)
			case <-m.stop:
				m.flush(keep)
				return
			}
		}
	}()
	return m
}

// stopMonitor flushes the last records and waits for the flusher.
func (m *runMonitor) stopMonitor() {
	close(m.stop)
	<-m.done
}

// record is the adapter's Spec.Progress: it only appends under a lock, so
// the pipe keeps being drained whatever the ledger is doing.
func (m *runMonitor) record(r adapters.ProgressRecord) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) >= 2*ledger.KeepProgress {
		// Only the last KeepProgress survive the flush anyway.
		n := copy(m.pending, m.pending[len(m.pending)-ledger.KeepProgress:])
		m.pending = m.pending[:n]
	}
	m.pending = append(m.pending, ledger.Progress{
		TS: agentbridge.FormatTime(time.Now()), Status: r.Status, Kind: r.Kind, Detail: r.Detail,
	})
	m.count++
	if r.Usage != nil {
		m.usage = &ledger.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, CostUSD: r.Usage.CostUSD}
	}
	if r.Session != "" {
		m.session = r.Session
	}
	if r.Failure != nil && m.failure == nil {
		m.failure = r.Failure
		// The adapter says its run failed: what it would still do (a
		// CLI waiting minutes to retry a usage limit) is not worth
		// waiting for.
		m.giveUp(m.id)
	}
	if r.Status != "" && r.Status != m.status {
		m.status = r.Status
		select {
		case m.statusCh <- struct{}{}:
		default:
		}
	}
}

// reportedFailure is the failure the adapter reported, nil for none.
func (m *runMonitor) reportedFailure() *agentbridge.Failure {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failure
}

// latestSession is the last CLI session id the adapter reported ("" if
// none).
func (m *runMonitor) latestSession() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.session
}

// latestStatus is the last non-empty status the adapter reported.
func (m *runMonitor) latestStatus() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

func (m *runMonitor) flush(ctx context.Context) {
	m.mu.Lock()
	if m.count == 0 && m.usage == nil {
		m.mu.Unlock()
		return
	}
	b := ledger.ProgressBatch{Invocation: m.id, Records: m.pending, Count: m.count, Usage: m.usage}
	m.pending, m.count, m.usage = nil, 0, nil
	m.mu.Unlock()
	if err := m.db.AddProgress(ctx, []ledger.ProgressBatch{b}); err != nil {
		m.log.Error("record progress", "id", m.id, "err", err)
		return
	}
	if u := b.Usage; u != nil {
		// Usage is cumulative; the counters take what is new.
		m.metrics.addUsage(m.participant, u.InputTokens-m.counted.InputTokens,
			u.OutputTokens-m.counted.OutputTokens, u.CostUSD-m.counted.CostUSD)
		m.counted = *u
	}
}

// cancelReason is the invocation's error text after a cancel.
func cancelReason(by string) string {
	if by == "" {
		return "cancelled"
	}
	return "cancelled by " + by
}

// cancelNotice is the coordinator's message saying a running invocation was
// stopped; its kind makes it one per (trigger, participant).
func (c *Coordinator) cancelNotice(cfg *config.Config, inv ledger.Invocation, by string) ledger.Notice {
	text := fmt.Sprintf("%s's run was cancelled", inv.Participant)
	if by != "" {
		text += " by " + by
	}
	post := agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: agentbridge.ToAll,
		Content: mustJSON(text + "."),
		Meta: agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "cancelled"},
			Extra: map[string]json.RawMessage{rules.MetaParticipant: mustJSON(inv.Participant)}},
	}
	return ledger.Notice{TriggerID: inv.TriggerID, Kind: "cancelled:" + inv.Participant, Thread: inv.Thread, Post: post}
}

// Cancel stops one invocation (contract 5.4): a queued one is dropped, a
// running one's process group is stopped and one notice posted. It returns
// ledger.ErrNotFound or ledger.ErrNotRunning when there is nothing to stop.
func (c *Coordinator) Cancel(ctx context.Context, id int64, by string) (ledger.Invocation, error) {
	inv, err := c.db.Invocation(ctx, id)
	if err != nil {
		return ledger.Invocation{}, err
	}
	return c.cancelInvocation(ctx, inv, by)
}

func (c *Coordinator) cancelInvocation(ctx context.Context, inv ledger.Invocation, by string) (ledger.Invocation, error) {
	notice := c.cancelNotice(c.cfg.Load(), inv, by)
	// The ledger first: from this commit on, no finish of the run can
	// record a reply to post.
	prev, err := c.db.Cancel(ctx, inv.ID, cancelReason(by), notice)
	if err != nil {
		return inv, err
	}
	if c.sched.drop(inv.ID) {
		c.claims.release(ctx, inv)
	} else {
		c.runs.cancel(inv.ID)
	}
	if prev == ledger.StatusRunning {
		c.sched.postNotice(notice)
	}
	c.metrics.observe(ledger.StatusCancelled, 0)
	c.log.Info("invocation cancelled", "id", inv.ID, "participant", inv.Participant, "thread", inv.Thread, "was", prev, "by", by)
	inv.Status = ledger.StatusCancelled
	return inv, nil
}

// cancelParticipant applies a cancel control: every queued or running
// invocation of participant in thread stops.
func (c *Coordinator) cancelParticipant(ctx context.Context, thread, participant, by string) error {
	active, err := c.db.Active(ctx, thread, participant)
	if err != nil {
		return err
	}
	// Newest first: the queued runs are cancelled before the running one
	// is stopped, so that its worker, free again, cannot start one of them
	// meanwhile (which would then be stopped as a running run, with a
	// notice of its own).
	for _, inv := range slices.Backward(active) {
		if _, err := c.cancelInvocation(ctx, inv, by); err != nil && !errors.Is(err, ledger.ErrNotRunning) {
			return err
		}
	}
	return nil
}

// applyCancelControl handles a cancel control event from a human; other
// events and senders are ignored.
func (c *Coordinator) applyCancelControl(ctx context.Context, e agentbridge.Event, ctl agentbridge.Control, humans agentbridge.Humans) error {
	if ctl.Cancel == nil || !humans.Has(e.From) {
		return nil
	}
	// Replaying a processed control must not stop runs queued after it.
	if done, ok, err := c.db.ThreadCursor(ctx, e.Thread); err != nil {
		return err
	} else if ok && done >= e.Seq {
		return nil
	}
	return c.cancelParticipant(ctx, e.Thread, ctl.Cancel.ParticipantID, e.From)
}

// registerRun makes the invocation cancellable for as long as it is worked
// on: it returns the run's context (cancelled with adapters.ErrCancelled by
// a cancel), the function that unregisters it, and whether it was already
// cancelled. A cancel either finds the run registered, or was made before
// and is remembered by the registry (runRegistry) or, for a job recovered
// at start-up, in the ledger its status was read from: no ledger read
// stands between a trigger and its adapter's start for it.
func (c *Coordinator) registerRun(ctx context.Context, inv ledger.Invocation) (context.Context, func(), bool) {
	rctx, cancel := context.WithCancelCause(ctx)
	cancelled := c.runs.add(inv.ID, cancel)
	stop := func() {
		c.runs.remove(inv.ID)
		cancel(nil)
	}
	if cancelled || inv.Status == ledger.StatusCancelled {
		c.log.Info("invocation cancelled before it started", "id", inv.ID, "participant", inv.Participant)
		return rctx, stop, true
	}
	return rctx, stop, false
}

// presenceDetails is {"host": host} plus {"status": latest} while the
// adapter has reported a status (mon may be nil).
func presenceDetails(mon *runMonitor, host string) json.RawMessage {
	d := map[string]string{"host": host}
	if mon != nil {
		if st := mon.latestStatus(); st != "" {
			if r := []rune(st); len(r) > maxStatusChars {
				st = string(r[:maxStatusChars-1]) + "…"
			}
			d["status"] = st
		}
	}
	return mustJSON(d)
}
