package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/registry"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// The receipt reporter (contract 5.5) tells the bridge what became of every
// (event, participant) pair the trigger rules considered. It reads the
// ledger rather than being called from the invocation path: the ledger
// already records every decision and every status change durably, so the
// reporter needs no queue of its own (memory stays bounded whatever the
// bridge does), coalesces by construction (it sends a pair's current
// state, not each step it went through), picks up every status whoever
// writes it (cancel, [PASS], recovery), and can never slow an adapter run:
// all it costs the invocation path is a nudge on a buffered channel.
const (
	// receiptPoll is how often the reporter looks at the ledger when
	// nothing nudged it: a run's running → finished change arrives within
	// this plus one PUT, well inside the contract's second.
	receiptPoll = 200 * time.Millisecond
	// receiptSettle is how long the reporter waits after a nudge before
	// it looks: a decision's invocations are starting right then, and a
	// look (two ledger reads and a PUT the bridge commits) would compete
	// with their adapters' fork and exec for the CPU and the ledger. A run
	// faster than this is reported once, as it ended.
	receiptSettle = 50 * time.Millisecond
	// receiptBatch caps the rows one look reads, so that a reporter far
	// behind (a long bridge outage) catches up in bounded steps.
	receiptBatch = 200
	// receiptReplay is how many of the newest invocations and decisions a
	// starting reporter reports again: a crash may have come between a
	// change and its report, and the bridge ignores unchanged receipts.
	receiptReplay = 256
	// receiptRetryMax caps the backoff between attempts while the bridge
	// is unreachable.
	receiptRetryMax = 5 * time.Second
	// receiptFlush bounds the last pass at shutdown, which reports the
	// statuses the shutdown itself wrote (interrupted runs).
	receiptFlush = 2 * time.Second
)

// pairReport is the last state reported for an unfinished invocation.
type pairReport struct {
	status, reply, reason string
}

// receiptReporter is owned by its run goroutine, except nudge.
type receiptReporter struct {
	deps
	// registry says who else serves a participant, and claims whether a
	// skip waits at the bridge and whether runs are claimed at all.
	registry *registry.Registrar
	claims   *claimer
	nudge    chan struct{} // buffered 1: wake-ups coalesce
	// lastInv and lastDec are the newest invocation id and decision row
	// fully reported; active holds what was last reported for invocations
	// that may still change.
	lastInv, lastDec int64
	active           map[int64]pairReport
	// replayedDec is the newest decision row of the previous run: its
	// decisions are reported again for the participants served here only
	// (see reportSkip).
	replayedDec int64
	// sent counts receipts the bridge accepted, for /metrics.
	sent prometheus.Counter
	// warned is set once a permanent refusal has been logged at warn level
	// (a bridge without receipts refuses every one).
	warned bool
	// reopened holds the ids of records queued again (a run taken over,
	// takeover.go), watched again from the next pass.
	reopenMu sync.Mutex
	reopened []int64
}

func newReceiptReporter(d deps, metrics *prometheus.Registry, reg *registry.Registrar, claims *claimer) *receiptReporter {
	r := &receiptReporter{deps: d, registry: reg, claims: claims, nudge: make(chan struct{}, 1), active: map[int64]pairReport{}}
	r.sent = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agent_bridge_coordinator_receipts_total",
		Help: "Receipts reported to the bridge (changes only; see docs/runs.md).",
	})
	metrics.MustRegister(r.sent)
	return r
}

// start runs the reporter in its own goroutine, outliving ctx: the
// returned stop, called after the coordinator's shutdown, lets it report
// what the shutdown wrote (for at most receiptFlush) and waits for it.
func (r *receiptReporter) start(ctx context.Context) (stop func()) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	final, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		r.run(rctx, final)
	}()
	return func() {
		close(final)
		t := time.NewTimer(receiptFlush)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		cancel()
		<-done
	}
}

// reopen watches record id again: its record was queued again after it
// ended (a run taken over), and its receipts follow the new run.
func (r *receiptReporter) reopen(id int64) {
	r.reopenMu.Lock()
	r.reopened = append(r.reopened, id)
	r.reopenMu.Unlock()
	r.wake()
}

// takeReopened moves the reopened records into active.
func (r *receiptReporter) takeReopened() {
	r.reopenMu.Lock()
	ids := r.reopened
	r.reopened = nil
	r.reopenMu.Unlock()
	for _, id := range ids {
		r.active[id] = pairReport{}
	}
}

// wake makes the reporter look at the ledger now. It never blocks.
func (r *receiptReporter) wake() {
	select {
	case r.nudge <- struct{}{}:
	default:
	}
}

// run reports until ctx ends. When final is closed it makes one last pass
// over whatever is left (the statuses shutdown wrote) and returns once a
// pass finds nothing more, or when ctx ends.
func (r *receiptReporter) run(ctx context.Context, final <-chan struct{}) {
	var inv, dec int64
	if err := r.retry(ctx, retrying{what: "read the ledger's heads for receipts", maxWait: time.Second}, func() (err error) {
		inv, dec, err = r.db.ReceiptHeads(ctx)
		return err
	}); err != nil {
		return
	}
	r.lastInv, r.lastDec = max(inv-receiptReplay, 0), max(dec-receiptReplay, 0)
	r.replayedDec = dec
	// Every run the recovery will settle is watched from the first pass,
	// however old: the replay above covers only the newest, and a run
	// interrupted by a graceful stop would otherwise be reported as
	// interrupted and never again when its re-run succeeds.
	if unf, err := r.db.Unfinished(ctx); err != nil {
		r.log.Warn("receipts: cannot list unfinished runs", "err", err)
	} else {
		for _, u := range unf {
			r.active[u.ID] = pairReport{}
		}
	}
	tick := time.NewTicker(receiptPoll)
	defer tick.Stop()
	finishing := false
	for {
		n, err := r.pass(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.log.Warn("receipts: cannot read the ledger", "err", err)
		}
		if n >= receiptBatch {
			continue
		}
		if finishing && n == 0 {
			return
		}
		select {
		case <-r.nudge:
			if !client.Sleep(ctx, receiptSettle) {
				return
			}
		case <-tick.C:
		case <-final:
			final, finishing = nil, true
		case <-ctx.Done():
			return
		}
	}
}

// pass reports what changed since the last pass and returns how many rows
// it read.
func (r *receiptReporter) pass(ctx context.Context) (int, error) {
	r.takeReopened()
	decs, ok, err := r.passDecisions(ctx)
	if err != nil || !ok {
		return 0, err
	}
	rows, err := r.pairRows(ctx)
	if err != nil {
		return decs, err
	}
	newRows, ok := r.reportPairs(ctx, rows)
	if !ok {
		return 0, nil
	}
	return max(decs, newRows), nil
}

// passDecisions reports the skipped pairs of the decisions recorded since
// the last pass. It returns how many it read; ok is false when ctx ended.
func (r *receiptReporter) passDecisions(ctx context.Context) (n int, ok bool, err error) {
	decs, err := r.db.DecisionsAfter(ctx, r.lastDec, receiptBatch)
	if err != nil {
		return 0, false, err
	}
	listed := false
	for _, d := range decs {
		var dd rules.Decision
		if err := json.Unmarshal(d.Decision, &dd); err != nil {
			r.log.Warn("receipts: cannot decode a decision", "event", d.EventID, "err", err)
		}
		for _, s := range dd.Skipped {
			if !r.reportSkip(ctx, d, dd.PartyRound(), s, &listed) {
				continue
			}
			if !r.send(ctx, agentbridge.ReceiptInput{
				Thread: d.Thread, Event: d.EventID, Participant: s.Participant,
				State: agentbridge.ReceiptSkipped, Reason: s.Reason,
			}) {
				return 0, false, nil
			}
		}
		r.lastDec = d.Row
	}
	return len(decs), true, nil
}

// reportSkip decides whether this coordinator reports a skipped pair
// (contract 7.1: a coordinator says nothing about a participant it does
// not serve). It does when it serves the participant. For one it does
// not serve, it does only for a decision of this run (a replayed one may
// have been answered by a coordinator since gone), when the bridge's
// coordinators were read and no other live one serves the participant:
// then "no adapter" holds for every coordinator: the trigger waits at the
// bridge for a coordinator serving the participant (a waiting claim,
// whose receipt the bridge writes), and only against a bridge without
// claims is "no adapter" reported, each coordinator's report of it being
// the same receipt. Against a bridge that keeps no registrations (an
// older one) it reports as the only coordinator.
func (r *receiptReporter) reportSkip(ctx context.Context, d ledger.DecisionRow, round int, s rules.Skip, listed *bool) bool {
	if s.Agent != "" {
		return true
	}
	if r.registry.Unsupported() {
		return true
	}
	if d.Row <= r.replayedDec {
		return false
	}
	if !*listed {
		// Once per pass, after the decisions it reports were made: a
		// coordinator that registered before their triggers is in it.
		r.registry.Refresh(ctx)
		*listed = true
	}
	elsewhere, known := r.registry.ServedElsewhereIn(s.Participant, s.Client, s.Workspace)
	if !known || elsewhere {
		return false
	}
	if s.Reason != rules.ReasonNoAdapter && s.Reason != rules.ReasonNoWorkspace {
		return true
	}
	return !r.claims.wait(ctx, d.Thread, d.EventID, round, s)
}

// pairRows reads the pairs queued since the last pass and the unfinished
// ones, oldest first.
func (r *receiptReporter) pairRows(ctx context.Context) ([]ledger.PairState, error) {
	rows, err := r.db.PairStates(ctx, r.lastInv, nil, receiptBatch)
	if err != nil {
		return nil, err
	}
	// The unfinished ones, a bounded number of ids per statement (many
	// runs may wait in a queue).
	ids := make([]int64, 0, len(r.active))
	for id := range r.active {
		ids = append(ids, id)
	}
	for len(ids) > 0 {
		n := min(len(ids), receiptBatch)
		more, err := r.db.PairStates(ctx, math.MaxInt64, ids[:n], 0)
		if err != nil {
			return nil, err
		}
		rows, ids = append(rows, more...), ids[n:]
	}
	slices.SortFunc(rows, func(a, b ledger.PairState) int { return cmp.Compare(a.ID, b.ID) })
	return rows, nil
}

// reportPairs sends the receipt of every pair whose state changed. It
// returns how many rows were new; ok is false when ctx ended.
func (r *receiptReporter) reportPairs(ctx context.Context, rows []ledger.PairState) (newRows int, ok bool) {
	for _, p := range rows {
		if p.ID > r.lastInv {
			newRows++
		}
		prev, known := r.active[p.ID]
		now := r.reportOf(p)
		if p.Pending && p.Status != ledger.StatusQueued && p.Status != ledger.StatusRunning {
			// An ending is reported once its reply or notice is in the
			// thread, so that "replied" always links to the reply.
			if !known {
				r.active[p.ID] = pairReport{}
			}
			r.lastInv = max(r.lastInv, p.ID)
			continue
		}
		if (!known || prev != now) && now != (pairReport{}) && agentbridge.ValidReceiptState(p.Status) {
			if !r.sendPair(ctx, p) {
				return 0, false
			}
		}
		if finished(p) {
			delete(r.active, p.ID)
		} else {
			r.active[p.ID] = now
		}
		r.lastInv = max(r.lastInv, p.ID)
	}
	return newRows, true
}

// reportOf is what a pair's receipt is to say now. A run not claimed yet
// at a bridge that keeps claims, for a participant another live
// coordinator serves too, says nothing (zero): that one may hold the run,
// and the receipt is the holder's to write (contract 7.1).
func (r *receiptReporter) reportOf(p ledger.PairState) pairReport {
	if p.ClaimID == 0 && p.Status == ledger.StatusQueued && !r.claims.off() {
		if shared, known := r.registry.ServedElsewhere(p.Participant, ""); shared || !known {
			return pairReport{}
		}
	}
	return pairReport{status: p.Status, reply: p.ReplyEventID, reason: receiptReason(p, time.Now())}
}

// sendPair sends a pair's receipt, carrying its claim's fence.
func (r *receiptReporter) sendPair(ctx context.Context, p ledger.PairState) bool {
	if p.ClaimID != 0 {
		ctx = client.WithClaim(ctx, p.ClaimID, p.ClaimFence)
	}
	return r.send(ctx, agentbridge.ReceiptInput{
		Thread: p.Thread, Event: p.TriggerID, Participant: p.Participant,
		State: p.Status, Invocation: strconv.FormatInt(p.ID, 10), Reply: p.ReplyEventID,
		Reason: receiptReason(p, time.Now()),
	})
}

// finished reports whether an invocation's receipt can no longer change:
// it ended and whatever it owed is posted. An interrupted run is not
// finished: a restarted coordinator runs it again under the same id, and
// the receipt must end as that run does (contract 6.3). The reporter of
// the process that interrupted it reports interrupted as its last word;
// the next one's keeps watching it (see run).
func finished(p ledger.PairState) bool {
	switch p.Status {
	case ledger.StatusQueued, ledger.StatusRunning, ledger.StatusInterrupted:
		return false
	}
	return !p.Pending
}

// send PUTs one receipt, retrying with capped backoff while the bridge is
// unreachable. It returns false only when ctx ended; a receipt the bridge
// refuses for good (the event is gone, a bridge without receipts) is
// dropped with a log line.
func (r *receiptReporter) send(ctx context.Context, in agentbridge.ReceiptInput) bool {
	in.From = r.config().CoordinatorID
	err := r.retry(ctx, retrying{what: "send a receipt", attrs: []any{"thread", in.Thread, "event", in.Event},
		level: slog.LevelDebug, maxWait: receiptRetryMax,
		permanent: func(err error) bool { return ctx.Err() == nil && client.Permanent(err) }},
		func() error {
			_, _, err := r.bridge.PutReceipt(ctx, in)
			return err
		})
	switch {
	case err == nil:
		r.sent.Inc()
		return true
	case ctx.Err() != nil:
		return false
	default:
		level := r.log.Debug
		if !r.warned {
			r.warned, level = true, r.log.Warn
		}
		level("receipts: the bridge refused a receipt; dropping it", "thread", in.Thread, "event", in.Event, "participant", in.Participant, "state", in.State, "err", err)
		return true
	}
}
