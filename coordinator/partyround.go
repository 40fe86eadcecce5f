package coordinator

import (
	"context"
	"fmt"
	"slices"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// This file is party mode's shell: it carries out what rules.SelectParty
// and rules.PartyFromThread decide. The thread says where a round stands; the
// ledger's party_rounds row and AdvanceParty make this coordinator queue
// its round-2 runs once and owe the notice once, across crashes.

// noticeParty is the kind of the notice that ends a party round.
const noticeParty = "party"

// partyStart is the ledger row party trigger e, decided by d, starts, or
// nil. Its selection is every participant the round runs, here or on the
// coordinator serving it: the selected ones this coordinator invokes or
// skips only for want of an adapter here. A coordinator that runs nobody
// of a round others run starts none: it owes that round nothing, so a
// coordinator serving none of the party posts nothing in it. When nobody
// could take part, every coordinator starts the round and one posts its
// notice.
func partyStart(d rules.Decision, e agentbridge.Event) *ledger.PartyRound {
	if d.Rule != rules.RuleParty || d.Party == nil || (len(d.Invoke) == 0 && len(d.Party.Selected) > 0) {
		return nil
	}
	sel := []string{}
	for _, p := range d.Party.IDs() {
		here := slices.ContainsFunc(d.Invoke, func(t rules.Target) bool { return t.Participant == p })
		elsewhere := slices.ContainsFunc(d.Skipped, func(s rules.Skip) bool { return s.Participant == p && s.Reason == rules.ReasonNoAdapter })
		if here || elsewhere {
			sel = append(sel, p)
		}
	}
	return &ledger.PartyRound{
		TriggerID: e.ID, Thread: e.Thread, TriggerSeq: e.Seq, TriggerGSeq: e.GSeq, TriggerFrom: e.From,
		Hop: d.Hop, CrossTalk: d.Party.CrossTalk, Selected: sel,
	}
}

// partyAdvance moves a party trigger's round on as its thread tells
// (rules.PartyFromThread): once round 1 is over it queues round 2's runs of the
// agents this coordinator serves, and once the round is done it owes the
// closing notice, which one coordinator posts (partynotice.go). Calling
// it early, late, twice or on several coordinators is harmless.
func (c *Coordinator) partyAdvance(ctx context.Context, triggerID string) {
	keep := context.WithoutCancel(ctx)
	r, err := c.db.PartyRoundOf(keep, triggerID)
	if err != nil {
		c.log.Error("read party round", "trigger", triggerID, "err", err)
		return
	}
	if r.Stage >= ledger.PartyStageDone {
		return
	}
	p, _, err := c.partyProgress(ctx, r)
	if err != nil {
		c.log.Warn("cannot read the party round's thread; trying again later", "trigger", triggerID, "err", err)
		return
	}
	if p.Stage >= rules.PartyStageRound2 && r.Stage == ledger.PartyStageRound1 && len(p.Reactors) > 0 {
		if !c.startRound2(keep, r, p.Reactors) {
			return
		}
		r.Stage = ledger.PartyStageRound2
	}
	if p.Stage < rules.PartyStageDone {
		return
	}
	n := c.partyNotice(r, p.Notice)
	_, ok, err := c.db.AdvanceParty(keep, triggerID, r.Stage, ledger.PartyStageDone, nil, []ledger.Notice{n})
	if err != nil {
		c.log.Error("end party round", "trigger", triggerID, "err", err)
		return
	}
	if ok {
		c.sched.postNotice(n)
	}
}

// partyProgress reads party round r from its thread: the trigger's
// receipts first, then the events after it, so that every reply a
// receipt names is among the events read. It returns the events too.
func (c *Coordinator) partyProgress(ctx context.Context, r ledger.PartyRound) (rules.PartyProgress, []agentbridge.Event, error) {
	var receipts []agentbridge.Receipt
	err := c.retry(ctx, retrying{what: "read party receipts", attrs: []any{"trigger", r.TriggerID}, permanent: client.Permanent},
		func() (err error) {
			receipts, err = c.bridge.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: r.Thread, Event: r.TriggerID})
			return err
		})
	if err != nil {
		return rules.PartyProgress{}, nil, fmt.Errorf("read party receipts: %w", err)
	}
	evs, err := c.threadEvents(ctx, r.Thread, r.TriggerSeq, 0)
	if err != nil {
		return rules.PartyProgress{}, nil, err
	}
	return rules.PartyFromThread(r.TriggerID, r.Selected, r.CrossTalk, evs, receipts), evs, nil
}

// threadEvents reads a thread's events with seq after < seq (and ≤ until
// when until > 0), page by page, retrying while the bridge is unreachable
// until ctx ends.
func (c *Coordinator) threadEvents(ctx context.Context, thread string, after, until int64) ([]agentbridge.Event, error) {
	var all []agentbridge.Event
	for {
		var page []agentbridge.Event
		err := c.retry(ctx, retrying{what: "read party events", attrs: []any{"thread", thread}, permanent: client.Permanent},
			func() (err error) {
				page, err = c.bridge.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: after, Until: until, Limit: agentbridge.MaxEventsLimit})
				return err
			})
		if err != nil {
			return nil, fmt.Errorf("read events of thread %s: %w", thread, err)
		}
		all = append(all, page...)
		if len(page) < agentbridge.MaxEventsLimit {
			return all, nil
		}
		after = page[len(page)-1].Seq
	}
}

// startRound2 queues round 2 of party round r for the reactors this
// coordinator serves, each with the agent it used in round 1, and moves
// the row to round 2. It reports whether the row is at round 2 now.
func (c *Coordinator) startRound2(ctx context.Context, r ledger.PartyRound, reactors []string) bool {
	round1, err := c.db.PartyInvocations(ctx, r.TriggerID, 1)
	if err != nil {
		c.log.Error("read party invocations", "trigger", r.TriggerID, "err", err)
		return false
	}
	var more []ledger.Invocation
	for _, p := range reactors {
		i := slices.IndexFunc(round1, func(inv ledger.Invocation) bool { return inv.Participant == p })
		if i < 0 {
			continue // another coordinator ran its round 1, and runs its round 2
		}
		more = append(more, ledger.Invocation{
			Thread: r.Thread, TriggerID: r.TriggerID, TriggerSeq: r.TriggerSeq, TriggerGSeq: r.TriggerGSeq,
			Participant: p, Agent: round1[i].Agent, Command: round1[i].Command, Hop: r.Hop, Round: 2,
		})
	}
	queued, ok, err := c.db.AdvanceParty(ctx, r.TriggerID, ledger.PartyStageRound1, ledger.PartyStageRound2, more, nil)
	if err != nil {
		c.log.Error("start party round 2", "trigger", r.TriggerID, "err", err)
		return false
	}
	if ok {
		c.log.Info("party round 2", "trigger", r.TriggerID, "agents", reactors, "here", len(more))
	}
	for _, inv := range queued {
		c.sched.enqueue(job{inv: inv})
	}
	return true
}

// recoverParty moves on every party round a previous run left open, once
// the invocations are settled.
func (c *Coordinator) recoverParty(ctx context.Context) error {
	rounds, err := c.db.OpenPartyRounds(ctx)
	if err != nil {
		return err
	}
	for _, r := range rounds {
		c.partyAdvance(ctx, r.TriggerID)
	}
	return nil
}

// partyFacts reads a party invocation's block and, for round 2, every
// round-1 answer after the trigger, oldest first, from the thread: the
// answers of agents other coordinators serve are among them.
func (c *Coordinator) partyFacts(ctx context.Context, inv ledger.Invocation) (*adapters.PartyInfo, []agentbridge.Event, error) {
	r, err := c.db.PartyRoundOf(ctx, inv.TriggerID)
	if err != nil {
		return nil, nil, fmt.Errorf("read party round: %w", err)
	}
	info := &adapters.PartyInfo{Round: inv.Round, Selected: r.Selected}
	if inv.Round < 2 {
		return info, nil, nil
	}
	p, evs, err := c.partyProgress(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	info.Selected = p.Reactors
	var answers []agentbridge.Event
	for _, e := range evs {
		if e.Meta.ReplyTo == r.TriggerID && rules.PartyRoundOf(e) == 1 && slices.Contains(p.Reactors, e.From) {
			answers = append(answers, e)
		}
	}
	return info, answers, nil
}

// partyWatchEvery is how often the coordinator reads its open party
// rounds' threads: a turn another coordinator runs ends there, not in
// this coordinator's scheduler.
const partyWatchEvery = time.Second

// watchParty moves on this coordinator's open party rounds every
// partyWatchEvery until ctx ends.
func (c *Coordinator) watchParty(ctx context.Context) {
	t := time.NewTicker(partyWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rounds, err := c.db.OpenPartyRounds(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("read open party rounds", "err", err)
			}
			continue
		}
		for _, r := range rounds {
			c.partyAdvance(ctx, r.TriggerID)
		}
	}
}

// partyNotice is the closing notice of party round r with text.
func (c *Coordinator) partyNotice(r ledger.PartyRound, text string) ledger.Notice {
	cfg := c.cfg.Load()
	in := agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: r.TriggerFrom,
		Content: mustJSON(text),
		Meta:    agentbridge.Meta{ReplyTo: r.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", noticeParty}},
	}
	return ledger.Notice{TriggerID: r.TriggerID, Kind: noticeParty, Thread: r.Thread, Post: in}
}
