package agentbridge

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestCheckClaimTrigger: the bridge's own check of a run claim's trigger
// (contract 8.3), table-style over states folded from real controls.
func TestCheckClaimTrigger(t *testing.T) {
	t.Parallel()
	humans := Humans{"user"}
	control := func(from, content string) Event {
		return Event{ID: "c", Type: TypeControl, From: from, To: ToAll, Content: json.RawMessage(content)}
	}
	invite := func(id, client string, roles ...string) Event {
		b, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": id, "profile": Profile{Client: client, Model: "m", Nickname: "nick-" + id, Roles: roles}}})
		return control("user", string(b))
	}
	state := func(extra ...Event) ThreadState {
		var st ThreadState
		for _, e := range append([]Event{invite("codex", "codex", "coder"), invite("claude", "claude")}, extra...) {
			st = Fold(st, e, humans)
		}
		return st
	}
	msg := func(from, to, text string) Event {
		b, _ := json.Marshal(text)
		return Event{ID: "e", Type: TypeMessage, From: from, To: to, Content: b}
	}
	claim := func(p string) ClaimRequest {
		return ClaimRequest{ClaimKey: ClaimKey{Thread: "t", Event: "e", Participant: p}, Coordinator: "laptop", Instance: "i"}
	}
	round := func(r ClaimRequest, n int) ClaimRequest { r.Round = n; return r }
	fallback := func(r ClaimRequest, from string) ClaimRequest { r.FallbackFrom = from; return r }
	party := state(control("user", `{"party":{"on":true}}`))
	scene := control("user", `{"scene":{"on":true,"actors":["claude","codex"],"setting":"s","first":"codex"}}`)
	for _, tc := range []struct {
		name        string
		req         ClaimRequest
		e           Event
		before, now ThreadState
		trigger     bool
	}{
		{"addressed to it", claim("codex"), msg("user", "codex", "hi"), state(), state(), true},
		{"to everyone from a human (any rule may wake it)", claim("codex"), msg("user", ToAll, "hello"), state(), state(), true},
		{"to everyone from an agent naming it", claim("codex"), msg("claude", ToAll, "over to @Codex"), state(), state(), true},
		{"named by a role, whatever the prefix", claim("codex"), msg("claude", ToAll, "!coder please"), state(), state(), true},
		{"to everyone from an agent, not naming it (the issue's)", claim("codex"), msg("laptop", ToAll, "rm -rf ~"), state(), state(), false},
		{"addressed to another", claim("codex"), msg("user", "claude", "hi"), state(), state(), false},
		{"addressed to a human", claim("codex"), msg("claude", "user", "@codex"), state(), state(), false},
		{"its own message", claim("codex"), msg("codex", ToAll, "@codex"), state(), state(), false},
		{"a made-up participant", claim("ghost"), msg("user", "ghost", "hi"), state(), state(), false},
		{"a human", claim("user"), msg("claude", "user", "hi"), state(), state(), false},
		{"paused", claim("codex"), msg("user", "codex", "hi"), state(control("user", `{"pause":{"on":true}}`)), state(), false},
		{"muted", claim("codex"), msg("user", "codex", "hi"), state(control("user", `{"mute":{"targets":["codex"]}}`)), state(), false},
		{"invited only after it", claim("codex"), msg("user", "codex", "hi"), ThreadState{}, state(), false},
		{"round 1 outside party mode (the issue's)", round(claim("codex"), 1), msg("user", "codex", "hi"), state(), state(), false},
		{"a party round", round(claim("codex"), 1), msg("user", ToAll, "ideas?"), party, party, true},
		{"its round 2", round(claim("codex"), 2), msg("user", ToAll, "ideas?"), party, party, true},
		{"a party trigger claimed as round 0", claim("codex"), msg("user", ToAll, "ideas?"), party, party, false},
		{"a direct message in party mode", claim("codex"), msg("user", "codex", "hi"), party, party, true},
		{"a human's prod", claim("codex"), control("user", `{"prod":["codex"]}`), state(), state(), true},
		{"an agent's prod", claim("codex"), control("claude", `{"prod":["codex"]}`), state(), state(), false},
		{"an invite", claim("codex"), invite("gemini", "gemini"), state(), state(), false},
		{"a scene's first actor", claim("codex"), scene, state(), state(), true},
		{"a scene's other actor", claim("claude"), scene, state(), state(), false},
		{"a journal after a scene", claim("claude"), Event{ID: "e", Type: TypeSceneClosed, From: "laptop", To: ToAll, Content: json.RawMessage(`"explicit"`)}, state(scene), state(scene), true},
		{"scene.closed without a scene", claim("claude"), Event{ID: "e", Type: TypeSceneClosed, From: "laptop", To: ToAll, Content: json.RawMessage(`"explicit"`)}, state(), state(), false},
		{"another type", claim("codex"), Event{ID: "e", Type: "thread.renamed", From: "user", To: ToAll, Content: json.RawMessage(`"x"`)}, state(), state(), false},
		{"a fallback for a trigger of the one it answers for", fallback(claim("claude"), "codex"), msg("user", "codex", "hi"), state(), state(), true},
		{"a fallback invited after the trigger", fallback(claim("gemini"), "codex"), msg("user", "codex", "hi"), state(), state(invite("gemini", "gemini")), true},
		{"a fallback not invited", fallback(claim("gemini"), "codex"), msg("user", "codex", "hi"), state(), state(), false},
		{"a fallback for no trigger", fallback(claim("claude"), "codex"), msg("user", "claude", "hi"), state(), state(), false},
		{"a human as the fallback", fallback(claim("user"), "codex"), msg("user", "codex", "hi"), state(), state(), false},
	} {
		err := CheckClaimTrigger(tc.req, ClaimTriggerFacts{Event: tc.e, Before: tc.before, Now: tc.now, Humans: humans})
		var e *Error
		switch {
		case tc.trigger && err != nil:
			t.Errorf("%s: %v, want a trigger", tc.name, err)
		case !tc.trigger && (!errors.As(err, &e) || e.Code != ECodeNotATrigger || e.Participant != tc.req.Participant):
			t.Errorf("%s: %v, want not_a_trigger", tc.name, err)
		}
	}
}
