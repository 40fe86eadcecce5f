package coordinator

import (
	"context"
	"fmt"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// noticeUnserved is the kind of the notice saying, at an invite, that no
// coordinator has ever served the invited participant (contract 7.1).
const noticeUnserved = "unserved:"

// unservedAtInvite says once in the thread, at an invite, when no
// coordinator has ever served the invited participant: its messages will
// wait for one. Every coordinator that does not serve it may see this;
// the notice is claimed at the bridge (notice "unserved:<participant>")
// and the first claimant posts it. It works off the follow loop.
func (c *Coordinator) unservedAtInvite(ctx context.Context, e agentbridge.Event, ctl *agentbridge.Control, after agentbridge.ThreadState) {
	if ctl == nil || ctl.Invite == nil || c.claims.off() {
		return
	}
	cfg := c.cfg.Load()
	p, cl := ctl.Invite.ParticipantID, ctl.Invite.Profile.Client
	if _, served := cfg.ResolveAgent(p, after); served {
		return
	}
	c.sched.notices.Add(1)
	go func() {
		defer c.sched.notices.Done()
		c.registry.Refresh(ctx)
		if never, known := c.registry.NeverServed(p, cl); !known || !never {
			return
		}
		c.postUnserved(ctx, cfg, e, p, cl)
	}()
}

// postUnserved claims and posts the unserved notice for participant p.
func (c *Coordinator) postUnserved(ctx context.Context, cfg *config.Config, e agentbridge.Event, p, cl string) {
	res, err := c.claims.claim(ctx, agentbridge.ClaimRequest{
		ClaimKey:    agentbridge.ClaimKey{Thread: e.Thread, Event: e.ID, Notice: noticeUnserved + p},
		Coordinator: cfg.CoordinatorID, Instance: c.registry.Instance(),
	})
	if err != nil || !res.Granted {
		return // another coordinator says it, or the bridge keeps no claims
	}
	by := ""
	if cl != "" {
		by = fmt.Sprintf(" (by its name or its client %q)", cl)
	}
	text := fmt.Sprintf("No coordinator has ever served %s: none registered with the bridge lists it%s. "+
		"Messages to %s wait up to %s for a coordinator serving it.", p, by, p, cfg.PendingTTL)
	in := agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: agentbridge.ToAll, Content: mustJSON(text),
		Meta: agentbridge.Meta{ReplyTo: e.ID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "unserved"}},
	}
	wctx := client.WithClaim(ctx, res.Claim.ID, res.Claim.Fence)
	err = c.retry(ctx, retrying{what: "post the unserved notice", attrs: []any{"trigger", e.ID}, permanent: refusedForGood}, func() error {
		_, err := c.bridge.Append(wctx, e.Thread, in, idempotencyKey(e.ID, "notice:"+noticeUnserved+p))
		return err
	})
	if err != nil {
		c.log.Warn("cannot post the unserved notice", "trigger", e.ID, "participant", p, "err", err)
		return
	}
	c.claims.finishClaim(ctx, res.Claim.ID, res.Claim.Fence)
}
