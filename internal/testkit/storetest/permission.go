package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
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
	keyed := func(in agentbridge.EventInput, key string) (agentbridge.AppendResult, error) {
		return s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: in, IdempotencyKey: key})
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
	res, err := keyed(answer(asked.Event.ID, "reject"), "first")
	if err != nil || res.Event.Seq != head() {
		t.Fatalf("a right answer: %+v, %v", res, err)
	}
	if res.Ignored != nil {
		t.Errorf("the first answer is noted %+v", res.Ignored)
	}
	first := res.Event
	if res, err := appendTo("t", Control("codex", `{"permission":{"event":"`+asked.Event.ID+`","option":"allow"}}`)); err != nil ||
		res.Ignored == nil || res.Ignored.Code != agentbridge.IgnoredNotHuman {
		t.Errorf("an agent's answer: %+v, %v; want stored with ignored not_human", res, err)
	}
	// A second answer (another device) is stored, noted as already
	// answered, naming who answered first and when.
	res, err = keyed(answer(asked.Event.ID, "allow"), "second")
	want := "this permission request was already answered by user at " + first.TS + ": rejected (“Reject”), so this answer has no effect"
	if err != nil || res.Ignored == nil || res.Ignored.Code != agentbridge.IgnoredAlreadyAnswered || res.Ignored.Reason != want {
		t.Errorf("a second answer: %+v, %v; want ignored already_answered %q", res.Ignored, err, want)
	}
	// Their retries (the same keys) answer as the first tries did: the
	// second still noted, the first not.
	res, err = keyed(answer(asked.Event.ID, "allow"), "second")
	if err != nil || !res.Replayed || res.Ignored == nil || res.Ignored.Code != agentbridge.IgnoredAlreadyAnswered || res.Ignored.Reason != want {
		t.Errorf("the second answer replayed: %+v, %v; want a replay noted already_answered %q", res, err, want)
	}
	if res, err := keyed(answer(asked.Event.ID, "reject"), "first"); err != nil || !res.Replayed || res.Ignored != nil {
		t.Errorf("the first answer replayed: %+v, %v; want a replay without a note", res, err)
	}
	// The request of the other thread is answered once, then noted.
	if res, err := appendTo("u", answer(other.Event.ID, "allow")); err != nil || res.Ignored != nil {
		t.Errorf("the other thread's first answer: %+v, %v", res, err)
	}
}

// testQuestionAnswer: a human's first reply to a [USER QUESTION] is its
// answer; a second reply is stored and noted already_answered, naming the
// first; a reply to an ordinary message is not judged.
func testQuestionAnswer(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	NewThread(t, s, "t")
	ctx := context.Background()
	q := Msg("codex", "[USER QUESTION]: which port?")
	q.To = "user"
	q.Meta.Tags = []string{"coordinator", "question"}
	asked := MustAppend(t, s, "t", q)
	plain := MustAppend(t, s, "t", Msg("codex", "no question here"))
	reply := func(to agentbridge.Event, from string, key ...string) agentbridge.AppendResult {
		t.Helper()
		in := Msg(from, "8080")
		in.Meta.ReplyTo = to.ID
		res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: in, IdempotencyKey: strings.Join(key, "")})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := reply(plain, "user"); r.Ignored != nil {
		t.Errorf("a reply to an ordinary message: %+v", r.Ignored)
	}
	if r := reply(asked, "claude"); r.Ignored != nil {
		t.Errorf("an agent's reply to the question: %+v", r.Ignored)
	}
	first := reply(asked, "user")
	if first.Ignored != nil {
		t.Errorf("the first answer is noted %+v", first.Ignored)
	}
	second := reply(asked, "user", "second")
	if second.Ignored == nil || second.Ignored.Code != agentbridge.IgnoredAlreadyAnswered ||
		!strings.Contains(second.Ignored.Reason, "already answered by user at "+first.Event.TS) {
		t.Errorf("a second answer: %+v, want already_answered naming the first", second.Ignored)
	}
	if again := reply(asked, "user", "second"); !again.Replayed || again.Ignored == nil || *again.Ignored != *second.Ignored {
		t.Errorf("the second answer replayed: %+v, want a replay with the note %+v", again, second.Ignored)
	}
}
