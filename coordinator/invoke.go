package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// invoke runs one job to its end: the adapter, then the post of its reply
// or error message, each step recorded in the ledger first. ctx is the
// work context: cancelling it interrupts the adapter.
func (c *Coordinator) invoke(ctx context.Context, j job) {
	inv := j.inv
	// Ledger writes must land even while the work context is being
	// cancelled, or a finished run would be re-run after restart.
	keep := context.WithoutCancel(ctx)
	if len(inv.PendingPost) > 0 {
		if cur, err := c.db.Invocation(keep, inv.ID); err == nil && cur.Status == ledger.StatusCancelled {
			// Belt and braces: Finish never leaves a post owed by a
			// cancelled run, and no reply of one is ever posted.
			c.logInvocation(inv, ledger.StatusCancelled, 0)
			return
		}
		status := c.deliver(ctx, inv, inv.PendingPost, inv.Status)
		c.logInvocation(inv, status, 0)
		return
	}
	cfg := c.cfg.Load()
	ctx, stopRun, cancelled := c.registerRun(ctx, inv)
	defer stopRun()
	if cancelled {
		return
	}
	in, err := c.prepare(ctx, j, cfg)
	if err != nil {
		// Only a cancelled work context (or a cancel) stops prepare.
		if !errors.Is(context.Cause(ctx), adapters.ErrCancelled) {
			c.finishInterrupted(keep, inv, err)
		}
		return
	}
	var res adapters.Result
	var why string
	mon := c.startMonitor(keep, inv)
	stopPresence := c.presence(ctx, inv.Thread, inv.Participant, cfg.PresenceHeartbeat, mon)
	if in.startErr != nil {
		res = adapters.Result{ExitCode: -1, StartErr: in.startErr, Started: time.Now(), Finished: time.Now()}
	} else {
		res, why = c.runAgent(ctx, inv, in, in.p, in.payload, mon.record)
	}
	mon.stopMonitor()
	c.keepSession(keep, inv, in, mon.latestSession())
	o := ledger.Outcome{
		Started: res.Started, Finished: res.Finished,
		OutputBytes: res.StdoutBytes, StderrTail: string(res.StderrTail), ProgressBad: res.ProgressBad,
	}
	if res.PID != 0 {
		code := res.ExitCode
		o.ExitCode = &code
	}
	var post agentbridge.EventInput
	switch {
	case res.Cancelled:
		// The cancel already recorded the status; Finish keeps it.
		o.Status = ledger.StatusCancelled
		o.Error = cancelReason("")
	case res.Interrupted:
		o.Status = ledger.StatusInterrupted
		o.Error = adapters.ErrorMessage(res, cfg.AdapterTimeout)
	case res.OK() && in.scene != nil:
		res = c.sceneOutcome(ctx, cfg, inv, in, res, &o)
	case res.OK():
		post = c.replyOutcome(ctx, cfg, inv, in, string(res.Stdout), &o)
	default:
		o.Status = ledger.StatusFailed
		if res.TimedOut {
			o.Status = ledger.StatusTimeout
		}
		msg := adapters.ErrorMessage(res, cfg.AdapterTimeout)
		if why != "" {
			msg = why
		}
		o.Error = msg
		post = c.errorPost(cfg, inv, msg)
		if in.scene != nil && in.scene.step.Step == agentbridge.SceneStepTurn {
			// A turn that fails leaves the scene without its next
			// speech: the error notice closes it.
			post.Meta.Extra[agentbridge.MetaScene] = mustJSON(agentbridge.SceneMeta{Close: agentbridge.CloseError})
		}
	}
	if post.From != "" {
		post.Meta = withPartyMeta(post.Meta, inv)
		o.Post = mustJSON(post)
	}
	// Record the outcome and what is owed before posting it: a crash from
	// here on re-posts the same event instead of re-running the adapter.
	status := o.Status
	if err := c.db.Finish(keep, inv.ID, o); errors.Is(err, ledger.ErrCancelled) {
		// A cancel won the race with this finish: nothing is posted.
		status, o.Post = ledger.StatusCancelled, nil
	} else if err != nil {
		c.log.Error("record invocation outcome", "id", inv.ID, "err", err)
	}
	if len(o.Post) > 0 {
		status = c.deliver(ctx, inv, o.Post, o.Status)
	}
	stopPresence()
	if status != ledger.StatusCancelled {
		// A cancel is counted when it is made.
		c.metrics.observe(status, res.Finished.Sub(res.Started))
	}
	c.logInvocation(inv, status, res.Finished.Sub(res.Started))
}

func (c *Coordinator) logInvocation(inv ledger.Invocation, status string, d time.Duration) {
	c.log.Info("invocation", "participant", inv.Participant, "thread", inv.Thread, "trigger", inv.TriggerID,
		"status", status, "duration_ms", d.Milliseconds())
}

func (c *Coordinator) finishInterrupted(ctx context.Context, inv ledger.Invocation, cause error) {
	if err := c.db.SetStatus(ctx, inv.ID, ledger.StatusInterrupted, fmt.Sprintf("interrupted before the adapter started: %v", cause)); err != nil {
		c.log.Error("record interrupted invocation", "id", inv.ID, "err", err)
	}
	c.metrics.observe(ledger.StatusInterrupted, 0)
	c.logInvocation(inv, ledger.StatusInterrupted, 0)
}

// errorPost is the coordinator's message saying a participant's adapter
// failed. meta.participant names the pair, so recovery can tell whose error
// it is.
func (c *Coordinator) errorPost(cfg *Config, inv ledger.Invocation, msg string) agentbridge.EventInput {
	text := fmt.Sprintf("%s could not answer: %s", inv.Participant, msg)
	return agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: agentbridge.ToAll,
		Content: mustJSON(adapters.TruncateReply(text, cfg.MaxReplyChars)),
		Meta: agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "error"},
			Extra: map[string]json.RawMessage{metaParticipant: mustJSON(inv.Participant)}},
	}
}

// metaParticipant is the meta key naming the participant an error message
// is about.
const metaParticipant = "participant"

// prepared is everything needed to start one adapter.
type prepared struct {
	spec     adapters.Spec
	payload  []byte
	startErr error
	// scene is set for an actor's scene step; p is the payload before
	// encoding, for the correction run.
	scene *sceneRun
	p     adapters.Payload
	// trigger is the event being answered, for the directives.
	trigger agentbridge.Event
}

// prepare fetches the context window (and, for recovered jobs, the trigger
// and the participant's profile) and builds the adapter's spec and payload.
// Bridge errors are retried until ctx ends; only then is an error returned.
func (c *Coordinator) prepare(ctx context.Context, j job, cfg *Config) (prepared, error) {
	var p prepared
	err := c.retry(ctx, retrying{what: "prepare invocation", attrs: []any{"id", j.inv.ID},
		permanent: func(err error) bool { return bridgeStatus(err, http.StatusNotFound) }},
		func() (err error) {
			p, err = c.tryPrepare(ctx, j, cfg)
			return err
		})
	switch {
	case err == nil:
		return p, nil
	case ctx.Err() != nil:
		return prepared{}, ctx.Err()
	default:
		// The thread is gone: nothing to answer.
		return prepared{startErr: err}, nil
	}
}

func (c *Coordinator) tryPrepare(ctx context.Context, j job, cfg *Config) (prepared, error) {
	inv := j.inv
	// A warm ACP session needs no presence for its roster (acp.go).
	presence := c.payloadPresence(ctx, inv)
	n := cfg.ContextWindowSize
	var window []agentbridge.Event
	trigger := j.trigger
	// One read serves both the context window and since_last_turn; the
	// follow loop's recent events save it when they cover the span.
	sinceNeed, err := c.sinceSpan(ctx, inv)
	if err != nil {
		return prepared{}, err
	}
	span := max(n, sinceNeed)
	events, ok := c.recent.window(inv.Thread, inv.TriggerSeq, span, inv.TriggerID)
	if !ok {
		events, err = c.bridge.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{
			Thread: inv.Thread, After: -1, Until: inv.TriggerSeq, Tail: span,
		})
		if err != nil {
			return prepared{}, fmt.Errorf("read context window: %w", err)
		}
		if len(events) == 0 || events[len(events)-1].ID != inv.TriggerID {
			return prepared{}, fmt.Errorf("trigger %s not found at seq %d of thread %s", inv.TriggerID, inv.TriggerSeq, inv.Thread)
		}
	}
	if trigger == nil {
		trigger = &events[len(events)-1]
	}
	since := sinceLastTurn(events, inv.Participant)
	window = events[len(events)-min(n, len(events)):]
	profile := j.profile
	after := j.after
	if !j.hasProfile || after == nil {
		st, _, err := c.bridge.State(ctx, inv.Thread, inv.TriggerSeq)
		if err != nil {
			return prepared{}, fmt.Errorf("read thread state: %w", err)
		}
		after = &st
		if invite, ok := st.Invited(inv.Participant); ok && !j.hasProfile {
			profile = invite.Profile
		}
	}
	step, inScene := agentbridge.SceneStepFor(*after, *trigger, inv.Participant)
	window = agentbridge.VisibleTo(window, inv.Participant)
	if inScene {
		window = withoutControls(window)
		// The scene and invite controls hold every actor's brief and
		// character: an actor sees its own only, in its briefing.
		since = withoutControls(since)
	}
	name, err := c.threadName(ctx, inv.Thread)
	if err != nil {
		return prepared{}, err
	}
	agent, ok := cfg.Agents[inv.Agent]
	if !ok {
		return prepared{startErr: fmt.Errorf("the agent %q is no longer in the coordinator's config", inv.Agent)}, nil
	}
	if agent.Profile != nil && profile.Client == "" {
		profile = *agent.Profile
	}
	primer := c.readPrimer(cfg.PrimerPath, agentbridge.BuiltinPrimer())
	payload := adapters.NewPayload(cfg.BridgeURL, agentbridge.Thread{ID: inv.Thread, Name: name}, *trigger, inv.Participant, profile, window, primer)
	payload.SinceLastTurn = since
	if payload.Session, err = c.sessionFor(ctx, inv, profile.Client); err != nil {
		return prepared{}, err
	}
	payload.Participants = adapters.Roster(after.Participants.Invited, presence(), cfg.HumanIDs)
	if inv.Round > 0 {
		if err := c.partyPayload(ctx, inv, &payload); err != nil {
			return prepared{}, err
		}
		if inv.Round >= 2 {
			payload.SinceLastTurn = partySince(*trigger, payload.ContextWindow, inv.Participant)
		}
	}
	var scene *sceneRun
	if inScene {
		if scene, err = c.sceneBriefing(ctx, cfg, &payload, step, name); err != nil {
			return prepared{}, err
		}
	}
	var body []byte
	if len(agent.ACP) == 0 { // an ACP turn renders the payload itself
		if body, err = json.Marshal(payload); err != nil {
			return prepared{}, fmt.Errorf("encode payload: %w", err)
		}
	}
	keys := make([]string, 0, len(agent.Env))
	for k := range agent.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, 0, len(keys)+5)
	for _, k := range keys {
		env = append(env, k+"="+agent.Env[k])
	}
	env = append(env, adapters.BridgeEnv(payload)...)
	env = append(env, adapters.EnvAgentBridgeBin+"="+c.exe)
	return prepared{
		spec:    adapters.Spec{Command: c.command(agent.Command), Dir: agent.Cwd, Env: env, Timeout: cfg.AdapterTimeout},
		payload: body,
		scene:   scene,
		p:       payload,
		trigger: *trigger,
	}, nil
}

// readPrimer reads a primer file at use, so that edits to it apply to the
// next invocation without a reload. A path naming no file (a coordinator
// started away from the repository's docs/) gives the primer built into the
// binary; an empty path gives none.
func (c *Coordinator) readPrimer(path, builtin string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return builtin
	case err != nil:
		c.log.Warn("cannot read primer; using the built-in one", "path", path, "err", err)
		return builtin
	}
	return string(b)
}

// command is an agent's argv with SelfCommand replaced by this binary.
func (c *Coordinator) command(argv []string) []string {
	if len(argv) == 0 || argv[0] != SelfCommand {
		return argv
	}
	return append([]string{c.exe}, argv[1:]...)
}

// deliver posts a reply or error message with the pair's idempotency key,
// retrying transient failures until ctx ends, and records the result. It
// returns the invocation's final status: refused when the bridge answers
// 409 (the participant was muted or the thread paused meanwhile). post is
// one EventInput, or an array of them (a scene turn's thinking, then its
// speech) posted in order, each under its own key: the last one under the
// pair's key, so recovery finds the pair's reply as for any other.
func (c *Coordinator) deliver(ctx context.Context, inv ledger.Invocation, post json.RawMessage, status string) string {
	keep := context.WithoutCancel(ctx)
	var posts []agentbridge.EventInput
	var err error
	if trimmed := bytes.TrimSpace(post); len(trimmed) > 0 && trimmed[0] == '[' {
		err = json.Unmarshal(post, &posts)
	} else {
		var in agentbridge.EventInput
		err = json.Unmarshal(post, &in)
		posts = []agentbridge.EventInput{in}
	}
	if err != nil || len(posts) == 0 {
		c.log.Error("decode pending post", "id", inv.ID, "err", err)
		_ = c.db.Posted(keep, inv.ID, "", "", fmt.Sprintf("the pending post could not be decoded: %v", err))
		return status
	}
	var last agentbridge.Event
	var note, newStatus string // what a refused part changed (refused.go)
	for i, in := range posts {
		// A post recorded before the bridge assigned hops carries the one
		// the coordinator stamped then, which the bridge now refuses.
		in.Meta.Hop = nil
		key := replyKey(inv)
		if i < len(posts)-1 {
			key = idempotencyKey(inv.TriggerID, inv.Participant+"\x00part"+strconv.Itoa(i))
		}
		ev, err := c.appendRetry(ctx, inv, in, key)
		if err == nil {
			last = ev
			c.noteReply(keep, ev)
			continue
		}
		var ae *agentbridge.Error
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusConflict:
			if err := c.db.Posted(keep, inv.ID, "", ledger.StatusRefused, ae.Message); err != nil {
				c.log.Error("record refused reply", "id", inv.ID, "err", err)
			}
			return ledger.StatusRefused
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
	if err := c.db.Posted(keep, inv.ID, last.ID, newStatus, note); err != nil {
		c.log.Error("record reply", "id", inv.ID, "err", err)
	}
	return status
}

// appendRetry appends in with key, retrying transient failures until ctx
// ends. It returns the bridge's *agentbridge.Error for a permanent refusal
// and ctx's error when it gave up.
func (c *Coordinator) appendRetry(ctx context.Context, inv ledger.Invocation, in agentbridge.EventInput, key string) (agentbridge.Event, error) {
	var ev agentbridge.Event
	err := c.retry(ctx, retrying{what: "post reply", attrs: []any{"id", inv.ID}, permanent: refusedForGood},
		func() (err error) {
			ev, err = c.bridge.Append(ctx, inv.Thread, in, key)
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

// postNotice posts a clarification or loop-guard notice once, with its own
// idempotency key, retrying transient failures until ctx ends.
func (c *Coordinator) postNotice(ctx context.Context, n ledger.Notice) {
	keep := context.WithoutCancel(ctx)
	var in agentbridge.EventInput
	if err := json.Unmarshal(n.Post, &in); err != nil {
		c.log.Error("decode notice", "trigger", n.TriggerID, "err", err)
		_ = c.db.NoticePosted(keep, n.TriggerID, n.Kind, "")
		return
	}
	in.Meta.Hop = nil // recorded before the bridge assigned hops (see deliver)
	key := idempotencyKey(n.TriggerID, "notice:"+n.Kind)
	var ev agentbridge.Event
	err := c.retry(ctx, retrying{what: "post notice", attrs: []any{"trigger", n.TriggerID}, permanent: refusedForGood},
		func() (err error) {
			ev, err = c.bridge.Append(ctx, n.Thread, in, key)
			return err
		})
	switch {
	case err == nil:
	case refusedForGood(err):
		c.log.Warn("the bridge refused a notice; not retrying", "trigger", n.TriggerID, "kind", n.Kind, "err", err)
	default:
		return // ctx ended: the notice stays pending
	}
	if err := c.db.NoticePosted(keep, n.TriggerID, n.Kind, ev.ID); err != nil {
		c.log.Error("record notice", "trigger", n.TriggerID, "err", err)
	}
}

// presence reports the participant as thinking from presenceDelay on and
// every heartbeat until the returned function is called, which has it
// report listening (and available, see available.go). Presence is best effort (failures are logged at debug
// level only) and off the wake path: the reports are sent from their own
// goroutine, a run that ends within presenceDelay (no one could have seen
// it thinking) sends only the listening report, after its reply, and the
// returned function does not wait for that report, so the pair's next
// trigger is not held up by it. The pair's reports stay in order: a run's
// first report waits until the previous run's last one is sent.
//
// While thinking, the details carry the latest progress status of mon
// (nil for none), updated when it changes but at most every
// presenceMinInterval.
func (c *Coordinator) presence(ctx context.Context, thread, participant string, heartbeat time.Duration, mon *runMonitor) func() {
	stop := make(chan struct{})
	set := func(st string) {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		in := agentbridge.PresenceInput{From: participant, State: st}
		switch st {
		case agentbridge.PresenceThinking:
			in.Details = presenceDetails(mon)
		case agentbridge.PresenceListening:
			// Done, and ready for the next trigger (available.go).
			in.Details = availableDetails(c.cfg.Load().CoordinatorID)
		}
		if err := c.bridge.SetPresence(pctx, thread, in); err != nil {
			c.log.Debug("set presence", "participant", participant, "thread", thread, "state", st, "err", err)
		}
	}
	if heartbeat <= 0 {
		heartbeat = 10 * time.Second
	}
	prev, done := c.presences.next(pairKey{thread, participant})
	go func() {
		defer c.presences.finish(pairKey{thread, participant}, done)
		<-prev
		delay := time.NewTimer(presenceDelay)
		defer delay.Stop()
		select {
		case <-delay.C:
		case <-stop:
			set(agentbridge.PresenceListening)
			return
		}
		set(agentbridge.PresenceThinking)
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		var statusCh <-chan struct{}
		if mon != nil {
			statusCh = mon.statusCh
		}
		for {
			select {
			case <-t.C:
				set(agentbridge.PresenceThinking)
			case <-statusCh:
				set(agentbridge.PresenceThinking)
				// The rate limit: later changes wait, and the next
				// update carries the latest of them.
				select {
				case <-time.After(presenceMinInterval):
				case <-stop:
					set(agentbridge.PresenceListening)
					return
				}
			case <-stop:
				set(agentbridge.PresenceListening)
				return
			}
		}
	}()
	return func() { close(stop) }
}

// presenceChain orders each pair's presence reporters: a reporter starts
// when the pair's previous one has finished.
type presenceChain struct {
	mu   sync.Mutex
	last map[pairKey]chan struct{} // closed when the pair's latest reporter ends
	wg   sync.WaitGroup
}

// next registers a reporter of k: it must wait for prev and close done
// through finish.
func (p *presenceChain) next(k pairKey) (prev <-chan struct{}, done chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = make(map[pairKey]chan struct{})
	}
	done = make(chan struct{})
	prev = p.last[k]
	if prev == nil {
		closed := make(chan struct{})
		close(closed)
		prev = closed
	}
	p.last[k] = done
	p.wg.Add(1)
	return prev, done
}

// finish ends a reporter of k, forgetting the pair when no later one is
// registered.
func (p *presenceChain) finish(k pairKey, done chan struct{}) {
	p.mu.Lock()
	if p.last[k] == done {
		delete(p.last, k)
	}
	p.mu.Unlock()
	close(done)
	p.wg.Done()
}

// wait returns when every reporter has ended.
func (p *presenceChain) wait() { p.wg.Wait() }
