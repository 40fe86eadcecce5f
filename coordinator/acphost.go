package coordinator

import (
	"cmp"
	"context"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/acp"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// acpHost is the coordinator as the host of its ACP client
// (coordinator/acp, docs/acp.md): the ledger, the agents' tokens, the
// roster's presence and the thread, through acp.Host.
type acpHost struct{ c *Coordinator }

var _ acp.Host = acpHost{}

// MarkRunning records the turn's start; the turn's start, not the warm
// process's, is the invocation's started_at.
func (h acpHost) MarkRunning(ctx context.Context, inv acp.Invocation, pid int, started time.Time) {
	if err := h.c.db.MarkRunning(context.WithoutCancel(ctx), inv.ID, pid, pid, started); err != nil {
		h.c.log.Error("record ACP turn start", "id", inv.ID, "err", err)
	}
}

// Token mints a warm agent's token (agenttoken.go).
func (h acpHost) Token(ctx context.Context, thread, participant string) acp.Token {
	t := h.c.tokens.mint(ctx, thread, participant, acpTokenName(participant), acpTokenTTL(h.c.cfg.Load()))
	return acpToken{k: h.c.tokens, t: t}
}

// Presence reads the roster's presence (since.go).
func (h acpHost) Presence(ctx context.Context, thread string) map[string]string {
	return h.c.presenceStates(ctx, thread)
}

// Recipient is the human a permission request goes to, as for a
// question directive (questionRecipient).
func (h acpHost) Recipient(ctx context.Context, thread string, trigger agentbridge.Event, known []agentbridge.Event) string {
	humans := h.c.cfg.Load().HumanIDs
	to, err := h.c.questionRecipient(ctx, thread, trigger, known, humans)
	if err != nil {
		return fallbackRecipient(humans)
	}
	return to
}

// Post appends a permission request or its closing notice (appendRetry).
func (h acpHost) Post(ctx context.Context, inv acp.Invocation, in agentbridge.EventInput, trigger, kind string) (agentbridge.Event, error) {
	return h.c.appendRetry(ctx, inv.ID, inv.Thread, in, idempotencyKey(trigger, kind))
}

// acpInvocation is inv as the ACP client knows a run (acp.Invocation).
func acpInvocation(inv ledger.Invocation) acp.Invocation {
	return acp.Invocation{ID: inv.ID, Thread: inv.Thread, Participant: inv.Participant, TriggerID: inv.TriggerID}
}

// acpToken is a warm agent's token as the ACP client holds it.
type acpToken struct {
	k *tokenKeeper
	t *agentToken
}

// Value is the token's secret, or noAgentToken.
func (t acpToken) Value() string { return cmp.Or(t.t.wait(), noAgentToken) }

// LastsTurn reports whether the token outlives a run's ttl from now.
func (t acpToken) LastsTurn() bool { return t.t.lasts(runTokenTTL(t.k.config())) }

// Revoke revokes the token once it is minted (tokenKeeper.revoke).
func (t acpToken) Revoke() { t.k.revoke(t.t) }

// fallbackRecipient is who a question goes to when its chain cannot be
// read: the first human, else everyone.
func fallbackRecipient(humans []string) string {
	if len(humans) > 0 {
		return humans[0]
	}
	return agentbridge.ToAll
}

// payloadPresence returns the function that reads the presence for the
// roster of inv's payload. A warm ACP session is sent no roster unless who
// is invited changed (acp.Pool.Run), so for it the read is skipped (and
// done by the turn if the roster is needed after all).
func (c *Coordinator) payloadPresence(ctx context.Context, inv ledger.Invocation) func() map[string]string {
	if entry, ok := c.cfg.Load().Agents[inv.Agent]; ok && len(entry.ACP) > 0 && c.acp.SkipPresence(acpInvocation(inv)) {
		return func() map[string]string { return nil }
	}
	return func() map[string]string { return c.presenceStates(ctx, inv.Thread) }
}

// applyPermissionControl hands a human's permission control, or answer
// control, to the ACP request or question waiting for it (acp.Pool.Answer,
// acp.Pool.AnswerQuestion).
func (c *Coordinator) applyPermissionControl(e agentbridge.Event, ctl agentbridge.Control, humans agentbridge.Humans) {
	if !humans.Has(e.From) {
		return
	}
	if ctl.Permission != nil {
		c.acp.Answer(ctl.Permission.Event, ctl.Permission.Option, e.From)
	}
	if ctl.Answer != nil {
		c.acp.AnswerQuestion(ctl.Answer.Event, *ctl.Answer, e.From)
	}
}
