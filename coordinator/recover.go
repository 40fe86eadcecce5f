package coordinator

import (
	"context"
	"fmt"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// recover settles what a previous run left unfinished (see
// docs/delivery.md): it kills the process groups of invocations that were
// running, re-posts outcomes that were recorded but not acknowledged,
// closes pairs whose reply is already in the thread, queues the rest again
// in their original order, and re-posts pending notices.
func (c *Coordinator) recover(ctx context.Context) error {
	if err := c.ws.recover(ctx); err != nil {
		return err
	}
	invs, err := c.db.Unfinished(ctx)
	if err != nil {
		return err
	}
	for _, inv := range invs {
		c.killLeftover(inv)
	}
	replies := map[string][]agentbridge.Event{}
	for _, inv := range invs {
		if len(inv.PendingPost) > 0 && inv.ReplyEventID == "" {
			c.sched.enqueue(job{inv: inv})
			continue
		}
		evs, ok := replies[inv.Thread]
		if !ok {
			if evs, err = c.repliesAfter(ctx, inv.Thread, inv.TriggerSeq); err != nil {
				return err
			}
			replies[inv.Thread] = evs
		}
		if r, status, found := replyFor(evs, inv, c.cfg.Load().CoordinatorID); found {
			c.log.Info("reply already in the thread; not re-running", "id", inv.ID, "reply", r.ID)
			if err := c.db.Posted(ctx, inv.ID, r.ID, status, ""); err != nil {
				return err
			}
			continue
		}
		c.log.Info("re-running unfinished invocation", "id", inv.ID, "participant", inv.Participant, "trigger", inv.TriggerID, "was", inv.Status)
		c.sched.enqueue(job{inv: inv})
	}
	notices, unreadable, err := c.db.PendingNotices(ctx)
	if err != nil {
		return err
	}
	for _, u := range unreadable {
		c.log.Error("a stored notice cannot be read; closing it unposted", "trigger", u.TriggerID, "kind", u.Kind, "thread", u.Thread, "err", u.Err)
		if err := c.db.NoticePosted(ctx, u.TriggerID, u.Kind, ""); err != nil {
			return err
		}
	}
	for _, n := range notices {
		c.sched.postNotice(n)
	}
	return c.recoverParty(ctx)
}

// killLeftover kills the process group a run that was running when the
// previous coordinator stopped may have left.
func (c *Coordinator) killLeftover(inv ledger.Invocation) {
	if inv.Status != ledger.StatusRunning || inv.PGID <= 0 {
		return
	}
	started, err := agentbridge.ParseTime(inv.ProcessStartedAt)
	if err != nil {
		c.log.Warn("invocation has no valid process start time; not killing its group", "id", inv.ID, "pgid", inv.PGID)
		return
	}
	if err := adapters.KillGroup(inv.PGID, started); err != nil {
		c.log.Warn("kill leftover adapter group", "id", inv.ID, "pgid", inv.PGID, "err", err)
	} else {
		c.log.Info("killed leftover adapter group", "id", inv.ID, "pgid", inv.PGID)
	}
}

// repliesAfter reads the thread's events after seq that reply to
// something, retrying while the bridge is unreachable. Unfinished records
// are few and recent, so one bounded read per thread is enough.
func (c *Coordinator) repliesAfter(ctx context.Context, thread string, seq int64) ([]agentbridge.Event, error) {
	var evs []agentbridge.Event
	if err := c.retry(ctx, retrying{what: "read thread for recovery", attrs: []any{"thread", thread}}, func() (err error) {
		evs, err = c.bridge.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: max(seq-1, 0), Limit: agentbridge.MaxEventsLimit})
		return err
	}); err != nil {
		return nil, fmt.Errorf("recover thread %s: %w", thread, err)
	}
	var out []agentbridge.Event
	for _, e := range evs {
		if e.Meta.ReplyTo != "" {
			out = append(out, e)
		}
	}
	return out, nil
}

// replyFor finds the pair's reply (from the participant) or error message
// (from the coordinator, naming the participant; from any coordinator when
// coordinatorID is empty, as for a run taken over from another one) among
// evs, and the status it implies.
func replyFor(evs []agentbridge.Event, inv ledger.Invocation, coordinatorID string) (agentbridge.Event, string, bool) {
	for _, e := range evs {
		if e.Meta.ReplyTo != inv.TriggerID || rules.PartyRoundOf(e) != inv.Round {
			continue
		}
		if e.From == inv.Participant {
			return e, ledger.StatusSucceeded, true
		}
		byCoordinator := e.From == coordinatorID || (coordinatorID == "" && e.Meta.HasTag("coordinator"))
		if byCoordinator && e.Meta.HasTag("error") && string(e.Meta.Extra[rules.MetaParticipant]) == string(mustJSON(inv.Participant)) {
			return e, ledger.StatusFailed, true
		}
	}
	return agentbridge.Event{}, "", false
}
