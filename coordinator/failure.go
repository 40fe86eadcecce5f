package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/acp"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// When an agent cannot answer (contract 8.5, docs/failures.md). Every
// failed run is classified (failureOf). A run whose agent's service
// refused it (quota, auth) or could not be reached hands its trigger to
// the first agent of its entry's fallback chain that a live coordinator
// serves: the fallback is invited when it is not, a waiting claim of
// (trigger, fallback) is filed with fallback_from, and the run's post is
// the hand-over notice instead of an error; whichever coordinator serves
// the fallback takes the claim, at once when it sees the notice. A quota
// failure that says when the limit resets, with no fallback, puts the
// run's own claim back to waiting, due then: the run's record ends
// waiting, and a coordinator serving the participant takes it when due.

// MetaHandoff is the meta key of a hand-over notice: {"from", "to",
// "failure"}.
const MetaHandoff = "handoff"

// handoffMeta is a hand-over notice's meta.handoff.
type handoffMeta struct {
	From    string              `json:"from"`
	To      string              `json:"to"`
	Failure agentbridge.Failure `json:"failure"`
}

// failureOf classifies a run that did not succeed: the failure its
// adapter or agent reported (the progress fd), else what its result says
// (a timeout, a cancel), else the class its error text names, else crash.
func failureOf(run agentRun, o ledger.Outcome) *agentbridge.Failure {
	switch {
	case o.Status == ledger.StatusSucceeded, o.Status == ledger.StatusInterrupted, o.Status == ledger.StatusPassed:
		return nil
	case run.failure != nil:
		f := *run.failure
		return &f
	case o.Status == ledger.StatusCancelled:
		return &agentbridge.Failure{Class: agentbridge.FailureCancelled}
	case o.Status == ledger.StatusTimeout:
		return &agentbridge.Failure{Class: agentbridge.FailureTimeout}
	}
	text := run.why
	if text == "" {
		text = string(run.res.StderrTail)
	}
	return &agentbridge.Failure{Class: agentbridge.Classify(0, text), Message: agentbridge.Clip(oneLine(text), 300)}
}

// oneLine is the last non-empty line of s: where an agent's error text
// says what went wrong.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// fate is what becomes of a failed run's trigger: handed to a fallback,
// or waiting for the participant's limit until a time; zero: neither.
type fate struct {
	handTo string
	wait   time.Time
}

// settleFailure decides and starts what becomes of o's trigger when its
// run failed (see the top of this file): it invites the fallback and
// files its claim, or puts the run's claim back to waiting, and returns
// o with the post and status that go with it. Party rounds and scene
// steps keep their own failure paths.
func (c *Coordinator) settleFailure(ctx context.Context, cfg *config.Config, inv ledger.Invocation, in prepared, o ledger.Outcome) ledger.Outcome {
	if o.Failure == nil || o.Status != ledger.StatusFailed || inv.Round > 0 || in.scene != nil {
		return o
	}
	f := *o.Failure
	if f.HandsOver() {
		if to, ok := c.pickFallback(ctx, cfg, inv); ok {
			if err := c.handOver(ctx, cfg, inv, to); err == nil {
				return withFate(cfg, inv, o, fate{handTo: to})
			} else {
				c.log.Warn("cannot hand the trigger to the fallback; reporting the failure", "id", inv.ID, "fallback", to, "err", err)
			}
		}
	}
	if t, ok := f.Retry(); ok && f.Class == agentbridge.FailureQuota && t.After(time.Now()) && inv.ClaimID != 0 {
		if err := c.waitForLimit(ctx, cfg, inv, t); err == nil {
			return withFate(cfg, inv, o, fate{wait: t})
		} else {
			c.log.Warn("cannot wait for the usage limit at the bridge; reporting the failure", "id", inv.ID, "retry_at", f.RetryAt, "err", err)
		}
	}
	return o
}

// withFate is o once its trigger's fate is settled: a hand-over posts the
// hand-over notice instead of the error notice; a wait posts nothing, and
// the record ends waiting.
func withFate(cfg *config.Config, inv ledger.Invocation, o ledger.Outcome, ft fate) ledger.Outcome {
	switch {
	case ft.handTo != "":
		o.HandedTo = ft.handTo
		o.Posts = []agentbridge.EventInput{handoffPost(cfg, inv, ft.handTo, *o.Failure, time.Now())}
	case !ft.wait.IsZero():
		o.Status, o.Posts = ledger.StatusWaiting, nil
	}
	return o
}

// handoffPost is the notice saying that inv's participant could not
// answer and its fallback to answers instead; it is the pair's post, so
// it is posted once.
func handoffPost(cfg *config.Config, inv ledger.Invocation, to string, f agentbridge.Failure, now time.Time) agentbridge.EventInput {
	text := fmt.Sprintf("%s could not answer (%s); %s answers instead.", inv.Participant, f.Summary(now, time.Local), to)
	return agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: agentbridge.ToAll, Content: mustJSON(text),
		Meta: agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "handoff"},
			Extra: map[string]json.RawMessage{
				rules.MetaParticipant: mustJSON(inv.Participant),
				MetaHandoff:           mustJSON(handoffMeta{From: inv.Participant, To: to, Failure: f}),
			}},
	}
}

// pickFallback is the first agent of inv's entry's fallback chain that a
// live coordinator serves: this one (its config has the entry) or another
// (its registration lists it). The participant that handed inv's trigger
// over is skipped, so two agents never hand a trigger back and forth.
func (c *Coordinator) pickFallback(ctx context.Context, cfg *config.Config, inv ledger.Invocation) (string, bool) {
	chain := cfg.Agents[inv.Agent].Fallback
	if len(chain) == 0 {
		return "", false
	}
	c.registry.Refresh(ctx)
	for _, name := range chain {
		if name == inv.Participant || name == inv.FallbackFrom {
			continue
		}
		if _, ok := cfg.Agents[name]; ok {
			return name, true
		}
		if _, ok := c.registry.ClientOf(name); ok {
			return name, true
		}
	}
	return "", false
}

// fallbackClient is the client fallback to is served as: its entry's
// (client, else its profile's) here, else the one its registration names.
func (c *Coordinator) fallbackClient(cfg *config.Config, to string) string {
	if _, ok := cfg.Agents[to]; ok {
		return runClient(cfg, ledger.Invocation{Agent: to})
	}
	cl, _ := c.registry.ClientOf(to)
	return cl
}

// handOver invites fallback to into inv's thread when it is not invited
// (with its entry's profile, else its client), then files the waiting
// claim of (trigger, to) with fallback_from, and wakes this coordinator's
// claim poller, which takes the claim when it serves to.
func (c *Coordinator) handOver(ctx context.Context, cfg *config.Config, inv ledger.Invocation, to string) error {
	st, _, err := c.bridge.State(ctx, inv.Thread, 0)
	if err != nil {
		return fmt.Errorf("read the thread's state: %w", err)
	}
	cl := c.fallbackClient(cfg, to)
	if _, invited := st.Invited(to); !invited {
		// An entry that names no client serves the participant by its
		// name, which then stands for the client an invite needs.
		// A fallback whose model this coordinator does not know gets
		// "default": the agent's own choice (the shipped adapters then
		// pass no model).
		profile := agentbridge.Profile{Client: cmp.Or(cl, to), Model: acp.DefaultModel}
		if a, ok := cfg.Agents[to]; ok && a.Profile != nil {
			profile = *a.Profile
			profile.Client, profile.Model = cmp.Or(profile.Client, cl, to), cmp.Or(profile.Model, acp.DefaultModel)
		}
		ctl := mustJSON(map[string]any{"invite": map[string]any{"participant_id": to, "profile": profile}})
		in := agentbridge.EventInput{Type: agentbridge.TypeControl, From: cfg.CoordinatorID, To: agentbridge.ToAll, Content: ctl,
			Meta: agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "handoff"}}}
		if err := c.retry(ctx, retrying{what: "invite the fallback", attrs: []any{"fallback", to}, permanent: client.Permanent}, func() error {
			_, err := c.bridge.Append(ctx, inv.Thread, in, idempotencyKey(inv.TriggerID, "invite-fallback:"+to))
			return err
		}); err != nil {
			return fmt.Errorf("invite %s: %w", to, err)
		}
	}
	req := c.claims.request(cfg, ledger.Invocation{Thread: inv.Thread, TriggerID: inv.TriggerID, Participant: to}, cl)
	req.Wait, req.PendingTTLMillis, req.FallbackFrom = true, cfg.PendingTTL.Milliseconds(), inv.Participant
	if _, err := c.claims.claim(ctx, req); err != nil {
		return fmt.Errorf("claim the trigger for %s: %w", to, err)
	}
	c.log.Info("handed a trigger to the fallback", "id", inv.ID, "participant", inv.Participant, "fallback", to, "trigger", inv.TriggerID)
	c.claims.wake()
	return nil
}

// waitForLimit puts inv's claim back to waiting at the bridge, due at t,
// with the receipt saying so, and has the claim poller look again then.
func (c *Coordinator) waitForLimit(ctx context.Context, cfg *config.Config, inv ledger.Invocation, t time.Time) error {
	req := agentbridge.ClaimWaitRequest{ID: inv.ClaimID, Coordinator: cfg.CoordinatorID, Instance: c.registry.Instance(), Fence: inv.ClaimFence,
		RetryAt: t.UTC().Format(time.RFC3339Nano), PendingTTLMillis: cfg.PendingTTL.Milliseconds(),
		Reason: agentbridge.LimitWaitReason(inv.Participant, t, time.Now(), time.Local)}
	err := c.retry(ctx, retrying{what: "wait for the usage limit", attrs: []any{"id", inv.ID}, permanent: client.Permanent}, func() error {
		_, err := c.bridge.WaitClaim(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	c.log.Info("the run waits for the participant's usage limit", "id", inv.ID, "participant", inv.Participant, "until", t)
	c.claims.wakeAt(t)
	return nil
}

// noticeHandoff wakes the claim poller when e hands a trigger to an agent
// this coordinator serves: the fallback's claim waits at the bridge, and
// is taken now rather than at the next poll.
func (c *Coordinator) noticeHandoff(e agentbridge.Event) {
	raw, ok := e.Meta.Extra[MetaHandoff]
	if !ok || e.Type != agentbridge.TypeMessage {
		return
	}
	var h handoffMeta
	if json.Unmarshal(raw, &h) != nil {
		return
	}
	if _, served := c.cfg.Load().Agents[h.To]; served {
		c.claims.wake()
	}
}

// handoffOf finds, among a trigger's replies, the hand-over notice that
// handed it to participant: the one it comes from, "" for none.
func handoffOf(replies []agentbridge.Event, trigger, participant string) string {
	for _, e := range replies {
		raw, ok := e.Meta.Extra[MetaHandoff]
		if !ok || e.Meta.ReplyTo != trigger {
			continue
		}
		var h handoffMeta
		if json.Unmarshal(raw, &h) == nil && h.To == participant {
			return h.From
		}
	}
	return ""
}

// giveUp stops invocation id's run because its adapter reported that it
// failed (adapters.ErrGaveUp); a run not registered here is left alone.
func (r *runRegistry) giveUp(id int64) {
	r.mu.Lock()
	cancel := r.runs[id]
	r.mu.Unlock()
	if cancel != nil {
		cancel(adapters.ErrGaveUp)
	}
}

// receiptReason is the reason a pair's receipt gives for its failure:
// "handed to codex: quota until 15:04", or "quota until 15:04".
func receiptReason(p ledger.PairState, now time.Time) string {
	if p.Failure == nil {
		return ""
	}
	if p.HandedTo != "" {
		return agentbridge.HandedReason(p.HandedTo, *p.Failure, now, time.Local)
	}
	if p.Status == ledger.StatusCancelled || p.Status == ledger.StatusTimeout {
		return ""
	}
	return p.Failure.Summary(now, time.Local)
}
