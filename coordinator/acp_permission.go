package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
)

// Permission requests (contract 6.6): with "permissions": "ask" the
// coordinator posts the request to the human who started the chain and
// waits for a permission control naming that message and one of its
// options; a timeout, a cancel of the turn or "deny" answer cancelled, and
// "allow" picks the allow_once option.

// MetaPermission is the meta key of a permission request message.
const MetaPermission = "permission"

// PermissionMeta is meta.permission of a permission request message: what
// a client needs to show the options and answer with a permission control.
type PermissionMeta struct {
	// Invocation is the id of the run that asks.
	Invocation int64 `json:"invocation"`
	// ToolCall is the tool call the agent wants to run.
	ToolCall PermissionToolCall `json:"tool_call"`
	// Options are the agent's answers, offered as buttons.
	Options []PermissionOption `json:"options"`
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

// acpPermission is one request waiting for a person.
type acpPermission struct {
	options []PermissionOption
	answer  chan permissionAnswer
}

type permissionAnswer struct{ option, by string }

func permissionCancelled() acp.RequestPermissionResponse {
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{Outcome: "cancelled"}}}
}

func permissionSelected(id acp.PermissionOptionId) acp.RequestPermissionResponse {
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: id, Outcome: "selected"}}}
}

// askPermission answers one session/request_permission of turn t.
func (p *acpPool) askPermission(ctx context.Context, t *acpTurn, req acp.RequestPermissionRequest) acp.RequestPermissionResponse {
	opts := make([]PermissionOption, 0, len(req.Options))
	for _, o := range req.Options {
		opts = append(opts, PermissionOption{ID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	return t.noteAnswer(p.answer(ctx, t, req, opts), opts)
}

// answer decides the answer to req per the entry's permissions.
func (p *acpPool) answer(ctx context.Context, t *acpTurn, req acp.RequestPermissionRequest, opts []PermissionOption) acp.RequestPermissionResponse {
	c := p.c
	cfg := c.cfg.Load()
	tc := PermissionToolCall{Kind: "other"}
	if req.ToolCall.Title != nil {
		tc.Title = *req.ToolCall.Title
	}
	if req.ToolCall.Kind != nil {
		tc.Kind = string(*req.ToolCall.Kind)
	}
	t.mu.Lock()
	if info, ok := t.tools[req.ToolCall.ToolCallId]; ok {
		if tc.Title == "" {
			tc.Title = info.title
		}
		if req.ToolCall.Kind == nil && info.kind != "" {
			tc.Kind = info.kind
		}
	}
	t.mu.Unlock()
	record := func(status string, detail map[string]any) {
		detail["tool_call"] = tc
		t.progress(adapters.ProgressRecord{Status: oneLineStatus(status), Kind: "permission", Detail: mustJSON(detail)})
	}
	switch t.entry.Permissions {
	case PermissionsAllow:
		for _, kind := range []string{string(acp.PermissionOptionKindAllowOnce), string(acp.PermissionOptionKindAllowAlways)} {
			for _, o := range opts {
				if o.Kind == kind {
					record("permission allowed: "+tc.Title, map[string]any{"answer": o.ID, "by": "config"})
					return permissionSelected(acp.PermissionOptionId(o.ID))
				}
			}
		}
		record("permission refused (no allow option): "+tc.Title, map[string]any{"answer": "cancelled", "by": "config"})
		return permissionCancelled()
	case PermissionsDeny:
		record("permission refused: "+tc.Title, map[string]any{"answer": "cancelled", "by": "config"})
		return permissionCancelled()
	}
	inv := t.inv
	to, err := c.questionRecipient(ctx, inv.Thread, t.in.trigger, t.in.p.ContextWindow, cfg.HumanIDs)
	if err != nil {
		to = agentbridge.ToAll
		if len(cfg.HumanIDs) > 0 {
			to = cfg.HumanIDs[0]
		}
	}
	var names []string
	for _, o := range opts {
		names = append(names, fmt.Sprintf("`%s` (%s)", o.ID, o.Name))
	}
	title := tc.Title
	if title == "" {
		title = "a tool"
	}
	text := fmt.Sprintf("%s asks permission to run %s (%s). Answer with one of: %s — the buttons, or `agent-bridge permit %s <this message's id> <option>`. No answer within %s refuses it.",
		inv.Participant, title, tc.Kind, strings.Join(names, ", "), inv.Thread, cfg.PermissionTimeout)
	post := agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: to,
		Content: mustJSON(text),
		Meta: agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "permission"},
			Extra: map[string]json.RawMessage{
				MetaPermission:  mustJSON(PermissionMeta{Invocation: inv.ID, ToolCall: tc, Options: opts}),
				metaParticipant: mustJSON(inv.Participant),
			}},
	}
	key := idempotencyKey(inv.TriggerID, fmt.Sprintf("permission:%s:%s", inv.Participant, req.ToolCall.ToolCallId))
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.stopped:
			cancel()
		case <-pctx.Done():
		}
	}()
	ev, err := c.appendRetry(pctx, inv, post, key)
	if err != nil {
		record("permission request not posted: "+tc.Title, map[string]any{"answer": "cancelled", "error": err.Error()})
		return permissionCancelled()
	}
	record("waiting for permission: "+tc.Title, map[string]any{"event": ev.ID, "to": to})
	w := &acpPermission{options: opts, answer: make(chan permissionAnswer, 1)}
	p.mu.Lock()
	p.perms[ev.ID] = w
	early, ok := p.early[ev.ID]
	delete(p.early, ev.ID)
	p.mu.Unlock()
	if ok {
		p.answerPermission(ev.ID, early)
	}
	defer func() {
		p.mu.Lock()
		delete(p.perms, ev.ID)
		p.mu.Unlock()
	}()
	timer := time.NewTimer(cfg.PermissionTimeout)
	defer timer.Stop()
	select {
	case a := <-w.answer:
		record(fmt.Sprintf("permission answered %s by %s: %s", a.option, a.by, tc.Title), map[string]any{"event": ev.ID, "answer": a.option, "by": a.by})
		return permissionSelected(acp.PermissionOptionId(a.option))
	case <-timer.C:
		record("no answer to the permission request: "+tc.Title, map[string]any{"event": ev.ID, "answer": "cancelled", "by": "timeout"})
		c.permissionTimedOut(context.WithoutCancel(ctx), inv.Thread, ev, to, cfg)
		return permissionCancelled()
	case <-pctx.Done():
		record("permission request withdrawn: "+tc.Title, map[string]any{"event": ev.ID, "answer": "cancelled", "by": "cancel"})
		return permissionCancelled()
	}
}

// permissionTimedOut says in the thread that a request went unanswered,
// so that the request and its outcome both stay there.
func (c *Coordinator) permissionTimedOut(ctx context.Context, thread string, req agentbridge.Event, to string, cfg *Config) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	in := agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: to,
		Content: mustJSON(fmt.Sprintf("No answer within %s: the tool call was refused.", cfg.PermissionTimeout)),
		Meta:    agentbridge.Meta{ReplyTo: req.ID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "permission"}},
	}
	if _, err := c.bridge.Append(ctx, thread, in, idempotencyKey(req.ID, "permission-timeout")); err != nil {
		c.log.Warn("post permission timeout notice", "thread", thread, "request", req.ID, "err", err)
	}
}

// applyPermissionControl hands a human's permission control to the
// request waiting for it. An answer naming an option the request does not
// offer is ignored (and logged); one for a request not registered yet is
// kept briefly for it.
func (c *Coordinator) applyPermissionControl(e agentbridge.Event, humans agentbridge.Humans) {
	if e.Type != agentbridge.TypeControl || !humans.Has(e.From) {
		return
	}
	ctl, err := agentbridge.ParseControl(e.Content)
	if err != nil || ctl.Permission == nil {
		return
	}
	c.acp.answerPermission(ctl.Permission.Event, permissionAnswer{option: ctl.Permission.Option, by: e.From})
}

func (p *acpPool) answerPermission(event string, a permissionAnswer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.perms[event]
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
	for _, o := range w.options {
		if o.ID == a.option {
			select {
			case w.answer <- a:
			default: // answered already
			}
			return
		}
	}
	p.c.log.Warn("a permission answer names an option the request does not offer; ignored", "event", event, "option", a.option, "by", a.by)
}
