package agentbridge

import (
	"encoding/json"
	"strings"
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
	// With the request's options at hand, the note says what the first
	// answer decided.
	req.Meta.Extra = map[string]json.RawMessage{MetaPermission: json.RawMessage(
		`{"options":[{"id":"allow","name":"Allow once","kind":"allow_once"},{"id":"reject","name":"Reject","kind":"reject_once"},{"id":"odd","name":"Ask me later","kind":"other"}]}`)}
	for option, want := range map[string]string{
		"reject":  ": rejected (“Reject”),",
		"allow":   ": allowed once (“Allow once”),",
		"odd":     ": “Ask me later” chosen,",
		"missing": "Z, so",
	} {
		first := Event{Type: TypeControl, From: "user", TS: "2026-11-28T00:00:00.000000Z",
			Content: json.RawMessage(`{"permission":{"event":"R1","option":"` + option + `"}}`)}
		n := AlreadyAnswered(req, first)
		if !strings.Contains(n.Reason, want) {
			t.Errorf("the note after a first answer %q = %q, want it to contain %q", option, n.Reason, want)
		}
	}
}
