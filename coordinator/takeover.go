package coordinator

import (
	"context"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
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
		every := max(k.c.cfg.Load().ClaimTTL/3, claimPollMin)
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
	cfg := k.c.cfg.Load()
	list, err := k.c.bridge.Claimable(ctx, cfg.CoordinatorID)
	if err != nil {
		if k.settle(err) || ctx.Err() != nil {
			return
		}
		k.c.log.Debug("cannot list the claims to take over", "err", err)
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
			k.c.takeNoticeClaim(ctx, cl)
			continue
		}
		if err := k.take(ctx, cfg, cl); err != nil {
			k.c.log.Warn("cannot take over a run", "thread", cl.Thread, "trigger", cl.Event, "participant", cl.Participant, "err", err)
		}
	}
}

// take claims cl and settles it: finished when its reply is in the
// thread, else queued here.
func (k *claimer) take(ctx context.Context, cfg *config.Config, cl agentbridge.Claim) error {
	e, err := k.findEvent(ctx, cl.Thread, cl.Event)
	if err != nil {
		return err
	}
	before, err := k.c.stateBefore(ctx, e)
	if err != nil {
		return err
	}
	agent, ok := cfg.ResolveAgent(cl.Participant, before.state)
	if !ok {
		return nil // not served here (the config changed since the list)
	}
	// A trigger handed over to this participant says so in its claim, as
	// the claim that handed it did.
	replies, err := k.c.repliesAfter(ctx, e.Thread, e.Seq)
	if err != nil {
		return err
	}
	req := k.request(cfg, ledger.Invocation{Thread: cl.Thread, TriggerID: cl.Event, Participant: cl.Participant, Round: cl.Round}, cl.Client)
	req.FallbackFrom = handoffOf(replies, e.ID, cl.Participant)
	res, err := k.c.bridge.Claim(ctx, req)
	if err != nil || !res.Granted {
		return err // another coordinator was quicker
	}
	inv := ledger.Invocation{
		Thread: e.Thread, TriggerID: e.ID, TriggerSeq: e.Seq, TriggerGSeq: e.GSeq,
		Participant: cl.Participant, Agent: agent, Command: cfg.Agents[agent].Argv(),
		Hop: agentbridge.Hop(before.state, e, cfg.HumanIDs), Round: cl.Round,
		ClaimID: res.Claim.ID, ClaimFence: res.Claim.Fence,
	}
	inv.FallbackFrom = req.FallbackFrom
	if r, _, found := replyFor(replies, inv, ""); found {
		k.c.log.Info("a run taken over was answered already; finishing its claim", "trigger", e.ID, "participant", inv.Participant, "reply", r.ID)
		k.finishClaim(ctx, res.Claim.ID, res.Claim.Fence)
		return nil
	}
	queued, ok, err := k.c.db.TakeOver(ctx, inv, time.Now())
	if err != nil || !ok {
		return err
	}
	k.c.log.Info("took over a run", "id", queued.ID, "participant", queued.Participant, "trigger", queued.TriggerID,
		"fence", queued.ClaimFence, "previous_host", res.PreviousHost)
	k.c.receipts.reopen(queued.ID)
	k.c.sched.enqueue(job{inv: queued, trigger: &e})
	return nil
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
	evs, err := k.c.bridge.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: -1, Tail: agentbridge.MaxEventsLimit})
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
		if evs, err = k.c.bridge.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: after, Limit: agentbridge.MaxEventsLimit}); err != nil {
			return agentbridge.Event{}, fmt.Errorf("read thread %s: %w", thread, err)
		}
		if len(evs) == 0 {
			return agentbridge.Event{}, fmt.Errorf("event %s is not in thread %s", id, thread)
		}
		after = evs[len(evs)-1].Seq
	}
}
