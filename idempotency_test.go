package agentbridge

import (
	"encoding/json"
	"testing"
)

func TestCheckReplay(t *testing.T) {
	t.Parallel()
	hop := 3
	stored := Event{Thread: "t", Type: TypeMessage, From: "codex", To: ToAll, Content: json.RawMessage(`"reply"`),
		Meta: Meta{ReplyTo: "E1", Tags: []string{"coordinator"}, Via: "c", Hop: &hop, Extra: map[string]json.RawMessage{"participant": json.RawMessage(`"codex"`)}}}
	same := EventInput{Type: TypeMessage, From: "codex", To: ToAll, Content: json.RawMessage(`"reply"`),
		Meta: Meta{ReplyTo: "E1", Tags: []string{"coordinator"}, Via: "c", Extra: map[string]json.RawMessage{"participant": json.RawMessage(`"codex"`)}}}
	for _, tc := range []struct {
		name     string
		change   func(*EventInput)
		conflict bool
	}{
		{"the same append", func(*EventInput) {}, false},
		{"another sender", func(in *EventInput) { in.From = "mallory" }, true},
		{"another type", func(in *EventInput) { in.Type = "custom.x" }, true},
		{"another recipient", func(in *EventInput) { in.To = "user" }, true},
		{"other content", func(in *EventInput) { in.Content = json.RawMessage(`"forged"`) }, true},
		{"content spaced otherwise", func(in *EventInput) { in.Content = json.RawMessage(`"reply" `) }, false},
		{"another reply_to", func(in *EventInput) { in.Meta.ReplyTo = "E2" }, true},
		{"other tags", func(in *EventInput) { in.Meta.Tags = nil }, true},
		{"another via", func(in *EventInput) { in.Meta.Via = "" }, true},
		{"another extra value", func(in *EventInput) {
			in.Meta.Extra = map[string]json.RawMessage{"participant": json.RawMessage(`"x"`)}
		}, true},
		{"an extra key less", func(in *EventInput) { in.Meta.Extra = nil }, true},
	} {
		in := same
		tc.change(&in)
		err := CheckReplay("t", "k", stored, in)
		if (err != nil) != tc.conflict || (err != nil && ErrorCode(err) != ECodeIdempotencyConflict) {
			t.Errorf("%s: %v, want conflict %v", tc.name, err, tc.conflict)
		}
	}
}
