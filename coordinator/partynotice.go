package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/registry"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// Notices across coordinators (contract 7.1). Every coordinator that
// decides a trigger alike owes the same notice: a party round's closing
// notice, a scene's scene.closed, a clarification, a loop-guard notice.
// Each is posted once: the coordinator claims it at the bridge as a
// notice claim, and only the granted claimant posts it, with the claim's
// fence. The others close their notice as posted elsewhere; when the
// holder's heartbeat lapses before it is done, the bridge lists the claim
// to every live coordinator, and the one that takes it posts the notice
// (takeNoticeClaim).

// noticePartyDone is the notice claim of a party round's closing notice.
const noticePartyDone = "party:done"

// noticeClaimName is the bridge's notice name of a notice kind.
func noticeClaimName(kind string) string {
	if kind == noticeParty {
		return noticePartyDone
	}
	return kind
}

// noticeKindOf is the notice kind of a notice claim's name.
func noticeKindOf(name string) string {
	if name == noticePartyDone {
		return noticeParty
	}
	return name
}

// claimNotice claims notice n at the bridge before this coordinator posts
// it. It returns the claim to post under (nil: post unclaimed, as the
// only coordinator, against a bridge that keeps no claims or refuses this
// coordinator's), or settled true when nothing is to be posted here:
// another coordinator holds or posted the notice (the ledger closes it),
// or ctx ended (it stays pending). A claim refused because this
// coordinator's registration is not in yet is tried again.
func (c *Coordinator) claimNotice(ctx context.Context, n ledger.Notice) (cl *agentbridge.Claim, settled bool) {
	if c.registry.Unsupported() {
		return nil, false
	}
	cfg := c.cfg.Load()
	req := agentbridge.ClaimRequest{
		ClaimKey:    agentbridge.ClaimKey{Thread: n.Thread, Event: n.TriggerID, Notice: noticeClaimName(n.Kind)},
		Coordinator: cfg.CoordinatorID, Instance: c.registry.Instance(),
	}
	var res agentbridge.ClaimResult
	err := c.retry(ctx, retrying{what: "claim a notice", attrs: []any{"trigger", n.TriggerID, "notice", req.Notice},
		permanent: func(err error) bool {
			return client.Permanent(err) && !(registry.NotRegistered(err) && c.registry.Registered())
		}},
		func() (err error) {
			res, err = c.bridge.Claim(ctx, req)
			return err
		})
	switch {
	case err == nil && res.Granted:
		return &res.Claim, false
	case err == nil:
		c.log.Debug("notice posted by another coordinator", "trigger", n.TriggerID, "notice", req.Notice,
			"holder", res.Claim.Coordinator, "state", res.Claim.State)
		if err := c.db.NoticePosted(context.WithoutCancel(ctx), n.TriggerID, n.Kind, ""); err != nil {
			c.log.Error("record notice", "trigger", n.TriggerID, "err", err)
		}
		return nil, true
	case client.Permanent(err):
		c.log.Debug("the bridge keeps no notice claims for this coordinator; posting as the only one", "trigger", n.TriggerID, "err", err)
		return nil, false
	default:
		return nil, true // ctx ended
	}
}

// finishNotice marks a notice claim done once its notice is posted (or
// refused for good), so that no other coordinator posts it again.
func (c *Coordinator) finishNotice(ctx context.Context, cl *agentbridge.Claim) {
	if cl == nil {
		return
	}
	cfg := c.cfg.Load()
	err := c.retry(ctx, retrying{what: "finish a notice claim", attrs: []any{"claim", cl.ID}, permanent: client.Permanent},
		func() error {
			_, err := c.bridge.FinishClaim(ctx, cl.ID, cl.Fence, cfg.CoordinatorID, c.registry.Instance())
			return err
		})
	if err != nil && ctx.Err() == nil {
		c.log.Warn("cannot finish a notice claim", "claim", cl.ID, "err", err)
	}
}

// withNoticeClaim is ctx carrying cl's fence for the notice's post.
func withNoticeClaim(ctx context.Context, cl *agentbridge.Claim) context.Context {
	if cl == nil {
		return ctx
	}
	return client.WithClaim(ctx, cl.ID, cl.Fence)
}

// takeNoticeClaim takes over notice claim cl, which the bridge listed as
// claimable (its holder lapsed before posting), and posts its notice. The
// claimable poller calls it for every claim with a Notice. The notice's
// text comes from this coordinator's ledger when it owes the same
// notice, else, for a party round, from the thread. A claim it cannot
// post anything for is left as it is.
func (c *Coordinator) takeNoticeClaim(ctx context.Context, cl agentbridge.Claim) {
	if cl.Notice == "" {
		return
	}
	keep := context.WithoutCancel(ctx)
	kind := noticeKindOf(cl.Notice)
	n, err := c.db.NoticeOf(keep, cl.Event, kind)
	switch {
	case err == nil:
		c.log.Info("posting a notice whose claim lapsed", "trigger", cl.Event, "notice", cl.Notice, "previous_host", cl.Host)
		c.postNotice(ctx, n)
		return
	case !errors.Is(err, ledger.ErrNotFound):
		c.log.Error("read notice", "trigger", cl.Event, "err", err)
		return
	case kind != noticeParty:
		c.log.Debug("a claimable notice this coordinator does not owe", "trigger", cl.Event, "notice", cl.Notice)
		return
	}
	if _, err := c.db.PartyRoundOf(keep, cl.Event); err == nil {
		c.partyAdvance(ctx, cl.Event)
		return
	}
	n, ok, err := c.partyNoticeFromThread(ctx, cl)
	if err != nil || !ok {
		if err != nil {
			c.log.Warn("cannot read a lapsed party notice's round", "trigger", cl.Event, "err", err)
		}
		return
	}
	c.postNotice(ctx, n)
}

// partyNoticeFromThread rebuilds the closing notice of party trigger
// cl.Event, which this coordinator decided but ran nobody of, from its
// decision record and the thread; ok is false when the round is not done.
func (c *Coordinator) partyNoticeFromThread(ctx context.Context, cl agentbridge.Claim) (ledger.Notice, bool, error) {
	rec, err := c.db.Decision(ctx, cl.Event)
	if err != nil {
		return ledger.Notice{}, false, fmt.Errorf("read decision: %w", err)
	}
	var d rules.Decision
	if err := json.Unmarshal(rec.Decision, &d); err != nil || d.Party == nil {
		return ledger.Notice{}, false, fmt.Errorf("decision of %s is not a party round", cl.Event)
	}
	trig, err := c.threadEvents(ctx, rec.Thread, rec.Seq-1, rec.Seq)
	if err != nil || len(trig) != 1 {
		return ledger.Notice{}, false, fmt.Errorf("read trigger %s: %v", cl.Event, err)
	}
	r := ledger.PartyRound{TriggerID: cl.Event, Thread: rec.Thread, TriggerSeq: rec.Seq, TriggerFrom: trig[0].From, CrossTalk: d.Party.CrossTalk, Selected: d.Party.IDs()}
	p, _, err := c.partyProgress(ctx, r)
	if err != nil || p.Stage < rules.PartyStageDone {
		return ledger.Notice{}, false, err
	}
	return c.partyNotice(r, p.Notice), true, nil
}

// postNotice posts a notice once, with its own idempotency key, retrying
// transient failures until ctx ends: across coordinators, once its notice
// claim is granted (claimNotice).
func (c *Coordinator) postNotice(ctx context.Context, n ledger.Notice) {
	keep := context.WithoutCancel(ctx)
	in := n.Post
	in.Meta.Hop = nil // the bridge assigns it (see deliver)
	cl, settled := c.claimNotice(ctx, n)
	if settled {
		return
	}
	defer c.finishNotice(keep, cl)
	pctx := withNoticeClaim(ctx, cl)
	key := idempotencyKey(n.TriggerID, "notice:"+n.Kind)
	var ev agentbridge.Event
	err := c.retry(ctx, retrying{what: "post notice", attrs: []any{"trigger", n.TriggerID}, permanent: client.Permanent},
		func() (err error) {
			ev, err = c.bridge.Append(pctx, n.Thread, in, key)
			return err
		})
	switch {
	case err == nil:
	case client.Permanent(err):
		c.log.Warn("the bridge refused a notice; not retrying", "trigger", n.TriggerID, "kind", n.Kind, "err", err)
	default:
		return // ctx ended: the notice stays pending
	}
	if err := c.db.NoticePosted(keep, n.TriggerID, n.Kind, ev.ID); err != nil {
		c.log.Error("record notice", "trigger", n.TriggerID, "err", err)
	}
}
