package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/acp"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/registry"
)

// work carries out one job: the post a previous run of it left owed
// (resume, post.go), or its run (invoke).
func (c *Coordinator) work(ctx context.Context, j job) {
	if len(j.inv.PendingPost) > 0 {
		c.resume(ctx, j.inv)
		return
	}
	c.invoke(ctx, j)
}

// invoke runs one job to its end: the adapter, then the post of its reply
// or error message, each step recorded in the ledger first. ctx is the
// work context: cancelling it interrupts the adapter. It is gather (prepare),
// act (the runs, and the read a question's recipient needs), a pure plan of
// the outcome (planOutcome, plan.go), then act again (record, and the post:
// post.go).
func (c *Coordinator) invoke(ctx context.Context, j job) {
	inv := j.inv
	// Ledger writes must land even while the work context is being
	// cancelled, or a finished run would be re-run after restart.
	keep := context.WithoutCancel(ctx)
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
// when the pair's previous one has finished. It counts them itself rather
// than with a sync.WaitGroup: the availability loop may register an idle
// report while shutdown waits, and a WaitGroup's Add from zero must not
// race its Wait.
type presenceChain struct {
	mu     sync.Mutex
	last   map[pairKey]chan struct{} // closed when the pair's latest reporter ends
	active int                       // reporters registered and not finished
	ended  *sync.Cond                // signalled when active drops to 0; on mu
}

// add registers done as k's latest reporter. p.mu is held.
func (p *presenceChain) add(k pairKey, done chan struct{}) {
	if p.last == nil {
		p.last = make(map[pairKey]chan struct{})
	}
	p.last[k] = done
	p.active++
}

// next registers a reporter of k: it must wait for prev and close done
// through finish.
func (p *presenceChain) next(k pairKey) (prev <-chan struct{}, done chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	done = make(chan struct{})
	prev = p.last[k]
	if prev == nil {
		closed := make(chan struct{})
		close(closed)
		prev = closed
	}
	p.add(k, done)
	return prev, done
}

// finish ends a reporter of k, forgetting the pair when no later one is
// registered.
func (p *presenceChain) finish(k pairKey, done chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last[k] == done {
		delete(p.last, k)
	}
	close(done)
	if p.active--; p.active == 0 && p.ended != nil {
		p.ended.Broadcast()
	}
}

// wait returns when no reporter is active.
func (p *presenceChain) wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended == nil {
		p.ended = sync.NewCond(&p.mu)
	}
	for p.active > 0 {
		p.ended.Wait()
	}
}

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

// withClaim is ctx carrying inv's claim for the bridge writes of its run.
func withClaim(ctx context.Context, inv ledger.Invocation) context.Context {
	if inv.ClaimID == 0 {
		return ctx
	}
	return client.WithClaim(ctx, inv.ClaimID, inv.ClaimFence)
}
