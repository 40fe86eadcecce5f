package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// Claims at the bridge (contract 7.1, docs/delivery.md). Before a run's
// adapter or ACP turn starts, the coordinator claims the (trigger,
// participant, round) at the bridge: the first live claimant runs it, and
// every write of the run — reply or error post, receipts, presence —
// carries the claim's fence, which the bridge refuses once another
// coordinator has taken the claim over. A coordinator that does not hold
// the claim ends its record as elsewhere, without a run, a post or a
// receipt. The claims a lapsed holder left, and those filed for a
// participant nobody served, are taken over from Claimable.

// claimPollMin is the shortest time between two polls of Claimable: a
// small claim_ttl_s heartbeats often, and the poll need not follow it.
const claimPollMin = time.Second

// claimer is the coordinator's side of the claims; it is safe for
// concurrent use.
type claimer struct {
	deps
	claimHooks

	mu sync.Mutex
	// unsupported is set once the bridge answered that it keeps no
	// claims (404): the coordinator then runs every run unclaimed.
	unsupported bool
	// known is set once the bridge answered a claim: until then the
	// receipt reporter holds back the queued receipts of unclaimed runs.
	known bool
	// early holds the claims asked when their trigger was decided (askEarly),
	// by run, until the run takes its answer.
	early map[claimRun]chan claimAnswer
	// takes counts the failed take-overs of claims (takeover.go).
	takes takeFailures
	// poke wakes the claim poller (buffered 1: wake-ups coalesce).
	poke chan struct{}
}

// claimRun names one run's claim: its trigger, participant and round.
type claimRun struct {
	trigger, participant string
	round                int
}

// claimAnswer is the bridge's answer to a claim.
type claimAnswer struct {
	res agentbridge.ClaimResult
	err error
}

// maxEarly bounds the claims asked early whose runs have not taken them
// yet (runs cancelled while queued never do); past it they are dropped,
// and a run whose claim was dropped asks again, which the bridge answers
// the same way for the same process.
const maxEarly = 4096

// claimHooks is what the claimer uses of the rest of the coordinator.
type claimHooks struct {
	// instance is this process's instance (registry.Registrar.Instance),
	// sent with every claim.
	instance func() string
	// threads reads a thread as the follow loop does, for a claim taken
	// over to be decided again (takeover.go).
	threads threadReader
	// receipts hears of a run's claim recorded, and of a run taken over,
	// whose receipts follow the new run.
	receipts *receiptReporter
	// enqueue queues a run taken over (scheduler.go); takeNotice takes a
	// notice's claim over and posts the notice (partynotice.go).
	enqueue    func(job)
	takeNotice func(ctx context.Context, cl agentbridge.Claim)
}

// threadReader is the coordinator's reading of a thread that a claim
// taken over is decided again from: the state before its event, the
// party facts, and the replies after it.
type threadReader interface {
	stateBefore(ctx context.Context, e agentbridge.Event) (threadCache, error)
	partySelectionFacts(ctx context.Context, e agentbridge.Event, cfg *config.Config) (*rules.PartyFacts, error)
	repliesAfter(ctx context.Context, thread string, seq int64) ([]agentbridge.Event, error)
}

func newClaimer(d deps, hooks claimHooks) *claimer {
	return &claimer{deps: d, claimHooks: hooks, early: map[claimRun]chan claimAnswer{}, poke: make(chan struct{}, 1)}
}

// off reports whether the bridge keeps no claims.
func (k *claimer) off() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.unsupported
}

// settle records what the bridge's answer to a claim says of its support
// for claims; it returns whether claims are off.
func (k *claimer) settle(err error) (off bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil {
		k.known = true
		return false
	}
	if bridgeStatus(err, 404) || bridgeStatus(err, 405) {
		if !k.unsupported {
			k.log.Warn("the bridge keeps no claims (an older bridge?): runs are not claimed, and a second coordinator serving the same agent would run them too")
		}
		k.unsupported, k.known = true, true
	}
	return k.unsupported
}

// request is the claim of inv's run by this coordinator.
func (k *claimer) request(cfg *config.Config, inv ledger.Invocation, client string) agentbridge.ClaimRequest {
	return agentbridge.ClaimRequest{
		ClaimKey:    agentbridge.ClaimKey{Thread: inv.Thread, Event: inv.TriggerID, Participant: inv.Participant, Round: inv.Round},
		Coordinator: cfg.CoordinatorID, Instance: k.instance(), Client: client,
	}
}

// runClient is the client inv's run claims as, by which the bridge matches
// the claim to the coordinators serving it: its invited profile's, else
// the one its agent entry names.
func runClient(cfg *config.Config, inv ledger.Invocation) string {
	if inv.Profile != nil && inv.Profile.Client != "" {
		return inv.Profile.Client
	}
	a := cfg.Agents[inv.Agent]
	if a.Client == "" && a.Profile != nil {
		return a.Profile.Client
	}
	return a.Client
}

// claim asks the bridge for a claim, retrying transient failures (and a
// registration the bridge has not seen yet) until ctx ends.
func (k *claimer) claim(ctx context.Context, req agentbridge.ClaimRequest) (agentbridge.ClaimResult, error) {
	var res agentbridge.ClaimResult
	err := k.retry(ctx, retrying{what: "claim a run at the bridge", attrs: []any{"trigger", req.Event, "participant", req.Participant},
		level: slog.LevelDebug, permanent: func(err error) bool {
			var ae *agentbridge.Error
			return client.Permanent(err) && !(errors.As(err, &ae) && ae.Code == agentbridge.ECodeNotRegistered)
		}}, func() (err error) {
		res, err = k.bridge.Claim(ctx, req)
		return err
	})
	k.settle(err)
	return res, err
}

// askEarly asks the bridge for the claims of the runs a decision queues as
// soon as it is made, while the follow loop commits it and the scheduler
// starts the run: the claim's round trip then overlaps that work instead
// of adding to the wake path. Claiming before the ledger holds the record
// is safe: a process that stops in between leaves a claim that lapses
// with it (or that its next start, the same coordinator, takes over).
// On a ledger other coordinators share it does not: another may queue the
// pair first, and this one would then hold a claim it never runs.
func (k *claimer) askEarly(ctx context.Context, cfg *config.Config, invs []ledger.Invocation) {
	if len(invs) == 0 || k.off() || k.db.Shared() {
		return
	}
	for _, inv := range invs {
		req := k.request(cfg, inv, runClient(cfg, inv))
		ch := make(chan claimAnswer, 1)
		k.mu.Lock()
		if len(k.early) >= maxEarly {
			clear(k.early)
		}
		k.early[claimRun{inv.TriggerID, inv.Participant, inv.Round}] = ch
		k.mu.Unlock()
		go func() {
			res, err := k.bridge.Claim(ctx, req)
			ch <- claimAnswer{res, err}
		}()
	}
}

// answer is the bridge's answer to the claim of inv's run: the one asked
// early when it succeeded, else one asked now (with retries).
func (k *claimer) answer(ctx context.Context, req agentbridge.ClaimRequest, inv ledger.Invocation) (agentbridge.ClaimResult, error) {
	key := claimRun{inv.TriggerID, inv.Participant, inv.Round}
	k.mu.Lock()
	ch, ok := k.early[key]
	delete(k.early, key)
	k.mu.Unlock()
	if ok {
		select {
		case a := <-ch:
			if a.err == nil {
				k.settle(nil)
				return a.res, nil
			}
		case <-ctx.Done():
			return agentbridge.ClaimResult{}, ctx.Err()
		}
	}
	return k.claim(ctx, req)
}

// release finishes the claim asked early for inv's run when the run was
// cancelled while queued and so never takes it: a claim held by a live
// coordinator would otherwise stay running, and be taken over and run by
// another coordinator once this one stops.
func (k *claimer) release(ctx context.Context, inv ledger.Invocation) {
	key := claimRun{inv.TriggerID, inv.Participant, inv.Round}
	k.mu.Lock()
	ch, ok := k.early[key]
	delete(k.early, key)
	k.mu.Unlock()
	if !ok {
		return
	}
	select {
	case a := <-ch:
		if a.err == nil && a.res.Granted {
			k.finishClaim(ctx, a.res.Claim.ID, a.res.Claim.Fence)
		}
	case <-ctx.Done():
	}
}

// ask claims j's run in its own goroutine, so that the caller prepares
// the run meanwhile; the function it returns waits for the answer and
// returns what run does.
func (k *claimer) ask(ctx context.Context, j job) func() (ledger.Invocation, bool) {
	type answer struct {
		inv ledger.Invocation
		run bool
	}
	ch := make(chan answer, 1)
	go func() {
		inv, run := k.run(ctx, j)
		ch <- answer{inv, run}
	}()
	return func() (ledger.Invocation, bool) {
		a := <-ch
		return a.inv, a.run
	}
}

// run claims inv's run before it starts. It returns inv with its claim
// (recorded in the ledger), and whether to run it: not when another live
// coordinator holds the claim (the record ends elsewhere), nor when ctx
// ended first. Against a bridge without claims it runs unclaimed.
func (k *claimer) run(ctx context.Context, j job) (ledger.Invocation, bool) {
	inv := j.inv
	if k.off() {
		return inv, true
	}
	cfg := k.config()
	res, err := k.answer(ctx, k.request(cfg, inv, runClient(cfg, inv)), inv)
	switch {
	case err != nil && k.off():
		return inv, true
	case err != nil && ctx.Err() != nil:
		return inv, false
	case isCode(err, agentbridge.ECodeNoWorkspace):
		// The thread picked a workspace this coordinator lacks since the
		// run was decided: one that has it runs it.
		k.elsewhere(ctx, inv, "run elsewhere: "+err.Error())
		return inv, false
	case err != nil:
		// Refused for good, for a reason other than another holder: the
		// trigger is still answered.
		k.log.Warn("the bridge refused to claim a run; running it unclaimed", "id", inv.ID, "participant", inv.Participant, "err", err)
		return inv, true
	case !res.Granted:
		k.elsewhere(ctx, inv, heldBy(res.Claim))
		return inv, false
	}
	keep := context.WithoutCancel(ctx)
	inv.ClaimID, inv.ClaimFence = res.Claim.ID, res.Claim.Fence
	if err := k.db.SetClaim(keep, inv.ID, inv.ClaimID, inv.ClaimFence); err != nil {
		k.log.Warn("cannot record the run's claim; its receipts go without it", "id", inv.ID, "err", err)
	}
	if res.PreviousHost != "" {
		k.log.Info("took over a run whose coordinator went offline", "id", inv.ID, "participant", inv.Participant,
			"previous_host", res.PreviousHost, "fence", inv.ClaimFence)
	}
	k.receipts.wake()
	return inv, true
}

// wait files a waiting claim for s, a participant no live coordinator
// serves, so that a coordinator serving it later takes the trigger (up to
// pending_ttl_s). It returns false when the bridge keeps no claims or
// refused it: the caller then reports the skip itself.
func (k *claimer) wait(ctx context.Context, thread, event string, round int, s rules.Skip) (filed bool) {
	if k.off() {
		return false
	}
	cfg := k.config()
	req := k.request(cfg, ledger.Invocation{Thread: thread, TriggerID: event, Participant: s.Participant, Round: round}, s.Client)
	req.Wait, req.PendingTTLMillis = true, cfg.PendingTTL.Milliseconds()
	_, err := k.claim(ctx, req)
	switch {
	case err == nil:
		k.log.Info("nobody serves the participant; the trigger waits at the bridge", "thread", thread, "trigger", event,
			"participant", s.Participant, "pending_ttl", cfg.PendingTTL)
		return true
	case ctx.Err() != nil || k.off():
		return false
	default:
		k.log.Warn("the bridge refused a waiting claim; reporting the skip", "trigger", event, "participant", s.Participant, "err", err)
		return false
	}
}

// isCode reports whether err is the bridge's refusal with code.
func isCode(err error, code string) bool {
	var ae *agentbridge.Error
	return errors.As(err, &ae) && ae.Code == code
}

// heldBy says who holds a claim this coordinator was not granted.
func heldBy(cl agentbridge.Claim) string {
	switch cl.State {
	case agentbridge.ClaimDone:
		return fmt.Sprintf("run elsewhere: %s on %s answered it", cl.Coordinator, cl.Host)
	case agentbridge.ClaimExpired:
		return "run elsewhere: nobody served it within its pending time"
	}
	return fmt.Sprintf("run elsewhere: claimed by %s on %s (fence %d)", cl.Coordinator, cl.Host, cl.Fence)
}

// elsewhere ends inv's record without a run or a post.
func (k *claimer) elsewhere(ctx context.Context, inv ledger.Invocation, why string) {
	if err := k.db.Elsewhere(context.WithoutCancel(ctx), inv.ID, why); err != nil {
		k.log.Error("record a run left to another coordinator", "id", inv.ID, "err", err)
	}
	k.log.Info("invocation", "participant", inv.Participant, "thread", inv.Thread, "trigger", inv.TriggerID,
		"status", ledger.StatusElsewhere, "why", why)
}

// fenced reports whether err is the bridge's 409 fenced for a write of
// inv's run: another coordinator took the claim over, and nothing more of
// this run is posted. It then ends inv's record, logging it once.
func (k *claimer) fenced(ctx context.Context, inv ledger.Invocation, err error) bool {
	var ae *agentbridge.Error
	if !errors.As(err, &ae) || ae.Code != agentbridge.ECodeFenced {
		return false
	}
	k.log.Warn("another coordinator took this run over; its reply is not posted", "id", inv.ID,
		"participant", inv.Participant, "trigger", inv.TriggerID, "err", ae.Message)
	if err := k.db.Elsewhere(context.WithoutCancel(ctx), inv.ID, "fenced: "+ae.Message); err != nil {
		k.log.Error("record a fenced run", "id", inv.ID, "err", err)
	}
	return true
}

// finish tells the bridge that inv's claim is done, once its record is
// final and what it owed is posted; an unfinished one (interrupted, or a
// post still owed) keeps its claim for the next start or the next holder.
func (k *claimer) finish(ctx context.Context, id int64) {
	keep := context.WithoutCancel(ctx)
	inv, err := k.db.Invocation(keep, id)
	if err != nil || inv.ClaimID == 0 || len(inv.PendingPost) > 0 {
		return
	}
	switch inv.Status {
	case ledger.StatusQueued, ledger.StatusRunning, ledger.StatusInterrupted, ledger.StatusElsewhere, ledger.StatusWaiting:
		return
	}
	k.finishClaim(keep, inv.ClaimID, inv.ClaimFence)
}

// finishClaim marks a claim done, retrying briefly: a claim left running
// lapses with this coordinator and is then finished by the next holder,
// which finds the reply in the thread.
func (k *claimer) finishClaim(ctx context.Context, id, fence int64) {
	fctx, cancel := context.WithTimeout(ctx, claimFinishWait)
	defer cancel()
	cfg := k.config()
	err := k.retry(fctx, retrying{what: "finish a claim", attrs: []any{"claim", id}, level: slog.LevelDebug, permanent: client.Permanent},
		func() error {
			_, err := k.bridge.FinishClaim(fctx, id, fence, cfg.CoordinatorID, k.instance())
			return err
		})
	if err != nil {
		k.log.Debug("cannot finish a claim; it lapses with this coordinator", "claim", id, "err", err)
	}
}

// claimFinishWait bounds the retries of a claim's finish.
const claimFinishWait = 10 * time.Second

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
		if never, known := c.registry.NeverServed(ctx, p, cl); !known || !never {
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
	err = c.retry(ctx, retrying{what: "post the unserved notice", attrs: []any{"trigger", e.ID}, permanent: client.Permanent}, func() error {
		_, err := c.bridge.Append(wctx, e.Thread, in, idempotencyKey(e.ID, "notice:"+noticeUnserved+p))
		return err
	})
	if err != nil {
		c.log.Warn("cannot post the unserved notice", "trigger", e.ID, "participant", p, "err", err)
		return
	}
	c.claims.finishClaim(ctx, res.Claim.ID, res.Claim.Fence)
}
