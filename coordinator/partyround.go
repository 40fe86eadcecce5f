package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// This file is party mode's shell: it carries out what SelectParty and
// NextPartyStep decide. The ledger's party_rounds row and AdvanceParty make
// each round start once and its notice be owed once, across crashes.

// noticeParty is the kind of the notice that ends a party round.
const noticeParty = "party"

// metaParty is the meta key of party replies: {"round": n, "trigger": id}.
const metaParty = "party"

// partyMeta is the value of meta.party on a party reply or error.
type partyMeta struct {
	Round   int    `json:"round"`
	Trigger string `json:"trigger"`
}

// partyRound is the party round of a decision's invocations: 1 for a party
// trigger, 0 otherwise.
func (d Decision) partyRound() int {
	if d.Rule == RuleParty {
		return 1
	}
	return 0
}

// partyStart is the ledger row a party trigger starts, or nil.
func (d Decision) partyStart(e agentbridge.Event) *ledger.PartyRound {
	if d.Rule != RuleParty || d.Party == nil {
		return nil
	}
	sel := make([]string, len(d.Invoke))
	for i, t := range d.Invoke {
		sel[i] = t.Participant
	}
	return &ledger.PartyRound{
		TriggerID: e.ID, Thread: e.Thread, TriggerSeq: e.Seq, TriggerGSeq: e.GSeq, TriggerFrom: e.From,
		Hop: d.Hop, CrossTalk: d.Party.CrossTalk, Selected: sel,
	}
}

// replyKey is the idempotency key of an invocation's reply or error: one
// per (trigger, participant) outside party mode, one per round inside it.
func replyKey(inv ledger.Invocation) string {
	if inv.Round == 0 {
		return idempotencyKey(inv.TriggerID, inv.Participant)
	}
	return idempotencyKey(inv.TriggerID, fmt.Sprintf("%s\x00round %d", inv.Participant, inv.Round))
}

// withPartyMeta marks a party invocation's post with meta.party, so that
// readers (and recovery) know which round it answers.
func withPartyMeta(m agentbridge.Meta, inv ledger.Invocation) agentbridge.Meta {
	if inv.Round == 0 {
		return m
	}
	extra := make(map[string]json.RawMessage, len(m.Extra)+1)
	for k, v := range m.Extra {
		extra[k] = v
	}
	extra[metaParty] = mustJSON(partyMeta{Round: inv.Round, Trigger: inv.TriggerID})
	m.Extra = extra
	return m
}

// partyRoundOf returns the party round an event answers (meta.party.round),
// 0 for anything else.
func partyRoundOf(e agentbridge.Event) int {
	raw, ok := e.Meta.Extra[metaParty]
	if !ok {
		return 0
	}
	var pm partyMeta
	if json.Unmarshal(raw, &pm) != nil {
		return 0
	}
	return pm.Round
}

// invocationDone reports whether an invocation has reached its end: not
// waiting, not running, and nothing left to post.
func invocationDone(inv ledger.Invocation) bool {
	switch inv.Status {
	case ledger.StatusQueued, ledger.StatusRunning, ledger.StatusInterrupted:
		return false
	}
	return len(inv.PendingPost) == 0 || inv.ReplyEventID != ""
}

// partyAdvance moves a party trigger's round on once all its current
// invocations have ended: it starts round 2 or owes the closing notice, as
// NextPartyStep decides. Calling it early, late or twice is harmless.
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
	invs, err := c.db.PartyInvocations(keep, triggerID, r.Stage)
	if err != nil {
		c.log.Error("read party invocations", "trigger", triggerID, "err", err)
		return
	}
	for _, inv := range invs {
		if !invocationDone(inv) {
			return
		}
	}
	round1, round2 := invs, []ledger.Invocation(nil)
	if r.Stage == ledger.PartyStageRound2 {
		round2 = invs
		if round1, err = c.db.PartyInvocations(keep, triggerID, 1); err != nil {
			c.log.Error("read party invocations", "trigger", triggerID, "err", err)
			return
		}
	}
	replies, err := c.partyReplies(ctx, r, slices.Concat(round1, round2))
	if err != nil {
		c.log.Warn("cannot read party replies; the round goes on after a restart", "trigger", triggerID, "err", err)
		return
	}
	next := NextPartyStep(r.Stage, r.CrossTalk, partyOutcomes(round1, replies), partyOutcomes(round2, replies))
	if len(next.Round2) > 0 {
		c.startRound2(keep, r, round1, next.Round2)
		return
	}
	cfg := c.cfg.Load()
	in := agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: r.TriggerFrom,
		Content: mustJSON(next.Notice),
		Meta:    agentbridge.Meta{ReplyTo: r.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", noticeParty}},
	}
	n := ledger.Notice{TriggerID: r.TriggerID, Kind: noticeParty, Thread: r.Thread, Post: mustJSON(in)}
	_, ok, err := c.db.AdvanceParty(keep, triggerID, r.Stage, ledger.PartyStageDone, nil, []ledger.Notice{n})
	if err != nil {
		c.log.Error("end party round", "trigger", triggerID, "err", err)
		return
	}
	if ok {
		c.sched.postNotice(n)
	}
}

// startRound2 queues round 2 of party round r for participants, each
// with the agent it used in round 1.
func (c *Coordinator) startRound2(ctx context.Context, r ledger.PartyRound, round1 []ledger.Invocation, participants []string) {
	var more []ledger.Invocation
	for _, p := range participants {
		i := slices.IndexFunc(round1, func(inv ledger.Invocation) bool { return inv.Participant == p })
		more = append(more, ledger.Invocation{
			Thread: r.Thread, TriggerID: r.TriggerID, TriggerSeq: r.TriggerSeq, TriggerGSeq: r.TriggerGSeq,
			Participant: p, Agent: round1[i].Agent, Command: round1[i].Command, Hop: r.Hop, Round: 2,
		})
	}
	queued, ok, err := c.db.AdvanceParty(ctx, r.TriggerID, ledger.PartyStageRound1, ledger.PartyStageRound2, more, nil)
	if err != nil {
		c.log.Error("start party round 2", "trigger", r.TriggerID, "err", err)
		return
	}
	if ok {
		c.log.Info("party round 2", "trigger", r.TriggerID, "agents", participants)
	}
	for _, inv := range queued {
		c.sched.enqueue(job{inv: inv})
	}
}

// partyReplies reads the replies the invocations posted (by event id),
// retrying while the bridge is unreachable until ctx ends.
func (c *Coordinator) partyReplies(ctx context.Context, r ledger.PartyRound, invs []ledger.Invocation) (map[string]agentbridge.Event, error) {
	out := map[string]agentbridge.Event{}
	want := map[string]bool{}
	for _, inv := range invs {
		if inv.ReplyEventID != "" {
			want[inv.ReplyEventID] = true
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	var evs []agentbridge.Event
	err := c.retry(ctx, retrying{what: "read party replies", attrs: []any{"trigger", r.TriggerID}, permanent: refusedForGood},
		func() (err error) {
			evs, err = c.bridge.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: r.Thread, After: r.TriggerSeq, Limit: agentbridge.MaxEventsLimit})
			return err
		})
	switch {
	case err == nil:
	case refusedForGood(err):
		return nil, err
	default:
		return nil, fmt.Errorf("read party replies: %w", err)
	}
	for _, e := range evs {
		if want[e.ID] {
			out[e.ID] = e
		}
	}
	return out, nil
}

// partyOutcomes turns a round's finished invocations into the outcomes
// NextPartyStep reads.
func partyOutcomes(invs []ledger.Invocation, replies map[string]agentbridge.Event) []PartyOutcome {
	var out []PartyOutcome
	for _, inv := range invs {
		o := PartyOutcome{Participant: inv.Participant, Result: PartyFailed, Detail: inv.Status}
		reply, posted := replies[inv.ReplyEventID]
		switch {
		case inv.Status == ledger.StatusPassed:
			o.Result = PartyPassed
		case inv.Status == ledger.StatusSucceeded && posted && reply.From == inv.Participant:
			o.Result = PartyAnswered
			if reply.Meta.HasTag("question") {
				o.Result = PartyAsked
			}
		case inv.Status == ledger.StatusSucceeded:
			o.Detail = "reply not posted"
		}
		out = append(out, o)
	}
	return out
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
