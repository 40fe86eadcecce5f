package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"

	"github.com/spf13/cobra"
)

// answerCommand answers an ACP agent's question with fields (docs/acp.md,
// "Questions with fields"): it posts the control {"answer": {"event",
// "fields"}} (or "action": "decline") naming the question message. Each
// FIELD=VALUE is typed by the question's field (a whole number, a number,
// true or false, text; a multiple choice takes one FIELD=VALUE per
// choice); a value that does not read as its type is sent as text, and the
// bridge's sentence naming the field says what is wrong. As with permit, an
// answer that counts for nothing exits 1.
func (m *Main) answerCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who answers (only a human's answer counts)")
	decline := fs.Bool("decline", false, "decline the question instead of answering it")
	return func(ctx context.Context, pos []string) error {
		if len(pos) < 2 {
			return usagef("answer: give THREAD, the question's EVENT (its id, or its seq as tail shows it) and FIELD=VALUE for each field, or --decline")
		}
		if *decline && len(pos) > 2 {
			return usagef("answer --decline takes no FIELD=VALUE: a declined question gets no values")
		}
		cl, err := m.newClient(cf)
		if err != nil {
			return err
		}
		event, q, err := m.questionArg(ctx, cl, pos[0], pos[1])
		if err != nil {
			return explain(err, cf.url)
		}
		answer := map[string]any{"event": event, "action": agentbridge.AnswerDecline}
		if !*decline {
			fields, err := answerFields(q.Fields, pos[2:])
			if err != nil {
				return err
			}
			answer = map[string]any{"event": event, "fields": fields}
		}
		return m.postAnswer(ctx, cf, pos[0], *from, "answer", answer)
	}
}

// postAnswer posts a person's answer, the control {key: value}, as from
// and prints it; an answer the bridge stored as changing nothing (another
// answered first) exits 1 after the bridge's sentence, so a script can
// tell its decision was not the one acted on.
func (m *Main) postAnswer(ctx context.Context, cf *clientFlags, thread, from, key string, value any) error {
	content, err := json.Marshal(map[string]any{key: value})
	if err != nil {
		return fmt.Errorf("encode control: %w", err)
	}
	in := agentbridge.EventInput{Type: agentbridge.TypeControl, From: from, Content: content}
	ignored, err := m.appendPrinted(ctx, cf, thread, in, "")
	if err != nil {
		return err
	}
	if ignored != nil {
		return &exitError{code: 1}
	}
	return nil
}

// questionArg returns the id of the event arg names in thread (its id, or
// its seq) and its question, empty when the event is not found or is no
// question with fields (the bridge then says so).
func (m *Main) questionArg(ctx context.Context, cl *client.Client, thread, arg string) (string, agentbridge.QuestionMeta, error) {
	q := agentbridge.ThreadEventsQuery{Thread: thread, After: -1, Tail: agentbridge.MaxEventsLimit}
	seq, err := strconv.ParseInt(arg, 10, 64)
	bySeq := err == nil && seq >= 1
	if bySeq {
		q = agentbridge.ThreadEventsQuery{Thread: thread, After: seq - 1, Limit: 1}
	}
	// Else the question is looked for among the latest events: it waits
	// for its answer.
	evs, err := cl.ThreadEvents(ctx, q)
	switch {
	case agentbridge.ErrorCode(err) == agentbridge.ECodeCursorAhead || err == nil && bySeq && len(evs) == 0:
		return "", agentbridge.QuestionMeta{}, usagef("thread %s has no event %s", thread, arg)
	case err != nil:
		return "", agentbridge.QuestionMeta{}, fmt.Errorf("read the question %s of %s: %w", arg, thread, err)
	}
	for _, e := range evs {
		if bySeq || e.ID == arg {
			question, _ := agentbridge.QuestionOf(e)
			return e.ID, question, nil
		}
	}
	return arg, agentbridge.QuestionMeta{}, nil
}

// answerFields reads FIELD=VALUE arguments into the answer's values, each
// typed by its field.
func answerFields(fields []agentbridge.QuestionField, args []string) (map[string]any, error) {
	out := map[string]any{}
	for _, arg := range args {
		name, value, ok := strings.Cut(arg, "=")
		if !ok || name == "" {
			return nil, usagef("answer: %q is not FIELD=VALUE", arg)
		}
		var field *agentbridge.QuestionField
		for i := range fields {
			if fields[i].Name == name {
				field = &fields[i]
			}
		}
		if field != nil && field.Type == agentbridge.FieldArray {
			list, _ := out[name].([]string)
			out[name] = append(list, value)
			continue
		}
		if _, twice := out[name]; twice {
			return nil, usagef("answer: the field %q is given twice", name)
		}
		out[name] = typedValue(field, value)
	}
	return out, nil
}

// typedValue is value as field's type takes it, or the text itself when it
// does not read as that type (or the field is unknown).
func typedValue(field *agentbridge.QuestionField, value string) any {
	if field == nil {
		return value
	}
	switch field.Type {
	case agentbridge.FieldInteger:
		if n, err := strconv.ParseInt(value, 10, 64); err == nil {
			return n
		}
	case agentbridge.FieldNumber:
		if x, err := strconv.ParseFloat(value, 64); err == nil {
			return x
		}
	case agentbridge.FieldBoolean:
		if b, err := strconv.ParseBool(value); err == nil {
			return b
		}
	}
	return value
}
