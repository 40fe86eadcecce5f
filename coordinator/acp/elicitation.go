package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// Questions with fields (contract 8.4): an agent's elicitation/create in
// form mode becomes a message of the coordinator to the human who started
// the chain, tagged coordinator and question, with meta.question listing
// the fields (agentbridge.QuestionMeta); the person's answer control
// (checked by the bridge against the fields) goes back as the accept or
// decline; no answer within permission_timeout_s, or a turn that stops
// first, answers cancel and says so in the thread. The SDK (v0.13.0) has
// the method among its unstable types: the client offers form elicitation
// in initialize and implements UnstableCreateElicitation, which its
// connection calls.

// elicitationCapabilities is what the client offers: forms, not URLs (the
// person may be on a phone, and the bridge cannot tell when a page
// elsewhere is done).
func elicitationCapabilities() *sdk.ElicitationCapabilities {
	return &sdk.ElicitationCapabilities{Form: &sdk.ElicitationFormCapabilities{}}
}

// UnstableCreateElicitation asks the person in the thread (elicitation.go).
func (cl *agentClient) UnstableCreateElicitation(ctx context.Context, req sdk.UnstableCreateElicitationRequest) (sdk.UnstableCreateElicitationResponse, error) {
	if req.Form == nil {
		return sdk.UnstableCreateElicitationResponse{}, sdk.NewInvalidParams(map[string]any{"error": "this client offers form elicitation only, not url"})
	}
	// The SDK's form type does not keep the request's session id; an
	// agent process has one session, and one turn at a time.
	t := cl.a.running()
	if t == nil || !t.beginAsk() {
		return elicitationCancelled(), nil
	}
	defer t.asks.Done()
	q, err := questionOf(*req.Form, t.run.Invocation.ID)
	if err != nil {
		return sdk.UnstableCreateElicitationResponse{}, sdk.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	return t.pool.ask(ctx, t, q), nil
}

// running is the agent's turn, or nil between turns.
func (a *agent) running() *turn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.turn
}

func elicitationCancelled() sdk.UnstableCreateElicitationResponse {
	return sdk.UnstableCreateElicitationResponse{Cancel: &sdk.UnstableCreateElicitationCancel{Action: "cancel"}}
}

// ask posts q to the person and waits for the answer.
func (p *Pool) ask(ctx context.Context, t *turn, q agentbridge.QuestionMeta) sdk.UnstableCreateElicitationResponse {
	cfg := p.cfg()
	inv := t.run.Invocation
	record := func(status string, detail map[string]any) {
		t.progress(adapters.ProgressRecord{Status: oneLineStatus(status), Kind: "question", Detail: jsonOf(detail)})
	}
	to := p.host.Recipient(ctx, inv.Thread, t.run.Trigger, t.run.Known)
	q.ExpiresAt = agentbridge.FormatTime(time.Now().Add(cfg.PermissionTimeout))
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.stopped:
			cancel()
		case <-pctx.Done():
		}
	}()
	n := t.nextQuestion()
	ev, err := p.host.Post(pctx, inv, questionPost(cfg, inv, q, to), inv.TriggerID, fmt.Sprintf("question:%s:%d:%d", inv.Participant, inv.ID, n))
	if err != nil {
		record("question not posted: "+q.Message, map[string]any{"answer": "cancel", "error": err.Error()})
		return elicitationCancelled()
	}
	record("waiting for an answer: "+q.Message, map[string]any{"event": ev.ID, "to": to})
	fits := func(a personAnswer) bool {
		return a.action == agentbridge.AnswerDecline || a.action == agentbridge.AnswerAccept && agentbridge.CheckAnswerFields(q.Fields, a.fields) == nil
	}
	t.clock.pause()
	a, by := p.await(pctx, ev.ID, &waiting{question: true, fits: fits}, cfg.PermissionTimeout)
	t.clock.resume()
	switch by {
	case "timeout":
		record("no answer to the question: "+q.Message, map[string]any{"event": ev.ID, "answer": "cancel", "by": "timeout"})
		p.closeRequest(context.WithoutCancel(ctx), inv, ev, to, cfg, "question-timeout", []string{"coordinator"},
			fmt.Sprintf("No answer within %s: the question is withdrawn, and %s was told it was cancelled.", cfg.PermissionTimeout, inv.Participant))
		return elicitationCancelled()
	case "cancel":
		record("question withdrawn: "+q.Message, map[string]any{"event": ev.ID, "answer": "cancel", "by": "cancel"})
		p.closeRequest(context.WithoutCancel(ctx), inv, ev, to, cfg, "question-withdrawn", []string{"coordinator"},
			fmt.Sprintf("%s's run stopped before an answer: the question is withdrawn.", inv.Participant))
		return elicitationCancelled()
	}
	if a.action == agentbridge.AnswerDecline {
		record(fmt.Sprintf("question declined by %s: %s", a.by, q.Message), map[string]any{"event": ev.ID, "answer": "decline", "by": a.by})
		return sdk.UnstableCreateElicitationResponse{Decline: &sdk.UnstableCreateElicitationDecline{Action: "decline"}}
	}
	record(fmt.Sprintf("question answered by %s: %s", a.by, q.Message), map[string]any{"event": ev.ID, "answer": "accept", "by": a.by,
		"fields": slices.Sorted(maps.Keys(a.fields))})
	return sdk.UnstableCreateElicitationResponse{Accept: &sdk.UnstableCreateElicitationAccept{Action: "accept", Content: contentOf(q.Fields, a.fields)}}
}

// AnswerQuestion hands a person's answer control to the question posted as
// event. An answer the question cannot take (values that do not fit its
// fields) is ignored and logged; one for a question not registered yet is
// kept briefly for it.
func (p *Pool) AnswerQuestion(event string, c agentbridge.AnswerControl, by string) {
	p.give(event, personAnswer{action: c.Action, fields: c.Fields, by: by})
}

// contentOf is the answer's values as the agent gets them: a whole number
// for an integer field, a float for a number, the JSON value otherwise. A
// null (no value) is left out.
func contentOf(fields []agentbridge.QuestionField, values map[string]json.RawMessage) map[string]any {
	out := make(map[string]any, len(values))
	for _, f := range fields {
		raw, ok := values[f.Name]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			continue
		}
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil && f.Type == agentbridge.FieldInteger {
				v = i
			} else if x, err := n.Float64(); err == nil {
				v = x
			}
		}
		out[f.Name] = v
	}
	return out
}

// questionPost is the coordinator's message asking to recipient the
// question q.
func questionPost(cfg *config.Config, inv Invocation, q agentbridge.QuestionMeta, to string) agentbridge.EventInput {
	var fields []string
	var example []string
	for _, f := range q.Fields {
		what := agentbridge.FieldTypeWord(f)
		if f.Required {
			what += ", required"
		}
		fields = append(fields, fmt.Sprintf("`%s` (%s)", f.Name, what))
		example = append(example, f.Name+"=…")
	}
	text := fmt.Sprintf("%s asks: %s", inv.Participant, q.Message)
	if len(fields) > 0 {
		text += "\n\nFields: " + strings.Join(fields, ", ") + "."
	}
	text += fmt.Sprintf("\n\nAnswer with the form, or `agent-bridge answer %s <this message's seq or id> %s` (`--decline` declines). No answer within %s withdraws it.",
		inv.Thread, strings.Join(example, " "), cfg.PermissionTimeout)
	return agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: to,
		Content: jsonOf(text),
		Meta: agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "question"},
			Extra: map[string]json.RawMessage{
				agentbridge.MetaQuestion: jsonOf(q),
				rules.MetaParticipant:    jsonOf(inv.Participant),
			}},
	}
}

// propertySchema is one property of an elicitation's requested schema, as
// ACP's ElicitationPropertySchema has it (the SDK keeps properties as
// untyped maps).
type propertySchema struct {
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Enum        []string `json:"enum"`
	OneOf       []struct {
		Const string `json:"const"`
		Title string `json:"title"`
	} `json:"oneOf"`
	Format    string   `json:"format"`
	MinLength *int     `json:"minLength"`
	MaxLength *int     `json:"maxLength"`
	Minimum   *float64 `json:"minimum"`
	Maximum   *float64 `json:"maximum"`
	MinItems  *int     `json:"minItems"`
	MaxItems  *int     `json:"maxItems"`
	Items     *struct {
		Enum  []string `json:"enum"`
		AnyOf []struct {
			Const string `json:"const"`
			Title string `json:"title"`
		} `json:"anyOf"`
	} `json:"items"`
	Default json.RawMessage `json:"default"`
}

// questionOf turns a form elicitation into the question the person sees.
// Its fields come in the order of the schema's required list, then the
// others by name: the SDK decodes the properties into a map, which keeps
// no order. A schema the form cannot show (an unknown type, too many
// fields) is an error the agent gets.
func questionOf(form sdk.UnstableCreateElicitationForm, invocation int64) (agentbridge.QuestionMeta, error) {
	s := form.RequestedSchema
	q := agentbridge.QuestionMeta{Invocation: invocation, Message: form.Message, Fields: []agentbridge.QuestionField{}}
	if s.Title != nil {
		q.Title = *s.Title
	}
	if len(s.Properties) > agentbridge.MaxQuestionFields {
		return q, fmt.Errorf("the form has %d fields; at most %d are shown", len(s.Properties), agentbridge.MaxQuestionFields)
	}
	var names []string
	for _, n := range s.Required {
		if _, ok := s.Properties[n]; ok && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(s.Properties)) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, name := range names {
		f, err := fieldOf(name, s.Properties[name], slices.Contains(s.Required, name))
		if err != nil {
			return q, err
		}
		q.Fields = append(q.Fields, f)
	}
	return q, nil
}

// fieldOf is the question field of one schema property.
func fieldOf(name string, prop any, required bool) (agentbridge.QuestionField, error) {
	if name == "" || len(name) > agentbridge.MaxFieldName {
		return agentbridge.QuestionField{}, fmt.Errorf("a field name must be 1 to %d bytes", agentbridge.MaxFieldName)
	}
	raw, err := json.Marshal(prop)
	if err != nil {
		return agentbridge.QuestionField{}, fmt.Errorf("field %q: %w", name, err)
	}
	var ps propertySchema
	if err := json.Unmarshal(raw, &ps); err != nil {
		return agentbridge.QuestionField{}, fmt.Errorf("field %q: %w", name, err)
	}
	f := agentbridge.QuestionField{Name: name, Type: ps.Type, Title: ps.Title, Description: ps.Description, Required: required,
		Format: ps.Format, MinLength: ps.MinLength, MaxLength: ps.MaxLength, Minimum: ps.Minimum, Maximum: ps.Maximum,
		MinItems: ps.MinItems, MaxItems: ps.MaxItems, Default: ps.Default}
	switch ps.Type {
	case agentbridge.FieldString:
		f.Enum = ps.Enum
		for _, o := range ps.OneOf {
			f.Enum = append(f.Enum, o.Const)
			f.EnumTitles = append(f.EnumTitles, o.Title)
		}
	case agentbridge.FieldArray:
		if ps.Items == nil {
			return f, fmt.Errorf("field %q: a multiple choice needs its items", name)
		}
		f.Enum = ps.Items.Enum
		for _, o := range ps.Items.AnyOf {
			f.Enum = append(f.Enum, o.Const)
			f.EnumTitles = append(f.EnumTitles, o.Title)
		}
	case agentbridge.FieldNumber, agentbridge.FieldInteger, agentbridge.FieldBoolean:
	default:
		return f, fmt.Errorf("field %q has the type %q; a form shows string, number, integer, boolean and array fields", name, ps.Type)
	}
	return f, nil
}
