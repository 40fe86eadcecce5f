package rules

import (
	"cmp"
	"encoding/json"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// This file reads a party round from its thread: the replies and error
// notices marked with meta.party, and the trigger's receipts. Every
// coordinator reads the same thread, so every one comes to the same
// round 2 and the same notice, whichever agents it serves (contract 7.1).
// The functions here are pure.

// Party round stages as the thread tells them (PartyProgress.Stage).
const (
	PartyStageRound1 = 1
	PartyStageRound2 = 2
	PartyStageDone   = 3
)

// MetaParty is the meta key of party replies and errors: PartyMeta.
const MetaParty = "party"

// PartyMeta is the value of meta.party on a party reply or error: it says
// which round of which trigger the post answers.
type PartyMeta struct {
	Round   int    `json:"round"`
	Trigger string `json:"trigger"`
}

// MetaParticipant is the meta key naming the participant an error message
// is about: the coordinator posts errors, so From does not say whose run
// failed.
const MetaParticipant = "participant"

// PartyRoundOf returns the party round an event answers (meta.party.round),
// 0 for anything else.
func PartyRoundOf(e agentbridge.Event) int {
	raw, ok := e.Meta.Extra[MetaParty]
	if !ok {
		return 0
	}
	var pm PartyMeta
	if json.Unmarshal(raw, &pm) != nil {
		return 0
	}
	return pm.Round
}

// waitingReason starts the reason of a receipt the bridge keeps queued for
// a participant no live coordinator serves (CLAIMS-SPEC: a waiting claim).
const waitingReason = "waiting for a coordinator"

// PartyProgress is where a party round stands by its thread.
type PartyProgress struct {
	// Stage is 1 while round 1 runs, 2 while round 2 runs, 3 when the
	// round is done.
	Stage int
	// Round1 and Round2 are the finished turns of each round so far.
	Round1, Round2 []PartyOutcome
	// Reactors run in round 2 (empty when there is none).
	Reactors []string
	// Waiting are who the current stage still waits for.
	Waiting []string
	// Notice is the closing notice's text once the round is done.
	Notice string
}

// PartyFromThread reads party round trigger (whose round 1 selected
// selected, with cross-talk crossTalk) from evs, the thread's events after
// the trigger, and receipts, the trigger's receipts read before evs (so
// that every reply a receipt points at is among evs). A selected
// participant whose receipt says skipped, or that it waits for a
// coordinator serving it, does not take part. It is pure.
func PartyFromThread(trigger string, selected []string, crossTalk bool, evs []agentbridge.Event, receipts []agentbridge.Receipt) PartyProgress {
	byP := make(map[string]agentbridge.Receipt, len(receipts))
	for _, r := range receipts {
		if r.Event == trigger {
			byP[r.Participant] = r
		}
	}
	var p PartyProgress
	for _, id := range selected {
		o, done, takesPart := partyTurnOf(trigger, id, 1, evs, byP[id])
		switch {
		case !takesPart:
		case done:
			p.Round1 = append(p.Round1, o)
		default:
			p.Waiting = append(p.Waiting, id)
		}
	}
	if len(p.Waiting) > 0 {
		p.Stage = PartyStageRound1
		return p
	}
	next := NextPartyStep(1, crossTalk, p.Round1, nil)
	if len(next.Round2) == 0 {
		p.Stage, p.Notice = PartyStageDone, next.Notice
		return p
	}
	p.Reactors = next.Round2
	for _, id := range p.Reactors {
		if o, done, _ := partyTurnOf(trigger, id, 2, evs, byP[id]); done {
			p.Round2 = append(p.Round2, o)
		} else {
			p.Waiting = append(p.Waiting, id)
		}
	}
	if len(p.Waiting) > 0 {
		p.Stage = PartyStageRound2
		return p
	}
	p.Stage, p.Notice = PartyStageDone, NextPartyStep(2, crossTalk, p.Round1, p.Round2).Notice
	return p
}

// partyTurnOf reads participant p's turn in round of trigger: done when
// the thread has its reply or error notice for that round, or its receipt
// r ended the turn without one (passed, failed, timeout…); takesPart is
// false when r says skipped or waiting for a coordinator (round 1 only).
//
// A receipt is one per (trigger, participant) over both rounds. Round 2
// runs only those who answered in round 1, so a round-2 receipt that ends
// without a reply can only be round 2's; one that says succeeded without a
// round-2 reply is round 1's, still shown until round 2's run reports.
func partyTurnOf(trigger, p string, round int, evs []agentbridge.Event, r agentbridge.Receipt) (o PartyOutcome, done, takesPart bool) {
	if o, ok := partyPostOf(trigger, p, round, evs, r); ok {
		return o, true, true
	}
	o = PartyOutcome{Participant: p, Result: PartyFailed}
	waiting := r.State == agentbridge.ReceiptQueued && strings.HasPrefix(r.Reason, waitingReason)
	switch {
	case round == 1 && (r.State == agentbridge.ReceiptSkipped || waiting):
		return o, false, false
	case r.State == agentbridge.ReceiptPassed:
		o.Result = PartyPassed
	case round == 1 && r.State == agentbridge.ReceiptSucceeded:
		o.Detail = "reply not posted"
	case receiptEnding(r) != "":
		o.Detail = r.State
	default:
		return o, false, true
	}
	return o, true, true
}

// partyPostOf finds p's reply or error notice for round of trigger among
// evs; ok is false when the thread has neither.
func partyPostOf(trigger, p string, round int, evs []agentbridge.Event, r agentbridge.Receipt) (o PartyOutcome, ok bool) {
	for _, e := range evs {
		if e.Meta.ReplyTo != trigger || PartyRoundOf(e) != round {
			continue
		}
		switch {
		case e.From == p:
			o = PartyOutcome{Participant: p, Result: PartyAnswered}
			if e.Meta.HasTag("question") {
				o.Result = PartyAsked
			}
			return o, true
		case e.Meta.HasTag("error") && errorParticipant(e) == p:
			return PartyOutcome{Participant: p, Result: PartyFailed, Detail: cmp.Or(receiptEnding(r), agentbridge.ReceiptFailed)}, true
		}
	}
	return PartyOutcome{}, false
}

// receiptEnding is r's state when it ends a run without a reply (failed,
// timeout, cancelled, refused), else "".
func receiptEnding(r agentbridge.Receipt) string {
	switch r.State {
	case agentbridge.ReceiptFailed, agentbridge.ReceiptTimeout, agentbridge.ReceiptCancelled, agentbridge.ReceiptRefused:
		return r.State
	}
	return ""
}

// errorParticipant is the participant an error notice is about
// (meta.participant), or "".
func errorParticipant(e agentbridge.Event) string {
	var p string
	if raw, ok := e.Meta.Extra[MetaParticipant]; ok && json.Unmarshal(raw, &p) == nil {
		return p
	}
	return ""
}

// PartyTurns counts, per participant, the party rounds it took part in
// among evs (a thread's events before a party trigger): its round-1 reply
// or error notice, once per trigger. Every coordinator counts the same
// from the same events, so rotation selects the same agents everywhere.
func PartyTurns(evs []agentbridge.Event) map[string]int {
	seen := map[[2]string]bool{}
	turns := map[string]int{}
	for _, e := range evs {
		if PartyRoundOf(e) != 1 {
			continue
		}
		p := e.From
		if e.Meta.HasTag("error") {
			if ep := errorParticipant(e); ep != "" {
				p = ep
			}
		}
		k := [2]string{e.Meta.ReplyTo, p}
		if !seen[k] {
			seen[k] = true
			turns[p]++
		}
	}
	return turns
}
