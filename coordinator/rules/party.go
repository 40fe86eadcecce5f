package rules

import (
	"cmp"
	"slices"
	"strings"
	"unicode"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// RuleParty is the rule of a human message to all while party mode is on:
// a round for that trigger (contract 5.7).
const RuleParty = "party"

// Reasons a party selection records for each candidate (PartyPick.Reason).
const (
	PartyMentioned    = "mentioned"
	PartyMatched      = "matched words"
	PartyRotation     = "rotation: fewest party turns"
	PartyOverMax      = "max_agents reached"
	PartyNotInAgents  = "not in the party's agents"
	PartyNotAvailable = "not available"
)

// PartySelection is who a party round selects, in order, and who it does
// not, each with the facts that decided it, so that `agent-bridge why`
// can answer "why did (or didn't) X answer?" for a party trigger.
type PartySelection struct {
	// MaxAgents is the party's max_agents when the trigger arrived.
	MaxAgents int `json:"max_agents"`
	// CrossTalk is whether round 2 may run.
	CrossTalk bool `json:"cross_talk"`
	// Words are the message's words that selection compared, lower-cased.
	Words []string `json:"words"`
	// Selected run in round 1, in this order.
	Selected []PartyPick `json:"selected"`
	// NotSelected are the other candidates.
	NotSelected []PartyPick `json:"not_selected"`
}

// PartyPick is one candidate of a party selection.
type PartyPick struct {
	Participant string `json:"participant"`
	// Rank is the candidate's place in the ranking by matches, then
	// rotation, then id (1 is first); 0 for mentions and for candidates
	// that could not be ranked.
	Rank int `json:"rank,omitempty"`
	// Matched are the message's words found in the candidate's roles,
	// nickname or expertise.
	Matched []string `json:"matched"`
	// Turns is how many party rounds the candidate took part in before.
	Turns int `json:"turns"`
	// Reason says why it was (not) selected: one of the Party constants,
	// or a trigger-rule reason (not invited, no adapter, muted).
	Reason string `json:"reason"`
}

// IDs returns the selected participants' ids, in order.
func (s PartySelection) IDs() []string {
	ids := make([]string, len(s.Selected))
	for i, p := range s.Selected {
		ids[i] = p.Participant
	}
	return ids
}

// PartyFacts are what a party round's selection reads besides the
// thread's state, the same on every coordinator: the party turns counted
// from the thread before the trigger (PartyTurns), and who another live
// coordinator serves.
type PartyFacts struct {
	// Turns is how many party rounds each participant took part in.
	Turns map[string]int
	// Elsewhere reports whether another live coordinator serves the
	// participant (by its invited client), with the workspace the thread
	// picks for it when it picks one; nil means none does.
	Elsewhere func(participant, client, workspace string) bool
}

// turns returns f's turn counts; nil for a nil f.
func (f *PartyFacts) turns() map[string]int {
	if f == nil {
		return nil
	}
	return f.Turns
}

// served reports whether some coordinator serves p: this one (cfg) or,
// by f, another live one. A selection that asked only cfg would differ
// between coordinators serving different agents (contract 7.1).
func (f *PartyFacts) served(st agentbridge.ThreadState, cfg *config.Config, p string) bool {
	if _, ok := cfg.ResolveAgent(p, st); ok {
		return true
	}
	if f == nil || f.Elsewhere == nil {
		return false
	}
	inv, _ := st.Invited(p)
	return f.Elsewhere(p, inv.Profile.Client, st.WorkspaceOf(p))
}

// partyUnavailable says why p cannot take part in a party round, or "".
func partyUnavailable(st agentbridge.ThreadState, e agentbridge.Event, cfg *config.Config, facts *PartyFacts, p string) string {
	_, invited := st.Invited(p)
	adapter := facts.served(st, cfg, p)
	switch {
	case p == e.From:
		return ReasonSelfMention
	case !invited:
		return ReasonNotInvited
	case !adapter:
		return ReasonNoAdapter
	case st.IsMuted(p):
		return ReasonMuted
	}
	return ""
}

// selectMentioned adds the participants the message mentions to sel, in
// mention order (selected when they can run), and the mentions that
// resolved to nobody with their reasons; seen collects them.
func selectMentioned(sel *PartySelection, seen map[string]bool, st agentbridge.ThreadState, e agentbridge.Event, cfg *config.Config, facts *PartyFacts) {
	turns := facts.turns()
	r := &router{state: st, e: e, cfg: cfg}
	r.resolve(ParseMentions(e.Text(), cfg.MentionPrefix))
	for _, p := range r.want {
		if seen[p] {
			continue
		}
		seen[p] = true
		pick := PartyPick{Participant: p, Matched: []string{}, Turns: turns[p], Reason: PartyMentioned}
		if why := partyUnavailable(st, e, cfg, facts, p); why != "" {
			pick.Reason = why
			sel.NotSelected = append(sel.NotSelected, pick)
			continue
		}
		sel.Selected = append(sel.Selected, pick)
	}
	for _, s := range r.pre {
		if !seen[s.Participant] {
			seen[s.Participant] = true
			sel.NotSelected = append(sel.NotSelected, PartyPick{Participant: s.Participant, Matched: []string{}, Reason: s.Reason})
		}
	}
}

// SelectParty chooses the agents of a party round for message e (a human's
// message to all; st is the thread's state before it, with party mode on).
// facts counts the party rounds each participant took part in so far in the
// thread and says who other coordinators serve (nil: no turns, none).
// Participants the message mentions come first, in mention order;
// then, up to max_agents in all, the candidates (the party's agents, or
// every invited participant) ranked by how many of the message's words
// match their roles, nickname and expertise, ties broken by fewest turns
// (rotation), then by id. A candidate that cannot be invoked (no
// coordinator serves it, muted) is never selected. SelectParty is pure:
// coordinators serving different agents select the same ones.
func SelectParty(st agentbridge.ThreadState, e agentbridge.Event, cfg *config.Config, facts *PartyFacts) PartySelection {
	turns := facts.turns()
	sel := PartySelection{
		MaxAgents: max(st.Party.MaxAgents, 1), CrossTalk: st.Party.CrossTalk,
		Words: partyWords(e.Text()), Selected: []PartyPick{}, NotSelected: []PartyPick{},
	}
	seen := map[string]bool{}
	unavailable := func(p string) string { return partyUnavailable(st, e, cfg, facts, p) }
	if cfg.EnableMentions {
		selectMentioned(&sel, seen, st, e, cfg, facts)
	}
	var ranked []PartyPick
	for _, inv := range st.Participants.Invited {
		p := inv.ID
		if seen[p] {
			continue
		}
		seen[p] = true
		pick := PartyPick{Participant: p, Matched: matchedWords(sel.Words, inv.Profile), Turns: turns[p]}
		if len(st.Party.Agents) > 0 && !slices.Contains(st.Party.Agents, p) {
			pick.Reason = PartyNotInAgents
			sel.NotSelected = append(sel.NotSelected, pick)
			continue
		}
		if why := unavailable(p); why != "" {
			pick.Reason = why
			sel.NotSelected = append(sel.NotSelected, pick)
			continue
		}
		ranked = append(ranked, pick)
	}
	slices.SortFunc(ranked, func(a, b PartyPick) int {
		return cmp.Or(
			cmp.Compare(len(b.Matched), len(a.Matched)),
			cmp.Compare(a.Turns, b.Turns),
			strings.Compare(a.Participant, b.Participant),
		)
	})
	for i := range ranked {
		pick := ranked[i]
		pick.Rank = i + 1
		switch {
		case len(sel.Selected) >= sel.MaxAgents:
			pick.Reason = PartyOverMax
			sel.NotSelected = append(sel.NotSelected, pick)
			continue
		case len(pick.Matched) > 0:
			pick.Reason = PartyMatched
		default:
			pick.Reason = PartyRotation
		}
		sel.Selected = append(sel.Selected, pick)
	}
	return sel
}

// partyStopWords are words too common to say anything about expertise;
// a profile such as "testing and security" should not match every "and".
var partyStopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "but": true,
	"by": true, "do": true, "for": true, "from": true, "how": true, "i": true, "if": true, "in": true,
	"is": true, "it": true, "of": true, "on": true, "or": true, "our": true, "should": true, "so": true,
	"that": true, "the": true, "this": true, "to": true, "we": true, "what": true, "which": true,
	"who": true, "why": true, "with": true, "you": true, "your": true,
}

// partyWords splits text into distinct lower-case words (letters, digits,
// and inner + # . - such as c++, c#, node.js), in order, without stop
// words and without a plain word's plural s, so that "databases" matches
// "database".
func partyWords(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("+#.-", r)
	}) {
		w = strings.Trim(w, ".-")
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.ContainsAny(w, "+#.-") {
			w = w[:len(w)-1]
		}
		if w == "" || partyStopWords[w] || slices.Contains(out, w) {
			continue
		}
		out = append(out, w)
	}
	return out
}

// matchedWords returns the words (from partyWords) that also occur in the
// profile's roles, nickname or expertise, in the words' order.
func matchedWords(words []string, p agentbridge.Profile) []string {
	terms := slices.Concat(p.Roles, p.Expertise, []string{p.Nickname})
	profile := partyWords(strings.Join(terms, " "))
	out := []string{}
	for _, w := range words {
		if slices.Contains(profile, w) {
			out = append(out, w)
		}
	}
	return out
}

// How one agent's turn in a party round ended (PartyOutcome.Result).
const (
	PartyAnswered = "answered"
	PartyPassed   = "passed"
	PartyAsked    = "asked"
	PartyFailed   = "failed"
)

// PartyOutcome is one agent's turn in a party round.
type PartyOutcome struct {
	Participant string
	// Result is one of PartyAnswered, PartyPassed, PartyAsked (a
	// [USER QUESTION] reply) or PartyFailed.
	Result string
	// Detail says how a failed turn failed (its invocation status).
	Detail string
}

// PartyNext is what follows a finished party round: round 2's agents, or
// the end of the round and the text of its notice.
type PartyNext struct {
	// Round2 lists who runs in round 2, in round 1's order; empty when the
	// round ends.
	Round2 []string
	// Notice is the closing notice's text when the round ends.
	Notice string
}

// NextPartyStep decides what follows once every agent of round (1 or 2)
// has finished: after round 1, those who answered react in round 2 when
// cross-talk is on, at least two answered and nobody asked the user a
// question; otherwise, and after round 2, the round ends with one notice
// naming who answered, passed and failed. It is pure.
func NextPartyStep(round int, crossTalk bool, round1, round2 []PartyOutcome) PartyNext {
	answered := outcomesWith(round1, PartyAnswered)
	asked := outcomesWith(round1, PartyAsked)
	if round == 1 && crossTalk && len(answered) >= 2 && len(asked) == 0 {
		return PartyNext{Round2: answered}
	}
	var why string
	switch {
	case round == 2:
	case len(asked) > 0:
		why = "no reactions: " + joinIDs(asked) + " asked you a question"
	case !crossTalk:
		why = "no reactions: cross_talk is off"
	default:
		why = "no reactions: fewer than two answered"
	}
	return PartyNext{Notice: PartyNotice(round1, round2, why)}
}

// PartyNotice is the text of the notice that ends a party round.
func PartyNotice(round1, round2 []PartyOutcome, why string) string {
	var b strings.Builder
	b.WriteString("Party round done.")
	describe := func(title string, outs []PartyOutcome) {
		if len(outs) == 0 {
			return
		}
		var parts []string
		for _, res := range []string{PartyAnswered, PartyAsked, PartyPassed} {
			if ids := outcomesWith(outs, res); len(ids) > 0 {
				parts = append(parts, res+": "+joinIDs(ids))
			}
		}
		var failed []string
		for _, o := range outs {
			if o.Result == PartyFailed {
				failed = append(failed, o.Participant+" ("+o.Detail+")")
			}
		}
		if len(failed) > 0 {
			parts = append(parts, "failed: "+strings.Join(failed, ", "))
		}
		b.WriteString(" " + title + " — " + strings.Join(parts, "; ") + ".")
	}
	if len(round1) == 0 {
		b.WriteString(" Nobody could take part (see `agent-bridge why` on your message).")
	}
	describe("First takes", round1)
	describe("Reactions", round2)
	if why != "" && len(round1) > 0 {
		b.WriteString(" " + strings.ToUpper(why[:1]) + why[1:] + ".")
	}
	b.WriteString(" Write again to go on, or say *exit to leave party mode.")
	return b.String()
}

func outcomesWith(outs []PartyOutcome, result string) []string {
	var ids []string
	for _, o := range outs {
		if o.Result == result {
			ids = append(ids, o.Participant)
		}
	}
	return ids
}

func joinIDs(ids []string) string { return strings.Join(ids, ", ") }
