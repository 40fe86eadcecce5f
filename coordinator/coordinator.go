package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/acp"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/internal/cache"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/registry"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
)

// Startup modes (config key startup_mode).
const (
	StartupEnd    = "end"
	StartupResume = "resume"
)

// Options configures a Coordinator.
type Options struct {
	// Config is the initial configuration, already loaded and valid.
	Config config.Config
	// ConfigPath, when set, is watched: a valid edit replaces the running
	// configuration without a restart (bridge_url, bridge_token and
	// status_addr are read at start-up only).
	ConfigPath string
	// State is the ledger; the caller opens and closes it.
	State *ledger.DB
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Executable is the agent-bridge binary adapters may call back into
	// (AGENT_BRIDGE_BIN); it defaults to os.Executable().
	Executable string
	// RequestTimeout bounds the arrival of a status API request's headers
	// and body (10 s by default); tests shorten it.
	RequestTimeout time.Duration
	// Version is the binary's version, registered with the bridge.
	Version string
	// ACPDir holds the per-thread session folders of ACP agents without a
	// workdir; it defaults to a folder in the user's cache.
	ACPDir string
	// AttachmentDir holds each run's copies of its attachments, a folder
	// per run removed when it ends (attachments.go); it defaults to a
	// folder of the coordinator id in the user's cache.
	AttachmentDir string
	// WorktreeDir holds the workspaces' worktrees, one folder per thread
	// (contract 8.1); it defaults to a folder in the user's cache.
	WorktreeDir string
}

// Coordinator follows the bridge's event log and turns trigger events into
// adapter invocations, exactly once per (trigger, participant) pair. Create
// it with New, run it with Run; Config, StatusURL, Reload and SkipGrace are
// safe to call from any goroutine while it runs.
type Coordinator struct {
	// deps is the ledger, the client, the config getter (cfg.Load) and
	// the log, which the helpers below are handed too.
	deps
	cfg  atomic.Pointer[config.Config]
	exe  string
	path string
	// attDir is where runs' attachment copies go (runAttachmentDir).
	attDir string

	watcher *config.Watcher
	metrics *metrics
	sched   *scheduler
	// receipts reports each considered pair's state to the bridge
	// (receipts.go).
	receipts  *receiptReporter
	statusLn  net.Listener
	statusSrv *http.Server
	// guard is the status API's security gate (status.NewGuard).
	guard *httpguard.Guard

	// cursor is the gseq of the last event committed to the ledger, for
	// the lag gauge.
	cursor atomic.Int64
	// following turns true once the start cursor is settled: from then
	// on every event appended to the bridge will be processed.
	following atomic.Bool
	// ready is closed the first time following turns true (Ready).
	ready     chan struct{}
	readyOnce sync.Once
	// skipGrace cancels the work context (set by Run).
	skipGrace atomic.Pointer[context.CancelFunc]

	// threads caches the folded state of the threads met most recently.
	threads *cache.LRU[threadCache]
	// staged is what the follow loop decided and has not committed yet
	// (process, flush); only the follow loop touches it.
	staged []staged
	// runs holds the cancel functions of the invocations being worked on.
	runs *runRegistry
	// recent keeps the last events of the threads met most recently, for
	// context windows.
	recent *cache.Recent
	// presences orders each pair's presence reports (invoke.go).
	presences presenceChain
	// rosterPresence keeps the threads' presence from the stream, for
	// the payload's roster.
	rosterPresence *cache.Presence
	// avail reports the participants it can start as available
	// (available.go).
	avail *availability
	// acp keeps the warm ACP agents (coordinator/acp, acphost.go).
	acp *acp.Pool
	// tokens mints and revokes the agents' own tokens (agenttoken.go).
	tokens *tokenKeeper
	// outage logs the edges of a time the ledger refuses writes.
	outage *ledgerOutage
	// registry registers with the bridge and heartbeats.
	registry *registry.Registrar
	// claims claims runs at the bridge and takes over those left
	// (claims.go, takeover.go).
	claims *claimer
	// ws makes the worktrees, commits the runs' changes and merges them
	// (workspaces.go).
	ws *workspaces
}

// threadCache is a thread's derived state as of seq.
type threadCache struct {
	seq   int64
	state agentbridge.ThreadState
	name  string
	// done is the thread's cursor in the ledger (the seq of its last
	// processed event, 0 for none) when known is set: the follow loop
	// read or committed it, and nothing else writes it while this
	// coordinator runs (a new lease term starts a new Coordinator). It
	// saves decide a ledger read per event.
	done  int64
	known bool
}

// maxCachedThreads bounds the threads whose folded state the coordinator
// keeps. Threads are never deleted, so a cache of every thread met would
// grow for the daemon's whole life; a thread that falls out costs two
// reads from the bridge (its state and its name) when it speaks again.
const maxCachedThreads = 1024

// New checks the options and binds the status server's listener, so that an
// address already in use is reported before anything runs.
func New(opts Options) (*Coordinator, error) {
	if opts.State == nil {
		return nil, errors.New("coordinator: no state db")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	exe := opts.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find own executable: %w", err)
		}
	}
	cfg := opts.Config
	var copts []client.Option
	if cfg.BridgeToken != "" {
		copts = append(copts, client.WithToken(cfg.BridgeToken))
	}
	c := &Coordinator{
		exe:     exe,
		path:    opts.ConfigPath,
		attDir:  defaultAttachmentDir(opts.AttachmentDir, cfg.CoordinatorID),
		threads: cache.NewLRU[threadCache](maxCachedThreads),
		runs:    newRunRegistry(),
		recent:  cache.NewRecent(),
		ready:   make(chan struct{}),

		rosterPresence: cache.NewPresence(time.Now),
	}
	c.cfg.Store(&cfg)
	c.deps = deps{db: opts.State, bridge: client.New(cfg.BridgeURL, copts...), config: c.cfg.Load,
		log: log.With("component", "coordinator")}
	c.outage = &ledgerOutage{log: c.log}
	c.metrics = newMetrics(c.bridge, &c.cursor)
	c.sched = newScheduler(c.deps, c.metrics.queueDepth, schedulerRuns{invoke: c.work, advance: c.partyAdvance, notice: c.postNotice})
	c.avail = newAvailability(c.bridge, c.cfg.Load, c.log, &c.presences)
	c.registry = registry.New(registry.Options{Bridge: c.bridge, Config: c.cfg.Load, StatusURL: c.StatusURL, Version: opts.Version, Logger: c.log})
	c.claims = newClaimer(c.deps, claimHooks{instance: c.registry.Instance, threads: c,
		enqueue: c.sched.enqueue, takeNotice: c.takeNoticeClaim})
	c.receipts = newReceiptReporter(c.deps, c.metrics.reg, c.registry, c.claims)
	// The two hear of each other: a claim recorded wakes the reporter,
	// which asks the claimer whether runs are claimed.
	c.claims.receipts = c.receipts
	c.acp = acp.New(acp.Options{Host: acpHost{c}, Config: c.cfg.Load, Dir: opts.ACPDir, Executable: exe,
		Logger: c.log, Registerer: c.metrics.reg})
	c.tokens = &tokenKeeper{bridge: c.bridge, config: c.cfg.Load, log: c.log}
	wtDir, err := worktreeDir(opts.WorktreeDir)
	if err != nil {
		return nil, err
	}
	c.ws = newWorkspaces(c.deps, wtDir, c.sched)
	if opts.ConfigPath != "" {
		c.watcher = config.NewWatcher(opts.ConfigPath, c.log, c.applyConfig)
	}
	if cfg.StatusAddr != "" {
		g, err := status.NewGuard(cfg, opts.RequestTimeout)
		if err != nil {
			return nil, err
		}
		c.guard = g
		ln, err := net.Listen("tcp", cfg.StatusAddr)
		if err != nil {
			return nil, fmt.Errorf("status server: listen on %s: %w", cfg.StatusAddr, err)
		}
		c.statusLn = ln
	}
	return c, nil
}

// Config returns the configuration in effect.
func (c *Coordinator) Config() *config.Config { return c.cfg.Load() }

// StatusURL is the status server's base URL (empty without one), for tests
// and for "up" to print.
func (c *Coordinator) StatusURL() string {
	if c.statusLn == nil {
		return ""
	}
	return "http://" + c.statusLn.Addr().String()
}

// Reload re-reads the config file now (SIGHUP); a no-op without one.
func (c *Coordinator) Reload() {
	if c.watcher != nil {
		c.watcher.Reload()
	}
}

func (c *Coordinator) applyConfig(cfg config.Config) {
	old := c.cfg.Load()
	// The connection settings in use stay: the client and the status
	// listener were built from them (and "up" sets bridge_url itself).
	// The watcher says so when the file changed them (config.RestartKeys).
	cfg.BridgeURL, cfg.BridgeToken, cfg.StatusAddr = old.BridgeURL, old.BridgeToken, old.StatusAddr
	cfg.StatusAllowedHosts = old.StatusAllowedHosts
	cfg.StartupMode = old.StartupMode
	// The ledger's rows and the lease are the coordinator id's it started
	// with (ledger.Open).
	cfg.CoordinatorID = old.CoordinatorID
	c.registry.Reconfigure(&cfg)
	c.cfg.Store(&cfg)
	c.sched.wake()
}

// Ready is closed once Run has settled where it starts reading the log:
// from then on every event appended to the bridge will be processed. A
// message posted before may be skipped as history (startup_mode), so `up`
// says it is up only then.
func (c *Coordinator) Ready() <-chan struct{} { return c.ready }

// Run recovers what a previous run left unfinished, then follows the
// bridge until ctx ends. On cancel it stops taking triggers, lets running
// adapters finish for up to shutdown_grace_s, interrupts the rest and
// returns once every goroutine it started has exited. It returns nil after
// a graceful shutdown, and an error only when the ledger fails. Run may be
// called once.
func (c *Coordinator) Run(ctx context.Context) error {
	// After every goroutine below: no run commits any more.
	defer c.ws.close()
	var wg sync.WaitGroup
	defer wg.Wait()
	// stop ends the taking of new work: when ctx ends, or when following
	// fails for good. work outlives it by the grace period, so running
	// adapters can finish and their replies be posted.
	stop, cancelStop := context.WithCancel(ctx)
	defer cancelStop()
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	c.skipGrace.Store(&cancelWork)
	// The registration lives until everything else has stopped: running
	// adapters may still post during the grace period.
	reg, stopRegistry := context.WithCancel(context.WithoutCancel(ctx))
	c.registry.First(ctx)
	regDone := make(chan struct{})
	go func() {
		defer close(regDone)
		c.registry.Run(reg)
	}()
	defer func() {
		stopRegistry()
		<-regDone
	}()
	c.clearAttachments()
	c.sched.start(stop, work)
	c.ws.checkGit()
	stopReceipts := c.receipts.start(ctx)

	if c.statusLn != nil {
		c.statusSrv = c.guard.Server(c.guard.Wrap(status.New(statusSource{c}, c.guard, c.log).Handler()))
		c.statusSrv.BaseContext = func(net.Listener) context.Context { return ctx }
		c.statusSrv.ErrorLog = slog.NewLogLogger(c.log.Handler(), slog.LevelDebug)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.statusSrv.Serve(c.statusLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				c.log.Error("status server stopped", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = c.statusSrv.Shutdown(sctx)
		}()
	}
	if c.watcher != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.watcher.Run(stop); err != nil && stop.Err() == nil {
				c.log.Error("config watcher stopped", "err", err)
			}
		}()
	}

	wg.Add(1)
	go func() {
		defer wg.Done()
		c.avail.run(stop)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.watchParty(stop)
	}()

	err := c.recover(stop)
	if err == nil {
		// Taking over comes after recovery, which settles this
		// coordinator's own runs first.
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.claims.pollClaims(stop)
		}()
		err = c.follow(stop)
	}
	cancelStop()
	c.shutdown(work, cancelWork)
	c.avail.offline()
	c.acp.Close()
	c.tokens.close()
	stopReceipts()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// SkipGrace interrupts running adapters now instead of at the end of the
// shutdown grace period: a second SIGTERM or SIGINT means "stop now". It
// is safe to call at any time; before Run it does nothing.
func (c *Coordinator) SkipGrace() {
	if cancel := c.skipGrace.Load(); cancel != nil {
		(*cancel)()
	}
}

// shutdown waits up to the grace period for running invocations, then
// cancels them; the scheduler records them as interrupted.
func (c *Coordinator) shutdown(work context.Context, cancelWork context.CancelFunc) {
	grace := c.cfg.Load().ShutdownGrace
	done := make(chan struct{})
	go func() {
		c.sched.wait()
		close(done)
	}()
	if n := c.runs.count(); n > 0 {
		// The person who pressed Ctrl-C learns why nothing seems to
		// happen, and how to stop at once.
		c.log.Warn(fmt.Sprintf("stopping: waiting up to %s for %d running adapter(s) to finish; a second Ctrl-C (or SIGTERM) stops them at once", grace, n),
			"running", n, "grace", grace.String())
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-work.Done():
		c.log.Warn("stopping now; interrupting running adapters")
		<-done
	case <-t.C:
		c.log.Warn("shutdown grace period over; interrupting running adapters", "grace", grace.String())
		cancelWork()
		<-done
	}
	c.sched.interruptQueued(context.WithoutCancel(work))
	// The last "listening" reports are sent before Run returns.
	c.presences.wait()
}

// follow reads the global log from the persisted cursor until ctx ends
// (client.Follow: SSE, long-polling when the stream keeps failing, capped
// backoff). Every failure is retried, those of process too: a daemon waits
// for the bridge and its own state db to come back rather than exit.
func (c *Coordinator) follow(ctx context.Context) error {
	cursor, err := c.startCursor(ctx)
	if err != nil {
		return err
	}
	// After the start position is fixed, so that the check's round trip
	// cannot move it past what is posted meanwhile.
	c.checkHumans(ctx)
	c.cursor.Store(cursor)
	c.following.Store(true)
	c.readyOnce.Do(func() { close(c.ready) })
	defer c.following.Store(false)
	return c.bridge.Follow(ctx, cursor, client.FollowOptions{
		Handle: func(it client.Item) error {
			if it.Presence != nil {
				c.rosterPresence.Change(*it.Presence)
			}
			if it.Event == nil {
				return nil
			}
			if err := c.process(ctx, *it.Event); err != nil {
				// The follow loop hands the staged events again.
				c.dropStaged()
				return err
			}
			return nil
		},
		Idle: func() error { return c.flush(ctx) },
		Opened: func(stream bool) {
			// A new connection hands again whatever a broken one left
			// staged: it resumes after the last commit.
			c.dropStaged()
			c.rosterPresence.Opened(stream)
		},
		Retry: func(error) bool { return true },
		// The bridge was restored from an older backup (rebase.go).
		Resync:      func(cursor int64) (int64, error) { return c.checkEpoch(ctx, cursor, true) },
		CursorAhead: func(head int64) (int64, error) { return c.cursorAhead(ctx, c.cursor.Load(), head) },
		PollAfter:   sseFailuresBeforePoll,
		Logger:      c.log,
	})
}

// checkHumans warns when the bridge counts other participants as humans
// than human_ids: one daemon would then obey a pause or mute the other
// ignores. A bridge that does not answer, or does not say (an older one),
// is not checked; agent-bridge doctor checks the same.
func (c *Coordinator) checkHumans(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := c.bridge.Ping(ctx)
	if err != nil || info.Humans == nil {
		return
	}
	if mine := c.cfg.Load().HumanIDs; !mine.Same(info.Humans) {
		c.log.Warn("the bridge's --humans differ from this config's human_ids; make them the same (agent-bridge doctor)",
			"bridge_humans", info.Humans, "human_ids", mine)
	}
}

// sseFailuresBeforePoll is how many failed stream connections in a row make
// the follow loop fall back to long-polling for a while.
const sseFailuresBeforePoll = 3

// startCursor decides where to start reading: the head in "end" mode and on
// a fresh ledger (a new coordinator does not answer the whole history), the
// persisted cursor in "resume" mode.
func (c *Coordinator) startCursor(ctx context.Context) (int64, error) {
	stored, ok, err := c.db.Cursor(ctx)
	if err != nil {
		return 0, err
	}
	if ok && c.cfg.Load().StartupMode == StartupResume {
		return stored, nil
	}
	var head int64
	if err := c.retry(ctx, retrying{what: "read the bridge's head"}, func() (err error) {
		head, err = c.bridge.Head(ctx)
		return err
	}); err != nil {
		return 0, err
	}
	if err := c.db.SetCursor(ctx, head); err != nil {
		return 0, err
	}
	// The cursor is in this log's epoch, whatever the one stored.
	if _, err := c.checkEpoch(ctx, head, false); err != nil {
		return 0, err
	}
	c.log.Info("starting at the end of the log", "gseq", head, "resumed", false)
	return head, nil
}

// staged is an event the follow loop has decided but not committed yet:
// what flush needs to commit it and act on it.
type staged struct {
	e agentbridge.Event
	// ctl is e's control, parsed once by process (nil when e is not a
	// control): the rules, the control handlers and the fold take it.
	ctl     *agentbridge.Control
	cfg     *config.Config
	before  threadCache
	d       rules.Decision
	decided bool
	step    ledger.Step
}

// maxStaged caps the events one commit of the follow loop carries.
const maxStaged = 64

// process handles one event of the global log: it folds the thread's
// state, decides, and stages the decision, the invocations it queues and
// the cursor advance; flush commits what is staged in one transaction
// before starting anything. The follow loop flushes when it has handled
// every event received and would wait for more (client.FollowOptions.Idle),
// so that the events of a burst (a hundred triggers posted at once) share
// one commit instead of queueing a hundred behind the runs they start; a
// lone event is committed as soon as it is decided. An event of
// a thread that already has one staged flushes that first: its decision
// reads the thread's state after the other.
func (c *Coordinator) process(ctx context.Context, e agentbridge.Event) error {
	if e.GSeq <= c.cursor.Load() {
		return nil
	}
	for _, s := range c.staged {
		if s.e.Thread == e.Thread {
			if err := c.flush(ctx); err != nil {
				return err
			}
			if e.GSeq <= c.cursor.Load() {
				return nil // staged already: handed again after a reconnect
			}
			break
		}
	}
	cfg := c.cfg.Load()
	c.noticeHandoff(e)
	before, err := c.stateBefore(ctx, e)
	if err != nil {
		return err
	}
	ctl := agentbridge.ControlOf(e)
	d, decided, err := c.decide(ctx, e, ctl, &before, cfg)
	if err != nil {
		return err
	}
	step := ledger.Step{GSeq: e.GSeq, Thread: e.Thread, Seq: e.Seq}
	if decided {
		if step, err = c.stepFor(cfg, e, d); err != nil {
			return err
		}
		c.claims.askEarly(ctx, cfg, step.Invocations)
	}
	// A cancel is applied before the cursor moves past it, so a crash
	// in between applies it again (it is idempotent).
	if err := c.applyControls(ctx, e, ctl, agentbridge.Humans(cfg.HumanIDs)); err != nil {
		return err
	}
	c.staged = append(c.staged, staged{e: e, ctl: ctl, cfg: cfg, before: before, d: d, decided: decided, step: step})
	if len(c.staged) >= maxStaged {
		return c.flush(ctx)
	}
	return nil
}

// dropStaged forgets the staged events, which the follow loop will hand
// again.
func (c *Coordinator) dropStaged() {
	clear(c.staged)
	c.staged = c.staged[:0]
}

// flush commits the staged events in one transaction, then folds each into
// the caches and hands what it queued to the scheduler. A failed commit
// drops them: the follow loop hands them again (client.FollowOptions.Idle).
func (c *Coordinator) flush(ctx context.Context) error {
	if len(c.staged) == 0 {
		return nil
	}
	batch := c.staged
	c.staged = c.staged[:0]
	steps := make([]ledger.Step, len(batch))
	for i, s := range batch {
		steps[i] = s.step
	}
	queued, err := c.db.CommitSteps(ctx, steps)
	if err != nil {
		c.outage.failed("commit the events read", err)
		clear(batch)
		return err
	}
	c.outage.ok()
	c.cursor.Store(max(c.cursor.Load(), batch[len(batch)-1].e.GSeq))
	for i, s := range batch {
		after := c.remember(s.cfg, s.e, s.ctl, s.before, agentbridge.Humans(s.cfg.HumanIDs))
		if s.decided {
			c.log.Debug("decided", "event", s.e.ID, "thread", s.e.Thread, "rule", s.d.Rule, "invoke", len(s.d.Invoke), "skipped", len(s.d.Skipped))
		}
		c.dispatch(ctx, s.e, s.ctl, s.d, s.decided, s.step, queued[i], after)
	}
	clear(batch)
	return nil
}

// decide applies the trigger rules to e, unless the thread's cursor shows
// it was processed already (read from the ledger when before does not
// know it, and then kept in before). decided reports whether the decision
// is to be recorded: every message's, and a control's or closed scene's
// that did something.
func (c *Coordinator) decide(ctx context.Context, e agentbridge.Event, ctl *agentbridge.Control, before *threadCache, cfg *config.Config) (d rules.Decision, decided bool, err error) {
	switch e.Type {
	case agentbridge.TypeMessage, agentbridge.TypeControl, agentbridge.TypeSceneClosed:
	default:
		return d, false, nil
	}
	if !before.known {
		if before.done, _, err = c.db.ThreadCursor(ctx, e.Thread); err != nil {
			return d, false, err
		}
		before.known = true
	}
	if before.done >= e.Seq {
		// Already processed (the global cursor was reset behind it).
		return d, false, nil
	}
	var facts *rules.PartyFacts
	if before.state.Party.On {
		if facts, err = c.partySelectionFacts(ctx, e, cfg); err != nil {
			return d, false, err
		}
	}
	d = rules.Decide(before.state, e, ctl, cfg, facts)
	decided = e.Type == agentbridge.TypeMessage || d.Rule == rules.RuleProd || d.Rule == rules.RuleScene || d.Rule == rules.RuleSceneJournal
	return d, decided, nil
}

// partySelectionFacts reads what a party selection for e needs besides the
// thread's state: the party turns counted from the thread's events before
// e, and who the other live coordinators serve (read again now, so that
// one that registered since the last read counts).
func (c *Coordinator) partySelectionFacts(ctx context.Context, e agentbridge.Event, cfg *config.Config) (*rules.PartyFacts, error) {
	if cfg.HumanIDs.Has(e.From) && e.Type == agentbridge.TypeMessage && e.To == agentbridge.ToAll && !agentbridge.IsPartyExit(e.Text()) {
		evs, err := c.threadEvents(ctx, e.Thread, 0, e.Seq-1)
		if err != nil {
			return nil, err
		}
		c.registry.Refresh(ctx)
		return &rules.PartyFacts{Turns: rules.PartyTurns(evs), Elsewhere: func(p, client, workspace string) bool {
			served, _ := c.registry.ServedElsewhereIn(p, client, workspace)
			return served
		}}, nil
	}
	return nil, nil
}

// stepFor is the ledger step that records decision d of e: the decision,
// the invocations it queues, the notices it owes and a party round it
// starts.
func (c *Coordinator) stepFor(cfg *config.Config, e agentbridge.Event, d rules.Decision) (ledger.Step, error) {
	step := ledger.Step{GSeq: e.GSeq, Thread: e.Thread, Seq: e.Seq, PartyRound: partyStart(d, e)}
	round := d.PartyRound()
	js, err := json.Marshal(d)
	if err != nil {
		return step, fmt.Errorf("encode decision: %w", err)
	}
	step.Decision = &ledger.DecisionRecord{EventID: e.ID, Thread: e.Thread, Seq: e.Seq, GSeq: e.GSeq, Decision: js}
	for _, t := range d.Invoke {
		cmd := []string{}
		if a, ok := cfg.Agents[t.Agent]; ok {
			cmd = a.Argv()
		}
		step.Invocations = append(step.Invocations, ledger.Invocation{
			Thread: e.Thread, TriggerID: e.ID, TriggerSeq: e.Seq, TriggerGSeq: e.GSeq,
			Participant: t.Participant, Agent: t.Agent, Command: cmd, Hop: d.Hop, Round: round,
			Profile: &t.Profile,
		})
	}
	step.Notices = c.notices(cfg, e, d)
	return step, nil
}

// applyControls applies the controls that act on the coordinator itself:
// cancel, reset_session and permission answers.
func (c *Coordinator) applyControls(ctx context.Context, e agentbridge.Event, ctl *agentbridge.Control, humans agentbridge.Humans) error {
	if ctl == nil {
		return nil
	}
	if err := c.applyCancelControl(ctx, e, *ctl, humans); err != nil {
		return err
	}
	if err := c.applyResetSession(ctx, e, *ctl); err != nil {
		return err
	}
	c.applyPermissionControl(e, *ctl, humans)
	return c.ws.control(ctx, e, *ctl, humans)
}

// remember folds e into the thread's cached state and the follow loop's
// recent events, and returns the state after e.
func (c *Coordinator) remember(cfg *config.Config, e agentbridge.Event, ctl *agentbridge.Control, before threadCache, humans agentbridge.Humans) agentbridge.ThreadState {
	after := agentbridge.FoldParsed(before.state, e, ctl, humans)
	name := before.name
	if e.Type == agentbridge.TypeThreadCreated || e.Type == agentbridge.TypeThreadRenamed {
		name = e.Text()
	}
	// The commit of e moved the thread's cursor to e.Seq unless it was
	// further already.
	c.threads.Put(e.Thread, threadCache{seq: e.Seq, state: after, name: name, done: max(before.done, e.Seq), known: before.known})
	c.avail.note(e.Thread, after)
	c.recent.Add(e, cfg.ContextWindowSize+cache.RecentSlack)
	return after
}

// dispatch hands what a committed step queued to the scheduler: the
// invocations (with what the follow loop already knows, so prepare reads
// less), the notices, the receipts, and the end of a party round nobody
// could take part in.
func (c *Coordinator) dispatch(ctx context.Context, e agentbridge.Event, ctl *agentbridge.Control, d rules.Decision, decided bool, step ledger.Step, queued []ledger.Invocation, after agentbridge.ThreadState) {
	for _, inv := range queued {
		ev := e
		c.sched.enqueue(job{inv: inv, trigger: &ev, after: &after})
	}
	for _, n := range step.Notices {
		c.sched.postNotice(n)
	}
	if decided {
		c.receipts.wake()
	}
	c.unservedAtInvite(ctx, e, ctl, after)
	if step.PartyRound != nil && len(d.Invoke) == 0 {
		// Nobody could take part: the round ends at once, with its notice.
		c.partyAdvance(ctx, e.ID)
	}
}

// stateBefore returns the thread's state just before e: from the cache
// when it is current, else from the bridge (the coordinator met the thread
// mid-way, or skipped events).
func (c *Coordinator) stateBefore(ctx context.Context, e agentbridge.Event) (threadCache, error) {
	tc, cached := c.threads.Get(e.Thread)
	if cached && tc.seq == e.Seq-1 {
		return tc, nil
	}
	if e.Seq <= 1 {
		return threadCache{}, nil
	}
	st, _, err := c.bridge.State(ctx, e.Thread, e.Seq-1)
	if err != nil {
		return threadCache{}, fmt.Errorf("read state of thread %s at %d: %w", e.Thread, e.Seq-1, err)
	}
	name := ""
	if cached {
		name = tc.name
	} else if th, err := c.bridge.Thread(ctx, e.Thread); err == nil {
		name = th.Name
	} else {
		return threadCache{}, fmt.Errorf("read thread %s: %w", e.Thread, err)
	}
	return threadCache{seq: e.Seq - 1, state: st, name: name}, nil
}

// Notice kinds, part of each notice's idempotency key.
const (
	noticeClarification = "clarification"
	noticeLoopGuard     = "loop-guard"
	noticeSceneClosed   = "scene.closed"
)

// notices builds the coordinator messages a decision owes: a clarification
// to the sender, a loop-guard notice to everyone.
func (c *Coordinator) notices(cfg *config.Config, e agentbridge.Event, d rules.Decision) []ledger.Notice {
	var out []ledger.Notice
	add := func(kind, to, text string) {
		in := agentbridge.EventInput{
			Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: to,
			Content: mustJSON(text),
			Meta:    agentbridge.Meta{ReplyTo: e.ID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", kind}},
		}
		out = append(out, ledger.Notice{TriggerID: e.ID, Kind: kind, Thread: e.Thread, Post: in})
	}
	if d.Clarify != "" {
		add(noticeClarification, e.From, d.Clarify)
	}
	if d.LoopGuard {
		add(noticeLoopGuard, agentbridge.ToAll, rules.LoopGuardNotice(d.Hop, cfg.MaxAgentHops))
	}
	if d.SceneClose != "" {
		in := agentbridge.EventInput{
			Type: agentbridge.TypeSceneClosed, From: cfg.CoordinatorID, To: agentbridge.ToAll,
			Content: mustJSON(d.SceneClose),
			Meta:    agentbridge.Meta{ReplyTo: e.ID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "scene"}},
		}
		out = append(out, ledger.Notice{TriggerID: e.ID, Kind: noticeSceneClosed, Thread: e.Thread, Post: in})
	}
	return out
}
