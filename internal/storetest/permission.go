package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// testPermissionAnswer: a permission control is stored only when it answers
// a permission request of the thread with an option the request offers
// (contract 6.3, 6.6); anything else is invalid_control, and nothing is
// stored.
func testPermissionAnswer(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	NewThread(t, s, "t")
	NewThread(t, s, "u")
	ctx := context.Background()
	appendTo := func(thread string, in agentbridge.EventInput) (agentbridge.AppendResult, error) {
		return s.Append(ctx, agentbridge.AppendRequest{Thread: thread, Input: in})
	}
	req := Msg("bridge-coordinator", "claude asks to run mkdir demo")
	req.To = "user"
	req.Meta.Extra = map[string]json.RawMessage{agentbridge.MetaPermission: json.RawMessage(
		`{"invocation":1,"tool_call":{"title":"mkdir demo","kind":"execute"},"options":[{"id":"allow","name":"Allow","kind":"allow_once"},{"id":"reject","name":"Reject","kind":"reject_once"}]}`)}
	asked, err := appendTo("t", req)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := appendTo("t", Msg("user", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := appendTo("u", req)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(event, option string) agentbridge.EventInput {
		return Control("user", `{"permission":{"event":"`+event+`","option":"`+option+`"}}`)
	}
	head := func() int64 {
		evs, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "t", After: -1})
		if err != nil {
			t.Fatal(err)
		}
		return evs[len(evs)-1].Seq
	}
	for _, c := range []struct {
		name string
		in   agentbridge.EventInput
	}{
		{"an event that does not exist", answer("01JD0000000000000000000000", "allow")},
		{"a request of another thread", answer(other.Event.ID, "allow")},
		{"a message that is not a request", answer(plain.Event.ID, "allow")},
		{"an option the request does not offer", answer(asked.Event.ID, "allow_always")},
	} {
		before := head()
		_, err := appendTo("t", c.in)
		var ae *agentbridge.Error
		if !errors.As(err, &ae) || ae.Code != agentbridge.ECodeInvalidControl {
			t.Errorf("%s: err = %v, want invalid_control", c.name, err)
		}
		if head() != before {
			t.Errorf("%s: the refused answer was stored", c.name)
		}
	}
	res, err := appendTo("t", answer(asked.Event.ID, "reject"))
	if err != nil || res.Event.Seq != head() {
		t.Fatalf("a right answer: %+v, %v", res, err)
	}
	if res, err := appendTo("t", Control("codex", `{"permission":{"event":"`+asked.Event.ID+`","option":"allow"}}`)); err != nil ||
		res.Ignored == nil || res.Ignored.Code != agentbridge.IgnoredNotHuman {
		t.Errorf("an agent's answer: %+v, %v; want stored with ignored not_human", res, err)
	}
}
