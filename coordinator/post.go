package coordinator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// The post, a run's last step: what the run owes the thread (a reply, a
// scene step's events, an error notice: plan.go) is recorded first
// (record, invoke.go), then posted under the pair's key, and the bridge's
// event recorded. A post refused for good is replaced (refused.go).

// resume posts what a previous run of inv left owed, and finishes its
// claim.
func (c *Coordinator) resume(ctx context.Context, inv ledger.Invocation) {
	c.deliverPending(withClaim(ctx, inv), inv)
	c.claims.finish(context.WithoutCancel(ctx), inv.ID)
}

// deliverPending posts what a previous run of inv left owed.
func (c *Coordinator) deliverPending(ctx context.Context, inv ledger.Invocation) {
	if cur, err := c.db.Invocation(context.WithoutCancel(ctx), inv.ID); err == nil && cur.Status == ledger.StatusCancelled {
		// Belt and braces: Finish never leaves a post owed by a
		// cancelled run, and no reply of one is ever posted.
		c.logInvocation(inv, ledger.StatusCancelled, 0)
		return
	}
	keep := context.WithoutCancel(ctx)
	posts, err := inv.PendingPosts()
	if err != nil || len(posts) == 0 {
		c.log.Error("decode pending post", "id", inv.ID, "err", err)
		_ = c.db.Posted(keep, inv.ID, "", "", fmt.Sprintf("the pending post could not be decoded: %v", err))
		c.logInvocation(inv, inv.Status, 0)
		return
	}
	status := c.deliver(ctx, inv, posts, inv.Status)
	c.logInvocation(inv, status, 0)
}

// deliver posts a reply or error message with the pair's idempotency key,
// retrying transient failures until ctx ends, and records the result. It
// returns the invocation's final status: refused when the bridge answers
// 409 (the participant was muted or the thread paused meanwhile). A 409
// idempotency_conflict (another writer used the pair's key first) is not
// that: it fails the run with an error notice under a key of its own
// (postRefused), and the other writer's event is never taken for the reply.
// posts (a reply, or a scene turn's thinking, then its speech) are posted
// in order, each under its own key: the last one under the pair's key, so
// recovery finds the pair's reply as for any other.
func (c *Coordinator) deliver(ctx context.Context, inv ledger.Invocation, posts []agentbridge.EventInput, status string) string {
	keep := context.WithoutCancel(ctx)
	var last agentbridge.Event
	var note, newStatus string // what a refused part changed (refused.go)
	for i, in := range posts {
		// The bridge assigns the hop and refuses one a writer sets; a
		// stored post may carry one (rows written by a coordinator that
		// stamped hops itself).
		in.Meta.Hop = nil
		key := replyKey(inv)
		if i < len(posts)-1 {
			key = idempotencyKey(inv.TriggerID, inv.Participant+"\x00part"+strconv.Itoa(i))
		}
		ev, err := c.appendRetry(ctx, inv.ID, inv.Thread, in, key)
		if err == nil {
			last = ev
			c.noteReply(keep, ev)
			continue
		}
		if end, ok := c.conflictEnd(ctx, inv, err); ok {
			return end
		}
		var ae *agentbridge.Error
		switch {
		case errors.As(err, &ae):
			// Refused for good: a cut or an error notice stands in for it
			// (refused.go), so the trigger is still answered.
			rp, err := c.postRefused(ctx, inv, in, key, ae)
			if err == nil {
				last, note = rp.ev, rp.note
				if rp.status != "" {
					status, newStatus = rp.status, rp.status
				}
				c.noteReply(keep, rp.ev)
				continue
			}
			if ctx.Err() != nil {
				return status // left pending: the next run posts it
			}
			c.log.Error("the bridge refused a reply and its error notice; not retrying", "id", inv.ID, "err", err)
			if err := c.db.Posted(keep, inv.ID, "", ledger.StatusFailed, "the bridge refused the reply and the error notice: "+ae.Message); err != nil {
				c.log.Error("record rejected reply", "id", inv.ID, "err", err)
			}
			return ledger.StatusFailed
		default:
			// Left pending in the ledger: the next run posts it.
			return status
		}
	}
	c.recordPosted(ctx, inv, last.ID, newStatus, note)
	return status
}

// conflictEnd ends a delivery the bridge answered with a 409 that no
// stand-in post follows: fenced (another coordinator took the run over:
// its reply stands, and this one is not retried) or refused (the
// participant was muted or the thread paused meanwhile). ok is false for
// any other error.
func (c *Coordinator) conflictEnd(ctx context.Context, inv ledger.Invocation, err error) (status string, ok bool) {
	var ae *agentbridge.Error
	switch {
	case c.claims.fenced(ctx, inv, err):
		return ledger.StatusElsewhere, true
	case errors.As(err, &ae) && ae.Status == http.StatusConflict && ae.Code != agentbridge.ECodeIdempotencyConflict:
		if err := c.db.Posted(context.WithoutCancel(ctx), inv.ID, "", ledger.StatusRefused, ae.Message); err != nil {
			c.log.Error("record refused reply", "id", inv.ID, "err", err)
		}
		return ledger.StatusRefused, true
	}
	return "", false
}

// recordPosted records the bridge's acknowledgement of a post, retried
// while the ledger refuses writes, so that the record does not go on
// showing a post owed that the bridge has (a restart would re-post it
// under its key, which the bridge answers with the same event).
func (c *Coordinator) recordPosted(ctx context.Context, inv ledger.Invocation, eventID, status, note string) {
	keep := context.WithoutCancel(ctx)
	if err := c.retry(ctx, retrying{what: "record the reply", attrs: []any{"id", inv.ID}, level: slog.LevelDebug}, func() error {
		err := c.db.Posted(keep, inv.ID, eventID, status, note)
		if err != nil {
			c.outage.failed("record a posted reply", err)
			return err
		}
		c.outage.ok()
		return nil
	}); err != nil {
		c.log.Warn("stopping before the reply's event id was recorded; the next start re-posts it under its key", "id", inv.ID, "err", err)
	}
}

// appendRetry appends in to the thread of invocation id with key, retrying transient failures until ctx
// ends. It returns the bridge's *agentbridge.Error for a permanent refusal
// and ctx's error when it gave up.
func (c *Coordinator) appendRetry(ctx context.Context, id int64, thread string, in agentbridge.EventInput, key string) (agentbridge.Event, error) {
	var ev agentbridge.Event
	err := c.retry(ctx, retrying{what: "post reply", attrs: []any{"id", id}, permanent: client.Permanent},
		func() (err error) {
			ev, err = c.bridge.Append(ctx, thread, in, key)
			return err
		})
	var ae *agentbridge.Error
	switch {
	case err == nil:
		return ev, nil
	case errors.As(err, &ae):
		return agentbridge.Event{}, ae
	default:
		return agentbridge.Event{}, err
	}
}

// replyKey is the idempotency key of an invocation's reply or error: one
// per (trigger, participant) outside party mode, one per round inside it.
func replyKey(inv ledger.Invocation) string {
	if inv.Round == 0 {
		return idempotencyKey(inv.TriggerID, inv.Participant)
	}
	return idempotencyKey(inv.TriggerID, fmt.Sprintf("%s\x00round %d", inv.Participant, inv.Round))
}

// idempotencyKey derives the key of the one post a (trigger, kind) pair may
// produce: kind is a participant id for replies and error messages (one key
// per pair, so a pair ends with exactly one of them) or a notice kind.
func idempotencyKey(trigger, kind string) string {
	sum := sha256.Sum256([]byte("agent-bridge\x00" + trigger + "\x00" + kind))
	return "coord-" + hex.EncodeToString(sum[:16])
}

// noteReply remembers the seq of a participant's reply (not of the
// coordinator's own notices), for sinceSpan. Best effort: without it the
// next read is only longer.
func (c *Coordinator) noteReply(ctx context.Context, ev agentbridge.Event) {
	if ev.Type != agentbridge.TypeMessage || ev.From == c.cfg.Load().CoordinatorID {
		return
	}
	if err := c.db.NoteReply(ctx, ev.Thread, ev.From, ev.Seq); err != nil {
		c.log.Warn("remember the last reply", "thread", ev.Thread, "participant", ev.From, "err", err)
	}
}
