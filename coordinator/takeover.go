package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// Taking over (contract 7.1): the claims this coordinator may take now —
// those filed while nobody served their participant, and those whose
// holder's heartbeat lapsed — are listed by the bridge (Claimable). The
// coordinator polls the list at start and with its heartbeat, but at most
// every claimPollMin, and takes each: it claims it, finishes it when the
// thread already holds the pair's reply, and otherwise queues the run as a
// decision would have.

// pollClaims takes over what the bridge lists, until ctx ends.
func (k *claimer) pollClaims(ctx context.Context) {
	for {
		if k.off() {
			return
		}
		k.takeAll(ctx)
		every := max(k.config().ClaimTTL/3, claimPollMin)
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-k.poke:
			t.Stop()
		}
	}
}

// takeAll takes each claim the bridge lists for this coordinator.
func (k *claimer) takeAll(ctx context.Context) {
	cfg := k.config()
	list, err := k.bridge.Claimable(ctx, cfg.CoordinatorID)
	if err != nil {
		if k.settle(err) || ctx.Err() != nil {
			return
		}
		k.log.Debug("cannot list the claims to take over", "err", err)
		return
	}
	for _, cl := range list {
		if ctx.Err() != nil {
			return
		}
		// A lapsed claim under this coordinator's own id (a restart) is
		// its recovery's; a notice's is posted from what the thread says.
		if cl.Coordinator == cfg.CoordinatorID {
			continue
		}
		if cl.Notice != "" {
			k.takeNotice(ctx, cl)
			continue
		}
		if k.takes.givenUp(cl.ID) {
			continue
		}
		if err := k.take(ctx, cfg, cl); err != nil {
			k.tookBadly(cfg, cl, err)
		}
	}
}

// takeFailures counts, per claim, the failed attempts to take it over, so
// that a claim whose event cannot be read is not tried for ever (contract
// 8.3: no retry loop is endless): past the run retry budget it is left to
// expire, or to another coordinator. It is kept in memory: a restart tries
// again, within the budget.
type takeFailures struct {
	mu   sync.Mutex
	byID map[int64]*takeFailure
}

// takeFailure is one claim's failed take-overs: how many, since when, and
// whether they were given up.
type takeFailure struct {
	n       int
	first   time.Time
	givenUp bool
}

// maxTakeFailures bounds the claims remembered; past it they are forgotten
// and tried again.
const maxTakeFailures = 4096

// givenUp reports whether the take-over of claim id was given up.
func (f *takeFailures) givenUp(id int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.byID[id]
	return e != nil && e.givenUp
}

// failed counts a failed take-over of claim id at now; it reports whether
// it just spent the budget, and the count and time so far.
func (f *takeFailures) failed(id int64, now time.Time, attempts int, window time.Duration) (spent bool, n int, since time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byID == nil || len(f.byID) >= maxTakeFailures {
		f.byID = map[int64]*takeFailure{}
	}
	e := f.byID[id]
	if e == nil {
		e = &takeFailure{first: now}
		f.byID[id] = e
	}
	e.n++
	spent = !e.givenUp && (e.n >= attempts || now.Sub(e.first) >= window)
	e.givenUp = e.givenUp || spent
	return spent, e.n, now.Sub(e.first)
}

// tookBadly logs a failed take-over of cl, and the giving up once its
// attempts spend the run retry budget.
func (k *claimer) tookBadly(cfg *config.Config, cl agentbridge.Claim, err error) {
	spent, n, since := k.takes.failed(cl.ID, time.Now(), cfg.RunRetryAttempts, cfg.RunRetryWindow)
	attrs := []any{"claim", cl.ID, "thread", cl.Thread, "trigger", cl.Event, "participant", cl.Participant, "attempts", n, "err", err}
	if spent {
		k.log.Warn("cannot take over a run; giving it up (it expires at the bridge, or another coordinator takes it)",
			append(attrs, "for", since.Round(time.Millisecond))...)
		return
	}
	k.log.Warn("cannot take over a run", attrs...)
}

// take claims cl and settles it: ended as no trigger when this
// coordinator's rules disagree with it (contract 8.3), finished when its
// reply is in the thread, else queued here.
func (k *claimer) take(ctx context.Context, cfg *config.Config, cl agentbridge.Claim) error {
	e, err := k.findEvent(ctx, cl.Thread, cl.Event)
	if err != nil {
		return err
	}
	before, err := k.threads.stateBefore(ctx, e)
	if err != nil {
		return err
	}
	agent, ok := cfg.ResolveAgent(cl.Participant, before.state)
	if !ok && cl.FallbackFrom != "" {
		// A fallback participant may be invited after its trigger.
		if now, _, err := k.bridge.State(ctx, cl.Thread, 0); err == nil {
			agent, ok = cfg.ResolveAgent(cl.Participant, now)
		}
	}
	if !ok {
		return nil // not served here (the config changed since the list)
	}
	why, err := k.disagreement(ctx, cfg, e, before.state, cl)
	if err != nil {
		return err
	}
	// A trigger handed over to this participant says so in its claim, and
	// in the notice of the claim that handed it over.
	replies, err := k.threads.repliesAfter(ctx, e.Thread, e.Seq)
	if err != nil {
		return err
	}
	req := k.request(cfg, ledger.Invocation{Thread: cl.Thread, TriggerID: cl.Event, Participant: cl.Participant, Round: cl.Round}, cl.Client)
	req.FallbackFrom = cmp.Or(cl.FallbackFrom, handoffOf(replies, e.ID, cl.Participant))
	res, err := k.bridge.Claim(ctx, req)
	if err != nil || !res.Granted {
		return err // another coordinator was quicker
	}
	if why != "" {
		k.log.Warn("a claim taken over is no trigger by this coordinator's rules; ending it unrun", "thread", cl.Thread,
			"trigger", cl.Event, "participant", cl.Participant, "round", cl.Round, "why", why)
		_, err := k.bridge.EndNotATrigger(ctx, res.Claim.ID, res.Claim.Fence, cfg.CoordinatorID, k.instance(), why)
		return err
	}
	inv := ledger.Invocation{
		Thread: e.Thread, TriggerID: e.ID, TriggerSeq: e.Seq, TriggerGSeq: e.GSeq,
		Participant: cl.Participant, Agent: agent, Command: cfg.Agents[agent].Argv(),
		Hop: agentbridge.Hop(before.state, e, cfg.HumanIDs), Round: cl.Round,
		ClaimID: res.Claim.ID, ClaimFence: res.Claim.Fence,
	}
	inv.FallbackFrom = req.FallbackFrom
	if r, _, found := replyFor(replies, inv, ""); found {
		k.log.Info("a run taken over was answered already; finishing its claim", "trigger", e.ID, "participant", inv.Participant, "reply", r.ID)
		k.finishClaim(ctx, res.Claim.ID, res.Claim.Fence)
		return nil
	}
	queued, ok, err := k.db.TakeOver(ctx, inv, time.Now())
	if err != nil || !ok {
		return err
	}
	k.log.Info("took over a run", "id", queued.ID, "participant", queued.Participant, "trigger", queued.TriggerID,
		"fence", queued.ClaimFence, "previous_host", res.PreviousHost)
	k.receipts.reopen(queued.ID)
	k.enqueue(job{inv: queued, trigger: &e})
	return nil
}

// disagreement decides cl's event again with this coordinator's rules,
// from the thread's state before it, and says why they do not make it a
// trigger of cl's round for the participant cl answers for ("" when they
// do).
func (k *claimer) disagreement(ctx context.Context, cfg *config.Config, e agentbridge.Event, before agentbridge.ThreadState, cl agentbridge.Claim) (string, error) {
	var facts *rules.PartyFacts
	if before.Party.On {
		var err error
		if facts, err = k.threads.partySelectionFacts(ctx, e, cfg); err != nil {
			return "", err
		}
	}
	d := rules.Decide(before, e, agentbridge.ControlOf(e), cfg, facts)
	target := cmp.Or(cl.FallbackFrom, cl.Participant)
	_, servedHere := cfg.ResolveAgent(target, before)
	return rules.ClaimDisagreement(d, before, cfg, target, cl.Round, servedHere), nil
}

// wake has the poller look at the bridge's claims now (a trigger was
// handed to a fallback); it never blocks.
func (k *claimer) wake() {
	select {
	case k.poke <- struct{}{}:
	default:
	}
}

// wakeAt wakes the poller just after t, when a claim waiting for a usage
// limit falls due.
func (k *claimer) wakeAt(t time.Time) {
	time.AfterFunc(time.Until(t)+claimDueSlack, k.wake)
}

// claimDueSlack is how long after a claim's due time the poller looks:
// the bridge's clock decides, and may be a little behind.
const claimDueSlack = 200 * time.Millisecond

// findEvent reads event id of thread: among its latest events, else by
// paging the thread from its start.
func (k *claimer) findEvent(ctx context.Context, thread, id string) (agentbridge.Event, error) {
	evs, err := k.bridge.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: -1, Tail: agentbridge.MaxEventsLimit})
	if err != nil {
		return agentbridge.Event{}, fmt.Errorf("read thread %s: %w", thread, err)
	}
	var after int64
	for {
		for _, e := range evs {
			if e.ID == id {
				return e, nil
			}
		}
		if after > 0 && len(evs) < agentbridge.MaxEventsLimit {
			return agentbridge.Event{}, fmt.Errorf("event %s is not in thread %s", id, thread)
		}
		if evs, err = k.bridge.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: after, Limit: agentbridge.MaxEventsLimit}); err != nil {
			return agentbridge.Event{}, fmt.Errorf("read thread %s: %w", thread, err)
		}
		if len(evs) == 0 {
			return agentbridge.Event{}, fmt.Errorf("event %s is not in thread %s", id, thread)
		}
		after = evs[len(evs)-1].Seq
	}
}
