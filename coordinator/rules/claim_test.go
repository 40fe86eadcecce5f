package rules

import (
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestClaimDisagreement: a coordinator taking a claim over runs it only
// when its own decision of the claim's event makes it a trigger of the
// claim's round for the claim's participant (contract 8.3).
func TestClaimDisagreement(t *testing.T) {
	cfg := testConfig()
	hop := func(e agentbridge.Event, h int) agentbridge.Event { e.Meta.Hop = &h; return e }
	for _, tc := range []struct {
		name        string
		state       agentbridge.ThreadState
		event       agentbridge.Event
		participant string
		round       int
		servedHere  bool
		agree       bool
	}{
		{"addressed to it", team(), msg("user", "codex", "hi"), "codex", 0, true, true},
		{"a mention from a human", team(), msg("user", agentbridge.ToAll, "@cody look"), "codex", 0, true, true},
		{"a message nobody addressed", team(), msg("mallory", agentbridge.ToAll, "rm -rf ~"), "codex", 0, true, false},
		{"a mention from a sender who may not mention", team(), msg("echo", agentbridge.ToAll, "@codex run this"), "codex", 0, true, false},
		{"addressed to another", team(), msg("user", "echo", "hi"), "codex", 0, true, false},
		{"muted", team(ctl("user", `{"mute":{"targets":["codex"]}}`)), msg("user", "codex", "hi"), "codex", 0, true, false},
		{"paused", team(ctl("user", `{"pause":{"on":true}}`)), msg("user", "codex", "hi"), "codex", 0, true, false},
		{"not invited", team(), msg("user", "mystery", "hi"), "mystery", 0, true, false},
		{"its own message", team(), msg("codex", agentbridge.ToAll, "@codex"), "codex", 0, true, false},
		{"past the loop guard", team(), hop(msg("echo", "codex", "again"), 6), "codex", 0, true, false},
		{"round 1 outside party mode", team(), msg("user", "codex", "hi"), "codex", 1, true, false},
		{"a prod from a human", team(), ctl("user", `{"prod":["codex"]}`), "codex", 0, true, true},
		{"a prod from an agent", team(), ctl("echo", `{"prod":["codex"]}`), "codex", 0, true, false},
		// A fallback answers for a participant another coordinator serves:
		// this one skips it as "no adapter", and the rules did address it.
		{"served elsewhere, addressed", team(), msg("user", "gemini", "hi"), "gemini", 0, false, true},
		{"served elsewhere, muted", team(ctl("user", `{"mute":{"targets":["gemini"]}}`)), msg("user", "gemini", "hi"), "gemini", 0, false, false},
		{"served elsewhere, paused", team(ctl("user", `{"pause":{"on":true}}`)), msg("user", "gemini", "hi"), "gemini", 0, false, false},
		{"served elsewhere, past the loop guard", team(), hop(msg("echo", "gemini", "again"), 6), "gemini", 0, false, false},
		{"served elsewhere, not addressed", team(), msg("echo", agentbridge.ToAll, "hello"), "gemini", 0, false, false},
		{"party round 1, selected", partyTeam(`{"party":{"on":true,"max_agents":1}}`), msg("user", agentbridge.ToAll, "roadmap for users"), "pm", 1, true, true},
		{"party round 2 of the same trigger", partyTeam(`{"party":{"on":true,"max_agents":1}}`), msg("user", agentbridge.ToAll, "roadmap for users"), "pm", 2, true, true},
		{"party, a candidate over max_agents", partyTeam(`{"party":{"on":true,"max_agents":1}}`), msg("user", agentbridge.ToAll, "roadmap for users"), "qa", 1, true, true},
		{"party, claimed as round 0", partyTeam(`{"party":{"on":true}}`), msg("user", agentbridge.ToAll, "roadmap"), "pm", 0, true, false},
		{"party, not in the party's agents", partyTeam(`{"party":{"on":true,"agents":["dev"]}}`), msg("user", agentbridge.ToAll, "roadmap"), "pm", 1, true, false},
	} {
		d := Decide(tc.state, tc.event, agentbridge.ControlOf(tc.event), cfg, nil)
		why := ClaimDisagreement(d, tc.state, cfg, tc.participant, tc.round, tc.servedHere)
		if (why == "") != tc.agree {
			t.Errorf("%s: disagreement %q, want agree %v (decision %+v)", tc.name, why, tc.agree, d)
		}
	}
}
