package status

import (
	"encoding/json"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestTriggerLine: the runs table shows every kind of trigger as one line
// of words, never a control's JSON.
func TestTriggerLine(t *testing.T) {
	msg := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	for _, c := range []struct {
		ev   agentbridge.Event
		want string
	}{
		{agentbridge.Event{Type: agentbridge.TypeMessage, Content: msg("look at\n  this   please")}, "look at this please"},
		{agentbridge.Event{Type: agentbridge.TypeControl, Content: json.RawMessage(`{"prod":["echo","sam"]}`)}, "prod echo, sam"},
		{agentbridge.Event{Type: agentbridge.TypeControl, Content: json.RawMessage(`{"scene":{"on":true,"actors":["maria","sam"],"setting":"a kitchen"}}`)}, "scene started with maria, sam"},
		{agentbridge.Event{Type: agentbridge.TypeControl, Content: json.RawMessage(`{"scene":{"on":false}}`)}, "scene closed"},
		{agentbridge.Event{Type: agentbridge.TypeControl, Content: msg(`{"prod":["echo"]}`)}, "prod echo"},
		{agentbridge.Event{Type: agentbridge.TypeControl, Content: json.RawMessage(`{"pause":{"on":true},"prod":["a"]}`)}, "pause control; prod a"},
		{agentbridge.Event{Type: agentbridge.TypeControl, Content: json.RawMessage(`[1]`)}, "a control"},
		{agentbridge.Event{Type: agentbridge.TypeSceneClosed, Content: msg("natural")}, "the scene closed (natural): journals"},
	} {
		if got := triggerLine(c.ev); got != c.want {
			t.Errorf("triggerLine(%s %s) = %q, want %q", c.ev.Type, c.ev.Content, got, c.want)
		}
	}
}
