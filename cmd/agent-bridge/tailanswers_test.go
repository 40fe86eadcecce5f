package main

import (
	"encoding/json"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestTailAnswerNotes: of two answers to a permission request that tail
// printed, the second is marked as without effect, with what the first
// decided; an answer to a request tail did not print, other controls and
// messages get no note.
func TestTailAnswerNotes(t *testing.T) {
	req := agentbridge.Event{ID: "R1", Type: agentbridge.TypeMessage, From: "bridge-coordinator", To: "user",
		Meta: agentbridge.Meta{Tags: []string{"coordinator", "permission"}, Extra: map[string]json.RawMessage{agentbridge.MetaPermission: json.RawMessage(
			`{"invocation":"1","options":[{"id":"allow","name":"Allow once","kind":"allow_once"},{"id":"reject","name":"Reject","kind":"reject_once"}]}`)}}}
	answer := func(from, event, option string) agentbridge.Event {
		c, _ := json.Marshal(map[string]any{"permission": map[string]string{"event": event, "option": option}})
		return agentbridge.Event{Type: agentbridge.TypeControl, From: from, To: "all", Content: c}
	}
	pause := agentbridge.Event{Type: agentbridge.TypeControl, From: "user", To: "all", Content: json.RawMessage(`{"pause":true}`)}
	var a answerNotes
	for i, c := range []struct {
		e    agentbridge.Event
		want string
	}{
		{answer("user", "R0", "allow"), ""}, // a request tail never printed
		{req, ""},
		{pause, ""},
		{answer("user", "R1", "reject"), ""},
		{answer("ada", "R1", "allow"), " — no effect: already answered by user: rejected (“Reject”)"},
		{answer("user", "R1", "allow"), " — no effect: already answered by user: rejected (“Reject”)"},
		{answer("user", "R0", "reject"), ""},
	} {
		if got := a.note(c.e); got != c.want {
			t.Errorf("event %d: note %q, want %q", i, got, c.want)
		}
	}
}
