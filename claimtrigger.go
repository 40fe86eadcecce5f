package agentbridge

import (
	"fmt"
	"slices"
	"strings"
)

// Claims only for real triggers (contract 8.3). A run claim names an event
// of its thread that the trigger rules make a trigger for its participant;
// the bridge refuses any other (400 not_a_trigger), so that a coordinator
// token cannot make another machine run an agent on a text nobody
// addressed to it. The bridge holds the thread's log and its derived
// state, not the coordinators' configs, so it checks what the rules decide
// whatever the config: the kind of event, invited, not a human, not
// paused or muted for it, not its own message, and addressed to it. The
// coordinator taking a claim over decides the trigger again with its own
// config (coordinator/takeover.go), which settles what the bridge cannot.

// ClaimTriggerFacts are what CheckClaimTrigger reads: the claimed event,
// the thread's derived state just before it (a control counts for later
// events only) and now (a fallback participant may be invited after the
// trigger, contract 8.5), and the bridge's humans.
type ClaimTriggerFacts struct {
	Event  Event
	Before ThreadState
	Now    ThreadState
	Humans Humans
}

// CheckClaimTrigger refuses (not_a_trigger) the run claim req unless its
// event is a trigger for its participant, or, for a fallback claim, for
// the participant it falls back from, by what the bridge can decide of
// the trigger rules without a coordinator's config (docs/security.md,
// "Claims only for real triggers"):
//
//   - the participant claimed is not a human, and is invited (before the
//     event; for a fallback, now);
//   - the one it answers for is invited before the event, not muted, not
//     a human, not the event's sender, and the thread was not paused;
//   - the event is a message, to it, or to everyone from a human (whom
//     any rule may wake: invited_auto, broadcast, party, mentions), or to
//     everyone from another sender whose text could mention it (an id,
//     nickname, role, client or model after a prefix, mentionsName); a prod from
//     a human naming it; a scene a human started with it first; the
//     scene.closed of a scene it acts in;
//   - a party round (round 1 or 2) is claimed for a human's message to
//     everyone while party mode is on, and no other claim is.
//
// Broadcasts (enable_broadcast) from a sender that is not a human are
// refused: the bridge cannot see broadcast_senders, and taking every
// agent's message to everyone for a trigger of every invited participant
// would let any text through.
func CheckClaimTrigger(req ClaimRequest, f ClaimTriggerFacts) error {
	p, t := req.Participant, req.Participant
	if req.FallbackFrom != "" {
		t = req.FallbackFrom
	}
	if f.Humans.Has(p) {
		return notATrigger(req, "%s is a human: nobody runs a human", p)
	}
	if p != t {
		if _, ok := f.Now.Invited(p); !ok {
			return notATrigger(req, "%s, which would answer for %s, is not invited in the thread", p, t)
		}
	}
	if why := triggerFor(f, t, req.Round); why != "" {
		return notATrigger(req, "%s", why)
	}
	return nil
}

// notATrigger is the refusal of claim req, why saying what failed.
func notATrigger(req ClaimRequest, format string, args ...any) error {
	why := fmt.Sprintf(format, args...)
	return &Error{Code: ECodeNotATrigger, Thread: req.Thread, Participant: req.Participant,
		Message: fmt.Sprintf("Event %s is not a trigger for %s: %s. A claim names an event the trigger rules make a trigger for its participant.",
			Clip(req.Event, QuoteRunes), req.Participant, why)}
}

// triggerFor says why e is no trigger of round for t, or "" when it is
// one by every check CheckClaimTrigger documents.
func triggerFor(f ClaimTriggerFacts, t string, round int) string {
	e, st := f.Event, f.Before
	inv, invited := st.Invited(t)
	switch {
	case f.Humans.Has(t):
		return t + " is a human"
	case !invited:
		return t + " was not invited when it was posted"
	case st.Paused:
		return "the thread was paused"
	case st.IsMuted(t):
		return t + " was muted"
	case e.From == t:
		return "it is " + t + "'s own"
	}
	party := e.Type == TypeMessage && e.To == ToAll && st.Party.On && f.Humans.Has(e.From) && !IsPartyExit(e.Text())
	switch {
	case party && (round < 1 || round > 2):
		return "it starts a party round, which is claimed as round 1 or 2"
	case !party && round != 0:
		return fmt.Sprintf("it starts no party round, and the claim names round %d", round)
	}
	switch e.Type {
	case TypeMessage:
		return messageFor(f, e, t, inv)
	case TypeControl:
		return controlFor(f, e, t)
	case TypeSceneClosed:
		if st.Scene == nil || st.Scene.Status == SceneClosed || !st.Scene.HasActor(t) {
			return "it closes no scene " + t + " acts in"
		}
		return ""
	}
	return "a " + Clip(e.Type, QuoteRunes) + " event triggers nobody"
}

// messageFor is triggerFor's answer for message e.
func messageFor(f ClaimTriggerFacts, e Event, t string, inv Invite) string {
	switch {
	case f.Humans.Has(e.To):
		return "it is addressed to a human"
	case e.To == t:
		return ""
	case e.To != ToAll:
		return "it is addressed to " + e.To
	case f.Humans.Has(e.From):
		return ""
	case namesParticipant(e.Text(), inv):
		return ""
	}
	return "it is addressed to everyone by " + e.From + ", who is not a human, and does not name " + t
}

// controlFor is triggerFor's answer for control e: a human's prod naming
// t, or a human's start of a scene whose first actor is t.
func controlFor(f ClaimTriggerFacts, e Event, t string) string {
	ctl := ControlOf(e)
	switch {
	case ctl == nil || !f.Humans.Has(e.From):
		return "it is no control of a human's that wakes anyone"
	case slices.Contains(ctl.Prod, t):
		return ""
	}
	after := FoldParsed(f.Before, e, ctl, f.Humans)
	if SceneStarted(f.Before, after) && after.Scene.First == t {
		return ""
	}
	return "it neither prods " + t + " nor starts a scene with it"
}

// namesParticipant reports whether text could mention inv by one of the
// names a mention resolves it by (its id, nickname, a role, its client or
// model), whatever the coordinator's mention prefix: MayMention.
func namesParticipant(text string, inv Invite) bool {
	names := append([]string{inv.ID, inv.Profile.Nickname, inv.Profile.Client, inv.Profile.Model}, inv.Profile.Roles...)
	for _, n := range names {
		if n != "" && MayMention(text, n) {
			return true
		}
	}
	return false
}

// MayMention reports whether text holds name, case aside, where a mention
// of it could be, whatever the mention prefix: right after a byte a prefix
// may end with (a prefix holds no letters, digits, underscores, spaces or
// backticks: coordinator/config.ValidMentionPrefix), and ending where a
// mentioned name ends (the end of the text, or a byte no name holds,
// after any of the trailing ". : - @" a mention strips). Every name the
// coordinator's mention parser finds passes it (FuzzMayMention in
// coordinator/rules holds that); the bridge refuses a claim on another
// sender's message that mentions its participant nowhere.
func MayMention(text, name string) bool {
	text, name = strings.ToLower(text), strings.ToLower(name)
	if name == "" {
		return false
	}
	for i := 0; i < len(text); {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		j += i
		k := j + len(name)
		for k < len(text) && strings.IndexByte(".:-@", text[k]) >= 0 {
			k++
		}
		if j > 0 && prefixByte(text[j-1]) && (k == len(text) || !nameByte(text[k])) {
			return true
		}
		i = j + 1
	}
	return false
}

// prefixByte reports whether b may end a mention prefix.
func prefixByte(b byte) bool {
	return !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '`' || b == ' ' || b == '\t' || b == '\n' || b == '\r')
}

// nameByte reports whether b may be part of a participant id.
func nameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("._@:-", b) >= 0
}
