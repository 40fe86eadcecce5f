package agentbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Questions with fields (contract 8.4): an ACP agent's elicitation
// request becomes a message of the coordinator to the person, tagged
// coordinator and question, whose meta.question lists the fields; a
// person answers with the control {"answer": {"event", "fields"}} (or
// "action": "decline"), which the bridge checks against those fields
// before it stores it, so the agent gets values of the types it asked for.

// MetaQuestion is the meta key of a question with fields: a QuestionMeta.
const MetaQuestion = "question"

// Field types of a question (those of ACP's elicitation schema).
const (
	FieldString  = "string"
	FieldNumber  = "number"
	FieldInteger = "integer"
	FieldBoolean = "boolean"
	// FieldArray is a multiple choice: a list of strings out of Enum.
	FieldArray = "array"
)

// Answer actions: a person accepts (with the fields' values) or declines.
const (
	AnswerAccept  = "accept"
	AnswerDecline = "decline"
)

// Limits of a question and of an answer.
const (
	// MaxQuestionFields bounds the fields of one question.
	MaxQuestionFields = 50
	// MaxFieldName bounds a field's name, in bytes.
	MaxFieldName = 128
)

// QuestionMeta is meta.question: what a client needs to show the form and
// answer it.
type QuestionMeta struct {
	// Invocation is the id of the run that asks.
	Invocation int64 `json:"invocation"`
	// Message is what the agent asks, in its words.
	Message string `json:"message"`
	// Title is the form's title, when the agent gave one.
	Title string `json:"title,omitempty"`
	// Fields are the form's fields, in the order to show them.
	Fields []QuestionField `json:"fields"`
	// ExpiresAt is when the question is withdrawn unanswered.
	ExpiresAt string `json:"expires_at,omitempty"`
}

// QuestionField is one field of a question.
type QuestionField struct {
	// Name is the key of the field's value in the answer.
	Name string `json:"name"`
	// Type is one of the Field* types.
	Type        string `json:"type"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	// Enum lists the values a string field (one of them) or an array
	// field (any of them) may take; EnumTitles, when set, their labels.
	Enum       []string `json:"enum,omitempty"`
	EnumTitles []string `json:"enum_titles,omitempty"`
	// Format is a string field's format as the agent named it (email,
	// uri, date, date-time): a hint for the form, not checked.
	Format    string   `json:"format,omitempty"`
	MinLength *int     `json:"min_length,omitempty"`
	MaxLength *int     `json:"max_length,omitempty"`
	Minimum   *float64 `json:"minimum,omitempty"`
	Maximum   *float64 `json:"maximum,omitempty"`
	MinItems  *int     `json:"min_items,omitempty"`
	MaxItems  *int     `json:"max_items,omitempty"`
	// Default is the agent's default value, to fill the form with.
	Default json.RawMessage `json:"default,omitempty"`
}

// AnswerControl is {"answer": {"event", "action", "fields"}}: a person's
// answer to the question posted as event. Action is AnswerAccept (the
// default) with Fields, the values by field name, or AnswerDecline
// without.
type AnswerControl struct {
	Event  string                     `json:"event"`
	Action string                     `json:"action"`
	Fields map[string]json.RawMessage `json:"fields,omitempty"`
}

func parseAnswer(c *Control, v json.RawMessage) error {
	var raw struct {
		Event  *string                     `json:"event"`
		Action *string                     `json:"action"`
		Fields *map[string]json.RawMessage `json:"fields"`
	}
	const shape = "An answer needs {\"event\": <the question's event id>, \"fields\": {<field>: <value>, …}}, or {\"event\": …, \"action\": \"decline\"}."
	if err := json.Unmarshal(v, &raw); err != nil || raw.Event == nil || !ThreadIDPattern.MatchString(*raw.Event) {
		return badControl("answer", shape)
	}
	a := AnswerControl{Event: *raw.Event, Action: AnswerAccept}
	if raw.Action != nil {
		a.Action = *raw.Action
	}
	switch a.Action {
	case AnswerAccept:
		if raw.Fields == nil || *raw.Fields == nil {
			return badControl("answer", shape)
		}
		a.Fields = *raw.Fields
	case AnswerDecline:
		if raw.Fields != nil && len(*raw.Fields) > 0 {
			return badControl("answer", "A declined answer carries no fields; leave \"fields\" out, or answer with \"action\": \"accept\".")
		}
	default:
		return badControl("answer", "An answer's action is \"accept\" or \"decline\", not %q.", Clip(a.Action, QuoteRunes))
	}
	if len(a.Fields) > MaxQuestionFields {
		return badControl("answer", "An answer holds at most %d fields.", MaxQuestionFields)
	}
	c.Answer = &a
	return nil
}

// IsFieldQuestion reports whether e is a question with fields: a message
// carrying meta.question, answered with the answer control.
func IsFieldQuestion(e Event) bool {
	_, ok := e.Meta.Extra[MetaQuestion]
	return e.Type == TypeMessage && ok
}

// QuestionOf decodes e's meta.question; ok is false when e carries none
// or it does not decode.
func QuestionOf(e Event) (QuestionMeta, bool) {
	raw, ok := e.Meta.Extra[MetaQuestion]
	if !ok || e.Type != TypeMessage {
		return QuestionMeta{}, false
	}
	var q QuestionMeta
	if json.Unmarshal(raw, &q) != nil {
		return QuestionMeta{}, false
	}
	return q, true
}

// CheckQuestionAnswer refuses an answer control that nothing could act on
// (contract 6.3): one naming an event that is not in the thread (found
// false), or not a question with fields, or whose values do not fit the
// question's fields (CheckAnswerFields). e is the event it names.
func CheckQuestionAnswer(c AnswerControl, e Event, found bool) error {
	if !found {
		return badControl("answer", "The answer names event %q, which is not in this thread; give the id of the question message.", Clip(c.Event, QuoteRunes))
	}
	q, ok := QuestionOf(e)
	if !ok {
		return badControl("answer", "Event %q is not a question with fields, so there is nothing to answer with this control; reply to it with a message instead.", c.Event)
	}
	if c.Action == AnswerDecline {
		return nil
	}
	return CheckAnswerFields(q.Fields, c.Fields)
}

// CheckAnswerFields checks values against fields: every value names a
// field and has its type (and is one of its enum, within its bounds), and
// every required field has a value. The error is invalid_control on
// content.answer.fields.<name>, a sentence naming the field.
func CheckAnswerFields(fields []QuestionField, values map[string]json.RawMessage) error {
	names := make([]string, 0, len(fields))
	for _, f := range fields {
		names = append(names, f.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if !slices.Contains(names, name) {
			return fieldError(name, "The question has no field %q; its fields are %s.", Clip(name, QuoteRunes), quoteList(names))
		}
	}
	for _, f := range fields {
		v, ok := values[f.Name]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			if f.Required {
				return fieldError(f.Name, "The field %q is required: give it a value.", f.Name)
			}
			continue
		}
		if msg := checkFieldValue(f, v); msg != "" {
			return fieldError(f.Name, "The field %q %s.", f.Name, msg)
		}
	}
	return nil
}

func fieldError(name, msg string, args ...any) error {
	return FieldErrorf(ECodeInvalidControl, "content.answer.fields."+Clip(name, MaxFieldName), msg, args...)
}

// checkFieldValue is what is wrong with v as f's value ("" when nothing),
// as the end of a sentence that starts with the field's name.
func checkFieldValue(f QuestionField, v json.RawMessage) string {
	switch f.Type {
	case FieldString:
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "needs text (a JSON string)"
		}
		if len(f.Enum) > 0 && !slices.Contains(f.Enum, s) {
			return fmt.Sprintf("must be one of %s, not %q", quoteList(f.Enum), Clip(s, QuoteRunes))
		}
		n := utf8.RuneCountInString(s)
		if f.MinLength != nil && n < *f.MinLength {
			return fmt.Sprintf("needs at least %d characters", *f.MinLength)
		}
		if f.MaxLength != nil && n > *f.MaxLength {
			return fmt.Sprintf("takes at most %d characters", *f.MaxLength)
		}
	case FieldNumber, FieldInteger:
		return checkNumber(f, v)
	case FieldBoolean:
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return "needs true or false"
		}
	case FieldArray:
		var list []string
		if json.Unmarshal(v, &list) != nil {
			return "needs a list of choices (a JSON array of strings)"
		}
		for i, s := range list {
			if len(f.Enum) > 0 && !slices.Contains(f.Enum, s) {
				return fmt.Sprintf("takes choices out of %s, not %q", quoteList(f.Enum), Clip(s, QuoteRunes))
			}
			if slices.Contains(list[:i], s) {
				return fmt.Sprintf("has %q twice", Clip(s, QuoteRunes))
			}
		}
		if f.MinItems != nil && len(list) < *f.MinItems {
			return fmt.Sprintf("needs at least %d choices", *f.MinItems)
		}
		if f.MaxItems != nil && len(list) > *f.MaxItems {
			return fmt.Sprintf("takes at most %d choices", *f.MaxItems)
		}
	default:
		return fmt.Sprintf("has the type %q, which no answer can fill", Clip(f.Type, QuoteRunes))
	}
	return ""
}

// checkNumber checks a number or integer field's value.
func checkNumber(f QuestionField, v json.RawMessage) string {
	want := "a number"
	if f.Type == FieldInteger {
		want = "a whole number"
	}
	var n json.Number
	if json.Unmarshal(v, &n) != nil || !isJSONNumber(v) {
		return "needs " + want
	}
	x, err := n.Float64()
	if err != nil || math.IsInf(x, 0) {
		return "needs " + want + " of a usable size"
	}
	if f.Type == FieldInteger {
		if _, err := strconv.ParseInt(n.String(), 10, 64); err != nil {
			return "needs " + want
		}
	}
	if f.Minimum != nil && x < *f.Minimum {
		return "must be at least " + strconv.FormatFloat(*f.Minimum, 'g', -1, 64)
	}
	if f.Maximum != nil && x > *f.Maximum {
		return "must be at most " + strconv.FormatFloat(*f.Maximum, 'g', -1, 64)
	}
	return ""
}

// isJSONNumber reports whether v is a JSON number literal: json.Number
// also takes a string holding one.
func isJSONNumber(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

// FieldTypeWord is how a field's type reads in a sentence for a person.
func FieldTypeWord(f QuestionField) string {
	switch {
	case f.Type == FieldString && len(f.Enum) > 0:
		return "one of " + strings.Join(f.Enum, ", ")
	case f.Type == FieldArray && len(f.Enum) > 0:
		return "any of " + strings.Join(f.Enum, ", ")
	case f.Type == FieldString:
		return "text"
	case f.Type == FieldInteger:
		return "a whole number"
	case f.Type == FieldNumber:
		return "a number"
	case f.Type == FieldBoolean:
		return "true or false"
	}
	return f.Type
}
