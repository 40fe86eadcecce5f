package adapters

import (
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

func TestRenderPromptParty(t *testing.T) {
	trigger := agentbridge.Event{ID: "T", Thread: "th", Type: agentbridge.TypeMessage, From: "user", To: agentbridge.ToAll, Content: []byte(`"which database?"`)}
	answer := agentbridge.Event{ID: "A", Thread: "th", Type: agentbridge.TypeMessage, From: "bob", To: agentbridge.ToAll, Content: []byte(`"SQLite."`)}
	p := NewPayload("http://b", agentbridge.Thread{ID: "th", Name: "n"}, trigger, "alice", agentbridge.Profile{}, []agentbridge.Event{trigger}, "")
	if got := RenderPrompt(p); strings.Contains(got, "party mode") {
		t.Errorf("a prompt outside party mode mentions it:\n%s", got)
	}
	p.Party = &PartyInfo{Round: 1, Selected: []string{"alice", "bob"}}
	got := RenderPrompt(p)
	if !strings.Contains(got, "party mode, round 1: the other agents (bob) answer") || strings.Contains(got, "[PASS]") {
		t.Errorf("round 1 prompt:\n%s", got)
	}
	p.Party.Round = 2
	p.ContextWindow = append(p.ContextWindow, answer)
	got = RenderPrompt(p)
	for _, want := range []string{"bob -> all: SQLite.", "round 2", "what the other agents (bob) said", "reply exactly [PASS]", "[USER QUESTION]:"} {
		if !strings.Contains(got, want) {
			t.Errorf("round 2 prompt lacks %q:\n%s", want, got)
		}
	}
}
