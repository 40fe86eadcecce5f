package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/acp"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/registry"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// invoke runs one job to its end: the adapter, then the post of its reply
// or error message, each step recorded in the ledger first. ctx is the
// work context: cancelling it interrupts the adapter. It is gather (prepare),
// act (the runs, and the read a question's recipient needs), a pure plan of
// the outcome (planOutcome), then act again (record and post).
func (c *Coordinator) invoke(ctx context.Context, j job) {
	inv := j.inv
	// Ledger writes must land even while the work context is being
	// cancelled, or a finished run would be re-run after restart.
	keep := context.WithoutCancel(ctx)
	if len(inv.PendingPost) > 0 {
		c.deliverPending(withClaim(ctx, inv), inv)
		c.claims.finish(keep, inv.ID)
		return
	}
	cfg := c.cfg.Load()
	work := ctx
	ctx, stopRun, cancelled := c.registerRun(ctx, inv)
	defer stopRun()
	if cancelled {
		return
	}
	// The claim comes before the adapter or ACP turn starts: only its
	// holder runs, and every write of the run carries its fence. It is
	// asked while the run is prepared (reads only), so the wake path waits
	// for the slower of the two rather than for both.
	claimed := c.claims.ask(ctx, j)
	// The run's agent token: the pair's spare, made ahead, or one minted
	// while the run is prepared; either way the wake path does not wait
	// for the bridge's write.
	tok := c.runToken(ctx, cfg, inv)
	in, err := c.prepare(ctx, j, cfg)
	inv, run := claimed()
	if !run {
		c.tokens.revoke(tok)
		return
	}
	ctx = withClaim(ctx, inv)
	if err != nil {
		c.tokens.revoke(tok)
		// Only a cancelled work context (or a cancel) stops prepare.
		if !errors.Is(context.Cause(ctx), adapters.ErrCancelled) {
			c.finishInterrupted(keep, inv, err)
		}
		return
	}
	in.token = tok
	c.beginWorkspace(keep, inv, cfg, &in)
	defer in.tree.done()
	defer c.fetchAttachments(ctx, inv, &in)()
	mon := c.startMonitor(keep, inv)
	stopPresence := c.presence(ctx, inv.Thread, inv.Participant, cfg.PresenceHeartbeat, mon)
	first := c.firstRun(ctx, inv, in, mon)
	mon.stopMonitor()
	if first.res.GaveUp {
		// The run was stopped because its adapter reported that it
		// failed, not the invocation: what it owes is still posted.
		ctx = withClaim(work, inv)
	}
	c.keepSession(keep, inv, in, mon.latestSession())
	var correction *agentRun
	var correctionTok *agentToken
	if p, body, ok := correctionPayload(in, first.res); ok {
		// The first run's progress monitor has stopped; the correction
		// run reports no progress. It is a run of its own, with a token
		// of its own.
		correctionTok = c.runToken(ctx, cfg, inv)
		in.token = correctionTok
		res, why := c.runAgent(ctx, inv, in, p, body, nil)
		correction = &agentRun{res: res, why: why}
	}
	to := c.questionTo(ctx, cfg, inv, in, first.res)
	o := planOutcome(cfg, inv, in, first, correction, to)
	c.ws.commit(keep, inv, in.tree, &o)
	in.tree.done()
	o = c.settleFailure(ctx, cfg, inv, in, o)
	last := first.res
	if correction != nil {
		last = correction.res
	}
	status := c.record(ctx, inv, o)
	// The runs' tokens are revoked, and the pair's next one is made
	// ahead, once the reply is in: the reply does not wait behind those
	// writes on the bridge.
	c.tokens.revoke(tok)
	c.tokens.revoke(correctionTok)
	c.nextRunToken(keep, cfg, inv)
	stopPresence()
	if status != ledger.StatusCancelled {
		// A cancel is counted when it is made.
		c.metrics.observe(status, last.Finished.Sub(last.Started))
	}
	c.metrics.failed(inv.Participant, o.Failure)
	c.logInvocation(inv, status, last.Finished.Sub(last.Started))
	c.claims.finish(keep, inv.ID)
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

// agentRun is one run of an agent: its result and, when not empty, the
// sentence for the thread when it failed in a way adapters.ErrorMessage
// cannot word.
type agentRun struct {
	res adapters.Result
	why string
	// failure is the one the adapter or agent reported on its progress
	// fd, nil when it reported none.
	failure *agentbridge.Failure
}

// firstRun runs the prepared adapter, or gives the result of one that
// could not be prepared.
func (c *Coordinator) firstRun(ctx context.Context, inv ledger.Invocation, in prepared, mon *runMonitor) agentRun {
	if in.startErr != nil {
		return agentRun{res: adapters.Result{ExitCode: -1, StartErr: in.startErr, Started: time.Now(), Finished: time.Now()}, why: in.why}
	}
	res, why := c.runAgent(ctx, inv, in, in.p, in.payload, mon.record)
	return agentRun{res: res, why: why, failure: mon.reportedFailure()}
}

// record writes the outcome and what is owed before posting it (a crash
// from here on re-posts the same event instead of re-running the adapter),
// then posts it. It returns the invocation's final status.
func (c *Coordinator) record(ctx context.Context, inv ledger.Invocation, o ledger.Outcome) string {
	status := o.Status
	keep := context.WithoutCancel(ctx)
	err := c.retry(ctx, retrying{what: "record the outcome", attrs: []any{"id", inv.ID}, level: slog.LevelDebug,
		permanent: func(err error) bool { return errors.Is(err, ledger.ErrCancelled) }}, func() error {
		err := c.db.Finish(keep, inv.ID, o)
		if err != nil && !errors.Is(err, ledger.ErrCancelled) {
			c.outage.failed("record an invocation's outcome", err)
			return err
		}
		c.outage.ok()
		return err
	})
	switch {
	case errors.Is(err, ledger.ErrCancelled):
		// A cancel won the race with this finish: nothing is posted.
		status, o.Posts = ledger.StatusCancelled, nil
	case err != nil:
		// The coordinator is stopping with the outcome unrecorded:
		// nothing is posted, and the next start runs the invocation
		// again (its record is still running).
		c.log.Warn("stopping before the outcome could be recorded; the next start runs it again", "id", inv.ID, "err", err)
		return ledger.StatusInterrupted
	}
	if len(o.Posts) > 0 {
		status = c.deliver(ctx, inv, o.Posts, o.Status)
	}
	return status
}

// outcomeOf is what an agent run's result says of the invocation: the
// ledger outcome's times, output and status (succeeded for a run that
// worked, whose post the caller adds) and its error text. Invocations,
// scene correction runs and ACP turns all end through it.
func outcomeOf(run agentRun, timeout time.Duration) ledger.Outcome {
	res := run.res
	o := ledger.Outcome{
		Started: res.Started, Finished: res.Finished,
		OutputBytes: res.StdoutBytes, StderrTail: string(res.StderrTail), ProgressBad: res.ProgressBad,
	}
	if res.PID != 0 {
		code := res.ExitCode
		o.ExitCode = &code
	}
	switch {
	case res.Cancelled:
		// The cancel already recorded the status; Finish keeps it.
		o.Status, o.Error = ledger.StatusCancelled, cancelReason("")
	case res.Interrupted:
		o.Status, o.Error = ledger.StatusInterrupted, adapters.ErrorMessage(res, timeout)
	case res.OK():
		o.Status = ledger.StatusSucceeded
	default:
		o.Status = ledger.StatusFailed
		if res.TimedOut {
			o.Status = ledger.StatusTimeout
		}
		o.Error = cmp.Or(run.why, adapters.ErrorMessage(res, timeout))
		if run.failure != nil && run.failure.Message != "" {
			// The adapter said why (a usage limit it stopped at, say):
			// that comes first, the exit status and stderr after.
			o.Error = run.failure.Message + "\n\n" + o.Error
		}
	}
	o.Failure = failureOf(run, o)
	return o
}

// planOutcome decides, without I/O, what an invocation's runs come to: the
// ledger outcome and the post it owes (a reply, a scene step's events, an
// error notice, or nothing). questionTo is the recipient of a question
// directive (questionTo read it).
func planOutcome(cfg *config.Config, inv ledger.Invocation, in prepared, first agentRun, correction *agentRun, questionTo string) ledger.Outcome {
	o := outcomeOf(first, cfg.AdapterTimeout)
	var post agentbridge.EventInput
	switch o.Status {
	case ledger.StatusCancelled, ledger.StatusInterrupted:
	case ledger.StatusSucceeded:
		if in.scene != nil {
			sceneOutcome(cfg, inv, in.scene, first.res, correction, &o)
			return o
		}
		post = replyPost(cfg, inv, string(first.res.Stdout), questionTo, &o)
	default:
		post = errorPost(cfg, inv, o.Error)
		if in.scene != nil && in.scene.step.Step == agentbridge.SceneStepTurn {
			// A turn that fails leaves the scene without its next
			// speech: the error notice closes it.
			post.Meta.Extra[agentbridge.MetaScene] = mustJSON(agentbridge.SceneMeta{Close: agentbridge.CloseError})
		}
	}
	if post.From != "" {
		post.Meta = withPartyMeta(post.Meta, inv)
		o.Posts = []agentbridge.EventInput{post}
	}
	return o
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
func errorPost(cfg *config.Config, inv ledger.Invocation, msg string) agentbridge.EventInput {
	text := fmt.Sprintf("%s could not answer: %s", inv.Participant, msg)
	return agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: agentbridge.ToAll,
		Content: mustJSON(adapters.TruncateReply(text, cfg.MaxReplyChars)),
		Meta: agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "error"},
			Extra: map[string]json.RawMessage{rules.MetaParticipant: mustJSON(inv.Participant)}},
	}
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
			in.Details = presenceDetails(mon, registry.HostName(c.cfg.Load()))
		case agentbridge.PresenceListening:
			// Done, and ready for the next trigger (available.go).
			in.Details = availableDetails(c.cfg.Load())
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

// runAgent runs one turn of the invocation's agent: the adapter, or for an
// "acp" entry a session/prompt on the pair's warm agent. p is the adapter
// payload and body its encoding. why, when not empty, is the sentence for the thread
// when the run failed in a way adapters.ErrorMessage cannot word.
func (c *Coordinator) runAgent(ctx context.Context, inv ledger.Invocation, in prepared, p adapters.Payload, body []byte, progress func(adapters.ProgressRecord)) (res adapters.Result, why string) {
	cfg := c.cfg.Load()
	entry, ok := cfg.Agents[inv.Agent]
	if !ok || len(entry.ACP) == 0 {
		spec := in.spec
		spec.Progress = progress
		// The coordinator's credential never reaches the adapter; the
		// run's own agent token does (agenttoken.go).
		spec.Secrets = []string{cfg.BridgeToken}
		spec.Env = append(slices.Clip(spec.Env), agentEnv(in.token.wait())...)
		return adapters.Run(ctx, spec, body, func(pid, pgid int) {
			if err := c.db.MarkRunning(context.WithoutCancel(ctx), inv.ID, pid, pgid, time.Now()); err != nil {
				c.log.Error("record adapter start", "id", inv.ID, "err", err)
			}
		}), ""
	}
	if in.tree != nil {
		// The session works in the pair's worktree (its cwd).
		entry.Workdir = in.tree.tree.Path
	}
	return c.acp.Run(ctx, acp.Run{Invocation: acpInvocation(inv), Entry: entry, Payload: p, Trigger: in.trigger,
		Known: in.p.ContextWindow, Scene: in.scene != nil, Progress: progress})
}
