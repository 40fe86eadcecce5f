package agentbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Party mode defaults and bounds (contract 5.7).
const (
	// DefaultPartyMaxAgents is how many agents a party round selects when
	// the control does not say.
	DefaultPartyMaxAgents = 2
	// MaxPartyAgents bounds max_agents: every selected agent runs twice per
	// human message, so a large round is expensive and slow to read.
	MaxPartyAgents = 16
)

// Party is a thread's party mode: while On, each human message to all
// starts a round in which a few agents answer independently, then react to
// each other (see docs/coordinator.md, "Party mode").
type Party struct {
	On bool `json:"on"`
	// Agents restricts the candidates; empty means every invited
	// participant with an adapter.
	Agents []string `json:"agents"`
	// MaxAgents is how many agents a round selects (mentions may add more).
	MaxAgents int `json:"max_agents"`
	// CrossTalk enables round 2, the reactions.
	CrossTalk bool `json:"cross_talk"`
}

// PartyControl is {"party":{"on":bool,"agents":[ids]?,"max_agents":n?,"cross_talk":bool?}}
// with the defaults applied.
type PartyControl struct {
	On        bool
	Agents    []string
	MaxAgents int
	CrossTalk bool
}

// parseParty parses the value of a party control key. Unknown keys are
// refused so that a typo ("max_agent") is not silently ignored.
func parseParty(v json.RawMessage) (*PartyControl, error) {
	var raw struct {
		On        *bool            `json:"on"`
		Agents    *json.RawMessage `json:"agents"`
		MaxAgents *json.RawMessage `json:"max_agents"`
		CrossTalk *json.RawMessage `json:"cross_talk"`
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil || raw.On == nil {
		return nil, badControl("party", "A party control needs {\"on\": true} or {\"on\": false}, and optionally \"agents\": [participant ids], \"max_agents\": 1 to %d and \"cross_talk\": bool.", MaxPartyAgents)
	}
	p := &PartyControl{On: *raw.On, Agents: []string{}, MaxAgents: DefaultPartyMaxAgents, CrossTalk: true}
	if present(raw.Agents) {
		ids, err := partyAgents(*raw.Agents)
		if err != nil {
			return nil, err
		}
		p.Agents = append(p.Agents, ids...)
	}
	if present(raw.MaxAgents) {
		var n int
		if err := json.Unmarshal(*raw.MaxAgents, &n); err != nil || n < 1 || n > MaxPartyAgents {
			return nil, badControl("party.max_agents", "A party's max_agents must be a whole number from 1 to %d.", MaxPartyAgents)
		}
		p.MaxAgents = n
	}
	if present(raw.CrossTalk) {
		if err := json.Unmarshal(*raw.CrossTalk, &p.CrossTalk); err != nil {
			return nil, badControl("party.cross_talk", "A party's cross_talk must be true or false.")
		}
	}
	return p, nil
}

// present reports whether an optional key was given a value (not null).
func present(v *json.RawMessage) bool { return v != nil && !isNull(*v) }

// partyAgents parses a party's agents: participant ids, each once.
func partyAgents(v json.RawMessage) ([]string, error) {
	var ids []string
	if err := json.Unmarshal(v, &ids); err != nil || !validIDs(ids) {
		return nil, badControl("party.agents", "A party's agents must be a list of participant ids, such as [\"claude\", \"codex\"].")
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return nil, badControl("party.agents", "A party's agents list %q twice; name each agent once.", Clip(id, QuoteRunes))
		}
		seen[id] = true
	}
	return ids, nil
}

// foldParty applies a party control from a human. Turning party mode off
// keeps the last settings, so the state still says what the party was.
func foldParty(s ThreadState, c *PartyControl) ThreadState {
	if !c.On {
		s.Party.On = false
		s.Party.Agents = slices.Clone(s.Party.Agents)
		return s
	}
	s.Party = Party{On: true, Agents: slices.Clone(c.Agents), MaxAgents: c.MaxAgents, CrossTalk: c.CrossTalk}
	return s
}

// admitParty refuses a party control that names agents not invited in the
// thread (state s is the thread's state before the control), naming the
// first such id; anything else (c nil or without a party) is admitted.
func admitParty(thread string, s ThreadState, c *Control) error {
	if c == nil || c.Party == nil || !c.Party.On {
		return nil
	}
	invited := slices.Clone(s.Participants.Invited)
	if c.Invite != nil {
		// A control may invite and start a party at once.
		invited = append(invited, Invite{ID: c.Invite.ParticipantID})
	}
	for _, id := range c.Party.Agents {
		if !slices.ContainsFunc(invited, func(inv Invite) bool { return inv.ID == id }) {
			return &Error{
				Code: ECodeInvalidControl, Field: "content.party.agents", Thread: thread, Participant: id,
				Message: fmt.Sprintf("The party names %s, who is not invited in thread %q; invite them first or leave them out of agents.", Clip(id, QuoteRunes), thread),
			}
		}
	}
	return nil
}

// IsPartyExit reports whether a message's text asks to leave party mode:
// it holds *exit, goodbye, end party or quit as words, in any case (seed
// 002's exit triggers). "quite" or "endless party" do not count.
func IsPartyExit(text string) bool {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '*'
	})
	for i, w := range words {
		bare := strings.Trim(w, "*")
		switch {
		case bare == "goodbye" || bare == "quit":
			return true
		case bare == "exit" && strings.HasPrefix(w, "*"):
			return true
		case bare == "end" && i+1 < len(words) && strings.Trim(words[i+1], "*") == "party":
			return true
		}
	}
	return false
}

// PartyExits reports whether message e, from a human to all, ends the
// thread's party mode (state s is before e).
func PartyExits(s ThreadState, e Event, humans Humans) bool {
	return s.Party.On && e.Type == TypeMessage && e.To == ToAll && humans.Has(e.From) && IsPartyExit(e.Text())
}
