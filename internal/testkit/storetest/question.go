package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// fieldQuestion is meta.question of a question with a required text field
// and an optional choice, as the coordinator posts an ACP elicitation.
const fieldQuestion = `{"invocation":1,"message":"Which branch?","fields":[` +
	`{"name":"branch","type":"string","required":true},` +
	`{"name":"size","type":"string","enum":["s","m","l"]},` +
	`{"name":"count","type":"integer","minimum":1}]}`

// testFieldQuestionAnswer: an answer control is stored only when it
// answers a question with fields of the thread with values that fit them
// (type, enum, bounds, required), else invalid_control naming the field
// and nothing stored; a decline needs no values; a second answer is
// stored and noted already_answered, as for a permission request; a reply
// message to such a question is not its answer.
func testFieldQuestionAnswer(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	NewThread(t, s, "t")
	ctx := context.Background()
	q := Msg("bridge-coordinator", "claude asks: Which branch?")
	q.To = "user"
	q.Meta.Tags = []string{"coordinator", "question"}
	q.Meta.Extra = map[string]json.RawMessage{agentbridge.MetaQuestion: json.RawMessage(fieldQuestion)}
	asked := MustAppend(t, s, "t", q)
	declined := MustAppend(t, s, "t", q)
	plain := MustAppend(t, s, "t", Msg("user", "hello"))
	head := func() int64 {
		evs, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "t", After: -1})
		if err != nil {
			t.Fatal(err)
		}
		return evs[len(evs)-1].Seq
	}
	answer := func(event, fields string) agentbridge.EventInput {
		return Control("user", `{"answer":{"event":"`+event+`","fields":`+fields+`}}`)
	}
	for _, c := range []struct {
		name, field, says string
		in                agentbridge.EventInput
	}{
		{"an event that does not exist", "content.answer", "not in this thread", answer("01JD0000000000000000000000", `{"branch":"x"}`)},
		{"a message that is not a question", "content.answer", "not a question with fields", answer(plain.ID, `{"branch":"x"}`)},
		{"a required field left out", "content.answer.fields.branch", `The field "branch" is required`, answer(asked.ID, `{"size":"s"}`)},
		{"a number for text", "content.answer.fields.branch", `The field "branch" needs text`, answer(asked.ID, `{"branch":7}`)},
		{"a value out of the enum", "content.answer.fields.size", `The field "size" must be one of "s", "m", "l", not "xl"`, answer(asked.ID, `{"branch":"x","size":"xl"}`)},
		{"a fraction for a whole number", "content.answer.fields.count", `The field "count" needs a whole number`, answer(asked.ID, `{"branch":"x","count":1.5}`)},
		{"a number below the minimum", "content.answer.fields.count", `The field "count" must be at least 1`, answer(asked.ID, `{"branch":"x","count":0}`)},
		{"a field the question lacks", "content.answer.fields.colour", `The question has no field "colour"`, answer(asked.ID, `{"branch":"x","colour":"red"}`)},
	} {
		before := head()
		_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: c.in})
		var ae *agentbridge.Error
		if !errors.As(err, &ae) || ae.Code != agentbridge.ECodeInvalidControl || ae.Field != c.field || !strings.Contains(ae.Message, c.says) {
			t.Errorf("%s: err = %v (field %q), want invalid_control on %s saying %q", c.name, err, fieldOf(ae), c.field, c.says)
		}
		if head() != before {
			t.Errorf("%s: the refused answer was stored", c.name)
		}
	}
	// A reply message is not the answer: the answer after it is the first.
	reply := Msg("user", "main, I think")
	reply.Meta.ReplyTo = asked.ID
	if res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: reply}); err != nil || res.Ignored != nil {
		t.Errorf("a reply to the question: %+v, %v", res, err)
	}
	first, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: answer(asked.ID, `{"branch":"main","size":"m","count":2}`)})
	if err != nil || first.Ignored != nil {
		t.Fatalf("a right answer: %+v, %v", first, err)
	}
	second, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: answer(asked.ID, `{"branch":"dev"}`), IdempotencyKey: "second"})
	want := "this question was already answered by user at " + first.Event.TS + ", so this answer has no effect"
	if err != nil || second.Ignored == nil || second.Ignored.Code != agentbridge.IgnoredAlreadyAnswered || second.Ignored.Reason != want {
		t.Errorf("a second answer: %+v, %v; want already_answered %q", second.Ignored, err, want)
	}
	again, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: answer(asked.ID, `{"branch":"dev"}`), IdempotencyKey: "second"})
	if err != nil || !again.Replayed || again.Ignored == nil || again.Ignored.Reason != want {
		t.Errorf("the second answer replayed: %+v, %v", again, err)
	}
	// A decline carries no values; an agent's answer counts for nothing.
	if res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: Control("codex", `{"answer":{"event":"`+declined.ID+`","action":"decline"}}`)}); err != nil ||
		res.Ignored == nil || res.Ignored.Code != agentbridge.IgnoredNotHuman {
		t.Errorf("an agent's decline: %+v, %v; want ignored not_human", res, err)
	}
	if res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: Control("user", `{"answer":{"event":"`+declined.ID+`","action":"decline"}}`)}); err != nil || res.Ignored != nil {
		t.Errorf("a person's decline: %+v, %v", res, err)
	}
}

func fieldOf(e *agentbridge.Error) string {
	if e == nil {
		return ""
	}
	return e.Field
}
