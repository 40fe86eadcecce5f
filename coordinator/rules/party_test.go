package rules

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// expert invites a participant with expertise (and roles) for party tests.
func expert(id, client, nickname string, roles, expertise []string) agentbridge.Event {
	p := agentbridge.Profile{Client: client, Model: "m", Nickname: nickname, Roles: roles, Expertise: expertise}
	b, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": id, "profile": p}})
	return ctl("user", string(b))
}

// partyTeam is a thread in party mode with four agents that have
// adapters (all client "claude") and one that has none.
func partyTeam(party string, extra ...agentbridge.Event) agentbridge.ThreadState {
	events := []agentbridge.Event{
		expert("arch", "claude", "winston", []string{"architect"}, []string{"distributed systems", "databases"}),
		expert("dev", "claude", "amelia", []string{"developer"}, []string{"go", "testing"}),
		expert("pm", "claude", "john", []string{"product manager"}, []string{"roadmap", "users"}),
		expert("qa", "claude", "quinn", []string{"tester"}, []string{"testing", "security"}),
		expert("gem", "gemini", "gem", nil, []string{"databases"}),
		ctl("user", party),
	}
	return fold(append(events, extra...)...)
}

func TestSelectParty(t *testing.T) {
	on := `{"party":{"on":true}}`
	tests := []struct {
		name  string
		state agentbridge.ThreadState
		text  string
		turns map[string]int
		want  []string // selected, "id:reason[:matched words]"
		not   []string // not selected, "id:reason"
	}{
		{"word matches rank first", partyTeam(on), "How should we shard the databases for our users?", nil,
			[]string{"arch:matched words:database", "pm:matched words:user"},
			[]string{"gem:no adapter", "dev:max_agents reached", "qa:max_agents reached"}},
		{"more matches beat fewer; equal ones go by id", partyTeam(on), "testing security of go code", nil,
			[]string{"dev:matched words:testing,go", "qa:matched words:testing,security"},
			[]string{"gem:no adapter", "arch:max_agents reached", "pm:max_agents reached"}},
		{"ties go to fewest turns", partyTeam(on), "testing", map[string]int{"dev": 3, "qa": 1}, // dev and qa match once
			[]string{"qa:matched words:testing", "dev:matched words:testing"},
			[]string{"gem:no adapter", "arch:max_agents reached", "pm:max_agents reached"}},
		{"no match: rotation by turns then id", partyTeam(on), "hello there", map[string]int{"arch": 2, "dev": 1, "pm": 0, "qa": 0},
			[]string{"pm:rotation: fewest party turns", "qa:rotation: fewest party turns"},
			[]string{"gem:no adapter", "dev:max_agents reached", "arch:max_agents reached"}},
		{"nickname and role words count", partyTeam(on), "Winston, as architect, what do you think?", nil,
			[]string{"arch:matched words:winston,architect", "dev:rotation: fewest party turns"},
			[]string{"gem:no adapter", "pm:max_agents reached", "qa:max_agents reached"}},
		{"mentions first, then fill up to max_agents", partyTeam(on), "@quinn what about the databases?", nil,
			[]string{"qa:mentioned", "arch:matched words:database"},
			[]string{"gem:no adapter", "dev:max_agents reached", "pm:max_agents reached"}},
		{"mentions beyond max_agents all run", partyTeam(`{"party":{"on":true,"max_agents":1}}`), "@pm @dev roadmap?", nil,
			[]string{"pm:mentioned", "dev:mentioned"},
			[]string{"gem:no adapter", "arch:max_agents reached", "qa:max_agents reached"}},
		{"a mention outside agents still runs", partyTeam(`{"party":{"on":true,"agents":["arch","dev"]}}`), "@pm and databases", nil,
			[]string{"pm:mentioned", "arch:matched words:database"},
			[]string{"qa:not in the party's agents", "gem:not in the party's agents", "dev:max_agents reached"}},
		{"agents restricts the candidates", partyTeam(`{"party":{"on":true,"agents":["dev","qa"],"max_agents":3}}`), "databases", nil,
			[]string{"dev:rotation: fewest party turns", "qa:rotation: fewest party turns"},
			[]string{"arch:not in the party's agents", "pm:not in the party's agents", "gem:not in the party's agents"}},
		{"muted and unknown mentions are not selected", partyTeam(on, ctl("user", `{"mute":{"targets":["arch"],"mode":"soft"}}`)), "@arch @nobody databases", nil,
			[]string{"dev:rotation: fewest party turns", "pm:rotation: fewest party turns"},
			[]string{"arch:muted", "nobody:not invited", "gem:no adapter", "qa:max_agents reached"}},
		{"max_agents 3", partyTeam(`{"party":{"on":true,"max_agents":3}}`), "roadmap", map[string]int{"dev": 1},
			[]string{"pm:matched words:roadmap", "arch:rotation: fewest party turns", "qa:rotation: fewest party turns"},
			[]string{"gem:no adapter", "dev:max_agents reached"}},
	}
	cfg := testConfig()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := SelectParty(tt.state, msg("user", agentbridge.ToAll, tt.text), cfg, &PartyFacts{Turns: tt.turns})
			var got, not []string
			for _, p := range sel.Selected {
				s := p.Participant + ":" + p.Reason
				if len(p.Matched) > 0 {
					s += ":" + strings.Join(p.Matched, ",")
				}
				got = append(got, s)
			}
			for _, p := range sel.NotSelected {
				not = append(not, p.Participant+":"+p.Reason)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("selected = %q\nwant       %q", got, tt.want)
			}
			if !slices.Equal(not, tt.not) {
				t.Errorf("not selected = %q\nwant           %q", not, tt.not)
			}
		})
	}
}

func TestPartyWords(t *testing.T) {
	got := partyWords("How do the Databases scale? C++ and node.js, testing-tools; class")
	want := []string{"database", "scale", "c++", "node.js", "testing-tools", "class"}
	if !slices.Equal(got, want) {
		t.Errorf("words = %q, want %q", got, want)
	}
}

// FuzzSelectParty checks selection's invariants on arbitrary messages and
// turn counts: it never panics; every invited participant and every
// mention appears once, selected or not; nobody without an adapter, muted
// or the sender is selected; beyond the mentions at most max_agents are
// selected; and the ranked candidates are ordered by matches, then turns,
// then id.
func FuzzSelectParty(f *testing.F) {
	f.Add("@quinn what about the databases?", 0, 1, 2, 3, uint8(2))
	f.Add("testing go testing @pm @pm @all", 5, 0, 0, 1, uint8(1))
	f.Add("`@arch` quit *exit", 0, 0, 0, 0, uint8(16))
	cfg := testConfig()
	f.Fuzz(func(t *testing.T, text string, a, d, p, q int, maxAgents uint8) {
		st := partyTeam(fmt.Sprintf(`{"party":{"on":true,"max_agents":%d}}`, int(maxAgents%16)+1), ctl("user", `{"mute":{"targets":["pm"],"mode":"soft"}}`))
		turns := map[string]int{"arch": a, "dev": d, "pm": p, "qa": q}
		sel := SelectParty(st, msg("user", agentbridge.ToAll, text), cfg, &PartyFacts{Turns: turns})
		seen := map[string]int{}
		mentions := 0
		for _, pick := range sel.Selected {
			seen[pick.Participant]++
			if pick.Participant == "gem" || pick.Participant == "pm" || pick.Participant == "user" {
				t.Fatalf("selected %s, who cannot run", pick.Participant)
			}
			if pick.Reason == PartyMentioned {
				mentions++
			}
		}
		if len(sel.Selected)-mentions > sel.MaxAgents {
			t.Fatalf("selected %d beyond %d mentions, max_agents %d", len(sel.Selected), mentions, sel.MaxAgents)
		}
		for _, pick := range sel.NotSelected {
			seen[pick.Participant]++
		}
		for _, inv := range st.Participants.Invited {
			if seen[inv.ID] != 1 {
				t.Fatalf("%s appears %d times", inv.ID, seen[inv.ID])
			}
		}
		var ranked []PartyPick
		for _, pick := range slices.Concat(sel.Selected, sel.NotSelected) {
			if pick.Rank > 0 {
				ranked = append(ranked, pick)
			}
		}
		slices.SortFunc(ranked, func(x, y PartyPick) int { return x.Rank - y.Rank })
		for i := 1; i < len(ranked); i++ {
			x, y := ranked[i-1], ranked[i]
			if len(x.Matched) < len(y.Matched) ||
				(len(x.Matched) == len(y.Matched) && (x.Turns > y.Turns || (x.Turns == y.Turns && x.Participant > y.Participant))) {
				t.Fatalf("rank %d (%+v) before rank %d (%+v)", x.Rank, x, y.Rank, y)
			}
		}
	})
}

func TestDecideParty(t *testing.T) {
	on := `{"party":{"on":true}}`
	cfg := testConfig()
	tests := []struct {
		name   string
		state  agentbridge.ThreadState
		event  agentbridge.Event
		rule   string
		invoke []string
	}{
		{"a human message to all starts a round", partyTeam(on), msg("user", agentbridge.ToAll, "databases"), RuleParty, []string{"arch", "dev"}},
		{"an exit word starts none", partyTeam(on), msg("user", agentbridge.ToAll, "ok, goodbye"), RuleNone, nil},
		{"an exit word still wakes a mention", partyTeam(on), msg("user", agentbridge.ToAll, "goodbye @dev"), RuleMention, []string{"dev"}},
		{"an agent's message is not a round", partyTeam(on), msg("dev", agentbridge.ToAll, "databases"), RuleNone, nil},
		{"a message to one participant is not a round", partyTeam(on), msg("user", "qa", "databases"), RuleTo, []string{"qa"}},
		{"paused: nobody", partyTeam(on, ctl("user", `{"pause":{"on":true}}`)), msg("user", agentbridge.ToAll, "databases"), RuleSkip, nil},
		{"party off: the usual rules", partyTeam(`{"party":{"on":false}}`), msg("user", agentbridge.ToAll, "databases"), RuleNone, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.state, tt.event, agentbridge.ControlOf(tt.event), cfg, nil)
			var got []string
			for _, x := range d.Invoke {
				got = append(got, x.Participant)
			}
			if d.Rule != tt.rule || !slices.Equal(got, tt.invoke) {
				t.Fatalf("rule %q invoke %q, want %q %q", d.Rule, got, tt.rule, tt.invoke)
			}
			if d.Rule == RuleParty {
				if d.Party == nil || len(d.Party.Selected) != len(d.Invoke) {
					t.Fatalf("party selection = %+v", d.Party)
				}
				reasons := map[string]string{}
				for _, s := range d.Skipped {
					reasons[s.Participant] = s.Reason
				}
				if reasons["gem"] != ReasonNoAdapter || reasons["pm"] != PartyOverMax {
					t.Errorf("skipped = %v", reasons)
				}
			}
		})
	}
}

func TestNextPartyStep(t *testing.T) {
	o := func(p, res string) PartyOutcome { return PartyOutcome{Participant: p, Result: res, Detail: "timeout"} }
	tests := []struct {
		name           string
		round          int
		crossTalk      bool
		round1, round2 []PartyOutcome
		round2Agents   []string
		notice         []string
	}{
		{"two answers react", 1, true, []PartyOutcome{o("a", PartyAnswered), o("b", PartyFailed), o("c", PartyAnswered)}, nil, []string{"a", "c"}, nil},
		{"one answer: no reactions", 1, true, []PartyOutcome{o("a", PartyAnswered), o("b", PartyFailed), o("c", PartyPassed)}, nil, nil,
			[]string{"First takes — answered: a; passed: c; failed: b (timeout).", "fewer than two answered", "*exit"}},
		{"a question ends the round", 1, true, []PartyOutcome{o("a", PartyAnswered), o("b", PartyAsked), o("c", PartyAnswered)}, nil, nil,
			[]string{"asked: b", "b asked you a question"}},
		{"no cross-talk", 1, false, []PartyOutcome{o("a", PartyAnswered), o("b", PartyAnswered)}, nil, nil,
			[]string{"cross_talk is off"}},
		{"after round 2", 2, true, []PartyOutcome{o("a", PartyAnswered), o("b", PartyAnswered)}, []PartyOutcome{o("a", PartyPassed), o("b", PartyFailed)}, nil,
			[]string{"First takes — answered: a, b.", "Reactions — passed: a; failed: b (timeout)."}},
		{"nobody selected", 1, true, nil, nil, nil, []string{"Nobody could take part"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := NextPartyStep(tt.round, tt.crossTalk, tt.round1, tt.round2)
			if !slices.Equal(next.Round2, tt.round2Agents) {
				t.Errorf("round 2 = %q, want %q", next.Round2, tt.round2Agents)
			}
			if (next.Notice == "") != (tt.notice == nil) {
				t.Fatalf("notice = %q", next.Notice)
			}
			for _, want := range tt.notice {
				if !strings.Contains(next.Notice, want) {
					t.Errorf("notice %q does not say %q", next.Notice, want)
				}
			}
		})
	}
}

// TestSelectPartyServedElsewhere: an agent this coordinator has no
// adapter for is selected as if it had one when another live coordinator
// serves it, so two coordinators serving different agents select the same
// ones (contract 7.1).
func TestSelectPartyServedElsewhere(t *testing.T) {
	st := partyTeam(`{"party":{"on":true,"max_agents":2}}`)
	msg := msg("user", agentbridge.ToAll, "databases please")
	here := SelectParty(st, msg, testConfig(), &PartyFacts{Elsewhere: func(p, client, _ string) bool { return p == "gem" && client == "gemini" }})
	if got := here.IDs(); !slices.Equal(got, []string{"arch", "gem"}) {
		t.Errorf("selected with gem served elsewhere = %q, want [arch gem]", got)
	}
	alone := SelectParty(st, msg, testConfig(), nil)
	if got := alone.IDs(); slices.Contains(got, "gem") {
		t.Errorf("selected with gem served nowhere = %q", got)
	}
}
