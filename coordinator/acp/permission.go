package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// Permission requests (contract 6.6): with "permissions": "ask" the
// coordinator posts the request to the human who started the chain and
// waits for a permission control naming that message and one of its
// options; a timeout, a cancel of the turn or "deny" answer cancelled, and
// "allow" picks the allow_once option.

// PermissionMeta is meta.permission of a permission request message: what
// a client needs to show the options and answer with a permission control.
type PermissionMeta struct {
	// Invocation is the id of the run that asks.
	Invocation int64 `json:"invocation"`
	// ToolCall is the tool call the agent wants to run.
	ToolCall PermissionToolCall `json:"tool_call"`
	// Options are the agent's answers, offered as buttons.
	Options []PermissionOption `json:"options"`
	// ExpiresAt is when the request is refused unanswered (its post's
	// time plus permission_timeout_s), so a page can show how long it
	// still waits.
	ExpiresAt string `json:"expires_at,omitempty"`
}

// PermissionToolCall names the tool call of a permission request.
type PermissionToolCall struct {
	Title string `json:"title"`
	Kind  string `json:"kind"`
}

// PermissionOption is one answer the agent offers.
type PermissionOption struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Kind is allow_once, allow_always, reject_once or reject_always.
	Kind string `json:"kind"`
}

// maxEarlyAnswers bounds the answers kept for requests not registered yet.
const maxEarlyAnswers = 64

// waiting is one request waiting for a person: a permission request or a
// question with fields (elicitation.go).
type waiting struct {
	// question is set for a question, whose count is its own gauge.
	question bool
	// fits reports whether an answer is one the request can take.
	fits   func(personAnswer) bool
	answer chan personAnswer
}

// personAnswer is a person's answer: a permission request's option, or a
// question's action and values; by is who answered.
type personAnswer struct {
	option string
	action string
	fields map[string]json.RawMessage
	by     string
}

func permissionCancelled() sdk.RequestPermissionResponse {
	return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}}
}

func permissionSelected(id sdk.PermissionOptionId) sdk.RequestPermissionResponse {
	return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Selected: &sdk.RequestPermissionOutcomeSelected{OptionId: id, Outcome: "selected"}}}
}

// askPermission answers one session/request_permission of turn t.
func (p *Pool) askPermission(ctx context.Context, t *turn, req sdk.RequestPermissionRequest) sdk.RequestPermissionResponse {
	opts := make([]PermissionOption, 0, len(req.Options))
	for _, o := range req.Options {
		opts = append(opts, PermissionOption{ID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	return t.noteAnswer(p.answer(ctx, t, req, opts), opts)
}

// answer decides the answer to req per the entry's permissions: by the
// config, or by asking in the thread and waiting for the answer.
func (p *Pool) answer(ctx context.Context, t *turn, req sdk.RequestPermissionRequest, opts []PermissionOption) sdk.RequestPermissionResponse {
	cfg := p.cfg()
	tc := t.permissionToolCall(req)
	record := func(status string, detail map[string]any) {
		detail["tool_call"] = tc
		t.progress(adapters.ProgressRecord{Status: oneLineStatus(status), Kind: "permission", Detail: jsonOf(detail)})
	}
	if resp, ok := answerByConfig(t.run.Entry.Permissions, tc, opts, record); ok {
		return resp
	}
	inv := t.run.Invocation
	to := p.host.Recipient(ctx, inv.Thread, t.run.Trigger, t.run.Known)
	post := permissionPost(cfg, inv, tc, opts, to)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.stopped:
			cancel()
		case <-pctx.Done():
		}
	}()
	ev, err := p.host.Post(pctx, inv, post, inv.TriggerID, fmt.Sprintf("permission:%s:%s", inv.Participant, req.ToolCall.ToolCallId))
	if err != nil {
		record("permission request not posted: "+tc.Title, map[string]any{"answer": "cancelled", "error": err.Error()})
		return permissionCancelled()
	}
	record("waiting for permission: "+tc.Title, map[string]any{"event": ev.ID, "to": to})
	fits := func(a personAnswer) bool {
		return slices.ContainsFunc(opts, func(o PermissionOption) bool { return o.ID == a.option })
	}
	t.clock.pause()
	a, by := p.await(pctx, ev.ID, &waiting{fits: fits}, cfg.PermissionTimeout)
	t.clock.resume()
	switch by {
	case "timeout":
		record("no answer to the permission request: "+tc.Title, map[string]any{"event": ev.ID, "answer": "cancelled", "by": "timeout"})
		p.closeRequest(context.WithoutCancel(ctx), inv, ev, to, cfg, "permission-timeout", []string{"coordinator", "permission"},
			fmt.Sprintf("No answer within %s: the tool call was refused.", cfg.PermissionTimeout))
		return permissionCancelled()
	case "cancel":
		record("permission request withdrawn: "+tc.Title, map[string]any{"event": ev.ID, "answer": "cancelled", "by": "cancel"})
		p.closeRequest(context.WithoutCancel(ctx), inv, ev, to, cfg, "permission-withdrawn", []string{"coordinator", "permission"},
			fmt.Sprintf("%s's run stopped before an answer: the permission request is withdrawn.", inv.Participant))
		return permissionCancelled()
	}
	record(fmt.Sprintf("permission answered %s by %s: %s", a.option, a.by, tc.Title), map[string]any{"event": ev.ID, "answer": a.option, "by": a.by})
	return permissionSelected(sdk.PermissionOptionId(a.option))
}

// permissionToolCall is the tool call a permission request is about, its
// title and kind completed from the turn's tool call updates.
func (t *turn) permissionToolCall(req sdk.RequestPermissionRequest) PermissionToolCall {
	tc := PermissionToolCall{Kind: "other"}
	if req.ToolCall.Title != nil {
		tc.Title = *req.ToolCall.Title
	}
	if req.ToolCall.Kind != nil {
		tc.Kind = string(*req.ToolCall.Kind)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if info, ok := t.tools[req.ToolCall.ToolCallId]; ok {
		if tc.Title == "" {
			tc.Title = info.title
		}
		if req.ToolCall.Kind == nil && info.kind != "" {
			tc.Kind = info.kind
		}
	}
	return tc
}

// answerByConfig answers a request the entry's permissions settle
// (PermissionsAllow: the first allow option; PermissionsDeny: refused);
// ok is false when a person must be asked.
func answerByConfig(mode string, tc PermissionToolCall, opts []PermissionOption, record func(string, map[string]any)) (sdk.RequestPermissionResponse, bool) {
	switch mode {
	case config.PermissionsAllow:
		for _, kind := range []string{string(sdk.PermissionOptionKindAllowOnce), string(sdk.PermissionOptionKindAllowAlways)} {
			for _, o := range opts {
				if o.Kind == kind {
					record("permission allowed: "+tc.Title, map[string]any{"answer": o.ID, "by": "config"})
					return permissionSelected(sdk.PermissionOptionId(o.ID)), true
				}
			}
		}
		record("permission refused (no allow option): "+tc.Title, map[string]any{"answer": "cancelled", "by": "config"})
		return permissionCancelled(), true
	case config.PermissionsDeny:
		record("permission refused: "+tc.Title, map[string]any{"answer": "cancelled", "by": "config"})
		return permissionCancelled(), true
	}
	return sdk.RequestPermissionResponse{}, false
}

// permissionPost is the coordinator's message asking to recipient to
// answer a permission request.
func permissionPost(cfg *config.Config, inv Invocation, tc PermissionToolCall, opts []PermissionOption, to string) agentbridge.EventInput {
	var names []string
	for _, o := range opts {
		names = append(names, fmt.Sprintf("`%s` (%s)", o.ID, o.Name))
	}
	title := tc.Title
	if title == "" {
		title = "a tool"
	}
	text := fmt.Sprintf("%s asks permission to run %s (%s). Answer with one of: %s — the buttons, or `agent-bridge permit %s <this message's seq or id> <option>`. No answer within %s refuses it.",
		inv.Participant, title, tc.Kind, strings.Join(names, ", "), inv.Thread, cfg.PermissionTimeout)
	return agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: to,
		Content: jsonOf(text),
		Meta: agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "permission"},
			Extra: map[string]json.RawMessage{
				agentbridge.MetaPermission: jsonOf(PermissionMeta{Invocation: inv.ID, ToolCall: tc, Options: opts,
					ExpiresAt: agentbridge.FormatTime(time.Now().Add(cfg.PermissionTimeout))}),
				rules.MetaParticipant: jsonOf(inv.Participant),
			}},
	}
}

// await waits for the answer to the request posted as event, which w
// describes: by is "" with the answer, "timeout" after timeout, "cancel"
// when ctx ends. An answer that came before the request was registered is
// taken.
func (p *Pool) await(ctx context.Context, event string, w *waiting, timeout time.Duration) (personAnswer, string) {
	w.answer = make(chan personAnswer, 1)
	p.mu.Lock()
	p.waits[event] = w
	early, ok := p.early[event]
	delete(p.early, event)
	p.mu.Unlock()
	if ok {
		p.give(event, early)
	}
	defer func() {
		p.mu.Lock()
		delete(p.waits, event)
		p.mu.Unlock()
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-w.answer:
		return a, ""
	case <-timer.C:
		return personAnswer{}, "timeout"
	case <-ctx.Done():
		return personAnswer{}, "cancel"
	}
}

// closeRequest tells to, in reply to the request req (a permission request
// or a question), that it waits no more: kind names the notice
// (permission-timeout, question-withdrawn…; one of each per request), tags
// are its tags. So nobody answers what nothing will read.
func (p *Pool) closeRequest(ctx context.Context, inv Invocation, req agentbridge.Event, to string, cfg *config.Config, kind string, tags []string, text string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	in := agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: to,
		Content: jsonOf(text),
		Meta: agentbridge.Meta{ReplyTo: req.ID, Via: cfg.CoordinatorID, Tags: tags,
			Extra: map[string]json.RawMessage{rules.MetaParticipant: jsonOf(inv.Participant)}},
	}
	if _, err := p.host.Post(ctx, inv, in, req.ID, kind); err != nil {
		p.log.Warn("post the notice that a request waits no more", "thread", inv.Thread, "request", req.ID, "kind", kind, "err", err)
	}
}

// Answer hands a person's answer to the permission request posted as
// event: option is one of its options' ids, by who answered. An answer
// naming an option the request does not offer is ignored (and logged);
// one for a request not registered yet is kept briefly for it.
func (p *Pool) Answer(event, option, by string) {
	p.give(event, personAnswer{option: option, by: by})
}

// give hands a to the request waiting as event, or keeps it for a request
// not registered yet.
func (p *Pool) give(event string, a personAnswer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.waits[event]
	if !ok {
		if len(p.early) >= maxEarlyAnswers {
			for k := range p.early {
				delete(p.early, k)
				break
			}
		}
		p.early[event] = a
		return
	}
	if !w.fits(a) {
		p.log.Warn("an answer the request cannot take; ignored", "event", event, "option", a.option, "action", a.action, "by", a.by)
		return
	}
	select {
	case w.answer <- a:
	default: // answered already
	}
}
