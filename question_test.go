package agentbridge

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func intp(n int) *int           { return &n }
func floatp(x float64) *float64 { return &x }

// questionFields is a form with one field of each type.
var questionFields = []QuestionField{
	{Name: "branch", Type: FieldString, Required: true, MinLength: intp(2), MaxLength: intp(8)},
	{Name: "size", Type: FieldString, Enum: []string{"s", "m", "l"}},
	{Name: "count", Type: FieldInteger, Minimum: floatp(1), Maximum: floatp(10)},
	{Name: "ratio", Type: FieldNumber},
	{Name: "force", Type: FieldBoolean},
	{Name: "tags", Type: FieldArray, Enum: []string{"a", "b", "c"}, MaxItems: intp(2)},
}

// TestCheckAnswerFields: values fit the fields or are refused with a
// sentence that names the field, on content.answer.fields.<name>.
func TestCheckAnswerFields(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		values string
		field  string // "" when accepted
		says   string
	}{
		{`{"branch":"main"}`, "", ""},
		{`{"branch":"main","size":"m","count":3,"ratio":0.5,"force":true,"tags":["a","c"]}`, "", ""},
		{`{"branch":"main","size":null}`, "", ""},
		{`{}`, "branch", `The field "branch" is required: give it a value.`},
		{`{"branch":null}`, "branch", `The field "branch" is required`},
		{`{"branch":"x"}`, "branch", `The field "branch" needs at least 2 characters.`},
		{`{"branch":"very-long-name"}`, "branch", `The field "branch" takes at most 8 characters.`},
		{`{"branch":["main"]}`, "branch", `The field "branch" needs text (a JSON string).`},
		{`{"branch":"main","size":"xl"}`, "size", `The field "size" must be one of "s", "m", "l", not "xl".`},
		{`{"branch":"main","count":"3"}`, "count", `The field "count" needs a whole number.`},
		{`{"branch":"main","count":2.5}`, "count", `The field "count" needs a whole number.`},
		{`{"branch":"main","count":11}`, "count", `The field "count" must be at most 10.`},
		{`{"branch":"main","count":0}`, "count", `The field "count" must be at least 1.`},
		{`{"branch":"main","ratio":"half"}`, "ratio", `The field "ratio" needs a number.`},
		{`{"branch":"main","force":"yes"}`, "force", `The field "force" needs true or false.`},
		{`{"branch":"main","tags":"a"}`, "tags", `The field "tags" needs a list of choices`},
		{`{"branch":"main","tags":["a","d"]}`, "tags", `The field "tags" takes choices out of "a", "b", "c", not "d".`},
		{`{"branch":"main","tags":["a","a"]}`, "tags", `The field "tags" has "a" twice.`},
		{`{"branch":"main","tags":["a","b","c"]}`, "tags", `The field "tags" takes at most 2 choices.`},
		{`{"branch":"main","colour":"red"}`, "colour", `The question has no field "colour"; its fields are "branch", "size", "count", "ratio", "force", "tags".`},
	} {
		var values map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.values), &values); err != nil {
			t.Fatal(err)
		}
		err := CheckAnswerFields(questionFields, values)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want accepted", c.values, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != ECodeInvalidControl || e.Field != "content.answer.fields."+c.field || !strings.HasPrefix(e.Message, c.says) || !isSentence(e.Message) {
			t.Errorf("%s: %v, want invalid_control on content.answer.fields.%s: %q", c.values, err, c.field, c.says)
		}
	}
}

// TestParseAnswerControl: an answer accepts with fields or declines
// without; anything else is invalid_control on content.answer.
func TestParseAnswerControl(t *testing.T) {
	t.Parallel()
	got, err := ParseControl(json.RawMessage(`{"answer":{"event":"01JD3Q6Y7M8K9N0P1Q2R3S4T5V","action":"decline"}}`))
	if err != nil || !reflect.DeepEqual(got, Control{Answer: &AnswerControl{Event: "01JD3Q6Y7M8K9N0P1Q2R3S4T5V", Action: AnswerDecline}}) {
		t.Errorf("a decline: %+v, %v", got.Answer, err)
	}
	for _, bad := range []string{
		`{"answer":{}}`,
		`{"answer":{"event":"01JD"}}`,
		`{"answer":{"event":"a b","fields":{}}}`,
		`{"answer":{"event":"01JD","fields":null}}`,
		`{"answer":{"event":"01JD","fields":[]}}`,
		`{"answer":{"event":"01JD","action":"decline","fields":{"a":1}}}`,
		`{"answer":{"event":"01JD","action":"maybe","fields":{}}}`,
		`{"answer":"yes"}`,
	} {
		_, err := ParseControl(json.RawMessage(bad))
		var e *Error
		if !errors.As(err, &e) || e.Code != ECodeInvalidControl || e.Field != "content.answer" || !isSentence(e.Message) {
			t.Errorf("%s: err = %v, want invalid_control on content.answer", bad, err)
		}
	}
}

// TestFieldQuestionIsNoUserQuestion: a question with fields is answered by
// the answer control, so a reply to it is not its answer, and its second
// answer's note speaks of an answer, not of a reply.
func TestFieldQuestionIsNoUserQuestion(t *testing.T) {
	t.Parallel()
	q := Event{ID: "Q", Type: TypeMessage, Meta: Meta{Tags: []string{"coordinator", "question"},
		Extra: map[string]json.RawMessage{MetaQuestion: json.RawMessage(`{"invocation":1,"message":"?","fields":[]}`)}}}
	if IsQuestion(q) || !IsFieldQuestion(q) {
		t.Fatalf("IsQuestion %v, IsFieldQuestion %v", IsQuestion(q), IsFieldQuestion(q))
	}
	reply := Event{Type: TypeMessage, From: "user", Meta: Meta{ReplyTo: "Q"}}
	answer := Event{Type: TypeControl, From: "user", Content: json.RawMessage(`{"answer":{"event":"Q","action":"decline"}}`)}
	humans := Humans{"user"}
	if Answers(reply, q, humans) || !Answers(answer, q, humans) {
		t.Errorf("Answers(reply) %v, Answers(answer) %v", Answers(reply, q, humans), Answers(answer, q, humans))
	}
	if got := AlreadyAnswered(q, Event{From: "ada", TS: "T"}).Reason; got != "this question was already answered by ada at T, so this answer has no effect" {
		t.Errorf("note = %q", got)
	}
}

// FuzzAnswerControl: any answer content either parses, and then its fields
// are checked against a form without panicking, or is refused with
// invalid_control.
func FuzzAnswerControl(f *testing.F) {
	for _, s := range []string{
		`{"event":"01JD3Q6Y7M8K9N0P1Q2R3S4T5V","fields":{"branch":"main","count":3}}`,
		`{"event":"01JD3Q6Y7M8K9N0P1Q2R3S4T5V","action":"decline"}`,
		`{"event":"01JD3Q6Y7M8K9N0P1Q2R3S4T5V","fields":{"count":1e400,"tags":["a","a"],"ratio":-0}}`,
		`{"event":"x","fields":{"force":"true"}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		c, err := ParseControl(json.RawMessage(`{"answer":` + v + `}`))
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != ECodeInvalidControl {
				t.Fatalf("%s: %v", v, err)
			}
			return
		}
		if c.Answer == nil {
			t.Fatalf("%s parsed without an answer", v)
		}
		if err := CheckAnswerFields(questionFields, c.Answer.Fields); err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != ECodeInvalidControl || !strings.HasPrefix(e.Field, "content.answer.fields.") {
				t.Fatalf("%s: %v", v, err)
			}
		}
	})
}
