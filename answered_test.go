package agentbridge

import (
	"encoding/json"
	"testing"
)

func TestAnswers(t *testing.T) {
	t.Parallel()
	req := Event{ID: "R1", Type: TypeMessage, From: "bridge-coordinator"}
	q := Event{ID: "Q1", Type: TypeMessage, From: "codex", Meta: Meta{Tags: []string{"coordinator", "question"}}}
	permit := func(from, event string) Event {
		return Event{Type: TypeControl, From: from, Content: json.RawMessage(`{"permission":{"event":"` + event + `","option":"allow"}}`)}
	}
	reply := func(from, to string) Event { return Event{Type: TypeMessage, From: from, Meta: Meta{ReplyTo: to}} }
	for _, tc := range []struct {
		name   string
		e, to  Event
		answer bool
	}{
		{"a human's permission answer", permit("user", "R1"), req, true},
		{"an agent's permission answer", permit("codex", "R1"), req, false},
		{"an answer to another request", permit("user", "R2"), req, false},
		{"a human's reply to a question", reply("user", "Q1"), q, true},
		{"an agent's reply to a question", reply("claude", "Q1"), q, false},
		{"a human's reply to a message", reply("user", "R1"), req, false},
		{"a control with a string content", Event{Type: TypeControl, From: "user", Content: json.RawMessage(`"{\"permission\":{\"event\":\"R1\",\"option\":\"a\"}}"`)}, req, true},
	} {
		if got := Answers(tc.e, tc.to, DefaultHumans); got != tc.answer {
			t.Errorf("%s: Answers = %v", tc.name, got)
		}
	}
	n := AlreadyAnswered(req, Event{From: "user", TS: "2026-11-28T00:00:00.000000Z"})
	if n.Code != IgnoredAlreadyAnswered || n.Reason != "this permission request was already answered by user at 2026-11-28T00:00:00.000000Z, so this answer has no effect" {
		t.Errorf("note = %+v", n)
	}
}
