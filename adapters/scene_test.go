package adapters

import (
	"encoding/json"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestRenderScenePrompt: a scene payload renders in seed 000's order, with
// the speeches so far, and the instruction last.
func TestRenderScenePrompt(t *testing.T) {
	meta := agentbridge.Meta{Extra: map[string]json.RawMessage{agentbridge.MetaScene: json.RawMessage(`{"turn":1}`)}}
	first := agentbridge.Event{ID: "e1", Type: agentbridge.TypeMessage, From: "sam", To: "maria", Content: json.RawMessage(`"*[knocks]* Hello?"`), Meta: meta}
	p := NewPayload("http://b", agentbridge.Thread{ID: "t", Name: "kitchen"}, first, "maria", agentbridge.Profile{Client: "c", Model: "m"},
		[]agentbridge.Event{first}, "ACTOR PROMPT")
	p.Scene = &ScenePayload{Actor: "maria", Character: "CHARACTER SHEET", Journal: "", Brief: "BRIEF TEXT", Setting: "SETTING TEXT",
		Turn: 2, Nudge: agentbridge.SoftCapPrompt, Step: agentbridge.SceneStepTurn, With: []string{"sam"}}
	out := RenderPrompt(p)
	order := []string{"ACTOR PROMPT", "## Your character", "CHARACTER SHEET", "## Your journal", "first scene",
		"## The scene — your perspective", "SETTING TEXT", "BRIEF TEXT", "## Instruction", "sam, speaking to you", "You sense the natural end", "<thinking>"}
	at := 0
	for _, s := range order {
		i := strings.Index(out[at:], s)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", s, out)
		}
		at += i + len(s)
	}
	p.Scene.Step, p.Scene.Nudge = agentbridge.SceneStepJournal, agentbridge.JournalPrompt
	if out := RenderPrompt(p); !strings.Contains(out, "The scene has ended.") || strings.Contains(out, "<speech>") {
		t.Errorf("journal step prompt:\n%s", out)
	}
}
