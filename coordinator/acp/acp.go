// Package acp is the coordinator's Agent Client Protocol client (contract
// 6.6, docs/acp.md). An agent entry with "acp" runs as a warm process per
// (thread, participant): started on the pair's first trigger, initialized,
// given a session, and kept for later triggers, each of which is one
// session/prompt. The pool closes a process idle for acp_idle_s and keeps
// at most acp_max_warm, closing the least recently used idle one first.
// It reaches the coordinator only through Host.
package acp

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/prometheus/client_golang/prometheus"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

const (
	// cancelWait is how long a cancelled turn waits for the agent to
	// answer session/cancel before its process group is killed.
	cancelWait = 5 * time.Second
	// settleWait bounds how long a turn's end waits for its requests to a
	// person to post their closing notices (each post has 10 s).
	settleWait = 15 * time.Second
	// closeGrace is the time between SIGTERM and SIGKILL when a warm
	// agent is closed.
	closeGrace = 2 * time.Second
	// startTimeout bounds initialize and session setup.
	startTimeout = 2 * time.Minute
	// stderrKeep is how much of the end of an agent's stderr is kept,
	// as for adapters.
	stderrKeep = adapters.DefaultMaxStderr
	// maxReply bounds the reply text collected from message chunks.
	maxReply = adapters.DefaultMaxStdout
	// replayQuiet is how long an agent must have sent no session/update
	// after answering session/load before the next prompt is sent: an
	// agent may replay the loaded history after its answer (Gemini CLI
	// does). replayMax bounds that wait.
	replayQuiet = 250 * time.Millisecond
	replayMax   = 10 * time.Second
)

// DefaultModel is the profile model meaning the ACP agent's own choice:
// no session/set_model is sent. agent-bridge invite gives it to an "acp"
// entry whose profile names no model.
const DefaultModel = "default"

// errTurn marks a turn that ended without a reply; the message that
// goes with it says why.
var errTurn = errors.New("the ACP turn failed")

// Pool holds the warm agents. It is safe for concurrent use; one pair
// runs one turn at a time (the caller runs a pair's turns in order).
type Pool struct {
	host Host
	cfg  func() *config.Config
	log  *slog.Logger
	exe  string
	// dir holds the per-thread session folders of agents without workdir.
	dir string

	mu     sync.Mutex
	agents map[pairKey]*agent
	closed bool
	// waits are the permission requests and questions waiting for a
	// person, by the id of the message that asked; early holds answers
	// that arrived before their request was registered (bounded).
	waits map[string]*waiting
	early map[string]personAnswer
	// noPresence holds the invocations whose payload was built without
	// reading presence (SkipPresence).
	noPresence map[int64]bool
	wg         sync.WaitGroup
	// promptWritten, when set (benchmarks), is called as each
	// session/prompt request has been written to an agent.
	promptWritten atomic.Pointer[func(time.Time)]
}

// pairKey names a warm agent: one per (thread, participant).
type pairKey struct{ thread, participant string }

// New makes an empty pool; agents start on their pair's first turn.
func New(opts Options) *Pool {
	p := &Pool{host: opts.Host, cfg: opts.Config, log: cmp.Or(opts.Logger, slog.Default()), exe: opts.Executable,
		dir: defaultDir(opts.Dir), agents: make(map[pairKey]*agent),
		waits: make(map[string]*waiting), early: make(map[string]personAnswer), noPresence: make(map[int64]bool)}
	if opts.Registerer == nil {
		return p
	}
	opts.Registerer.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agent_bridge_coordinator_acp_warm_agents",
			Help: "ACP agent processes kept warm (acp_max_warm caps the idle ones).",
		}, func() float64 {
			p.mu.Lock()
			defer p.mu.Unlock()
			return float64(len(p.agents))
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agent_bridge_coordinator_acp_permission_requests_waiting",
			Help: "ACP permission requests waiting for a person's answer.",
		}, func() float64 { return p.waiting(false) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agent_bridge_coordinator_acp_questions_waiting",
			Help: "ACP agents' questions with fields (elicitations) waiting for a person's answer.",
		}, func() float64 { return p.waiting(true) }))
	return p
}

// waiting counts the requests waiting for a person: questions, or
// permission requests.
func (p *Pool) waiting(questions bool) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, w := range p.waits {
		if w.question == questions {
			n++
		}
	}
	return float64(n)
}

// agent is one warm agent process and its session.
type agent struct {
	pool *Pool
	key  pairKey
	// fingerprint is the entry's settings; a reload that changes them
	// replaces the process at the next turn.
	fingerprint string
	cfg         config.Agent
	cwd         string

	// token is the agent's own bridge credential, for its whole life
	// (Host.Token); revoked when it is closed.
	token   Token
	cmd     *exec.Cmd
	pid     int
	started time.Time
	stdin   *os.File
	conn    *sdk.ClientSideConnection
	exited  chan struct{}
	// exitCode is set before exited is closed (-1 when signalled).
	exitCode int
	stderr   *stderrTail
	// stderrDone is closed when the agent's stderr reached its end (the
	// agent and whatever inherited the pipe are gone).
	stderrDone chan struct{}
	// loadSession is the agent's loadSession capability, images its
	// promptCapabilities.image (attachments.go).
	loadSession, images bool

	// Guarded by pool.mu. retired is set when the process is not to be
	// used again: it is closed when its turn ends.
	busy     bool
	retired  bool
	lastUsed time.Time
	idle     *time.Timer

	// session is the ACP session in use ("" before the first); costSeen
	// is the last running cost total the agent reported. Only the pair's
	// one turn at a time touches them.
	session  string
	costSeen float64
	// rosterSent is the rosterKey last sent to the session.
	rosterSent string
	// models is what the session's answer offered for session/set_model
	// (nil: not offered); model is the one the session runs.
	models *sdk.SessionModelState
	model  string
	// promptSent is closed when the turn's prompt has been written.
	promptSent atomic.Pointer[chan struct{}]
	// lastUpdate is when the latest session/update was handled (unix
	// nanoseconds), to tell when a replay after session/load has ended.
	lastUpdate atomic.Int64

	mu   sync.Mutex
	turn *turn
}

// fingerprintOf is what of an entry a warm process was started with.
func fingerprintOf(a config.Agent) string {
	keys := make([]string, 0, len(a.Env))
	for k := range a.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(strings.Join(a.ACP, "\x00"))
	for _, k := range keys {
		b.WriteString("\x01" + k + "=" + a.Env[k])
	}
	fmt.Fprintf(&b, "\x02%s\x02%v", a.Workdir, a.ACPFS)
	return b.String()
}

// acquire returns the pair's warm agent, starting one when there is none
// (or the entry changed, or it died), marked busy until release. onStart is
// called as soon as a new process runs, before it is initialized.
func (p *Pool) acquire(ctx context.Context, cfg *config.Config, key pairKey, entry config.Agent, onStart func(*agent)) (*agent, error) {
	fp := fingerprintOf(entry)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("the coordinator is shutting down")
	}
	if a := p.agents[key]; a != nil {
		// An agent whose token could end during this turn is replaced by
		// one with a new token (its session is loaded where it can be).
		if a.fingerprint == fp && !a.dead() && a.token.LastsTurn() {
			a.busy = true
			if a.idle != nil {
				a.idle.Stop()
			}
			p.mu.Unlock()
			return a, nil
		}
		delete(p.agents, key)
		p.closeLater(a)
	}
	p.evictLocked(cfg.ACPMaxWarm - 1)
	a := &agent{pool: p, key: key, fingerprint: fp, cfg: entry, busy: true, exited: make(chan struct{}), stderr: &stderrTail{}, stderrDone: make(chan struct{})}
	p.agents[key] = a
	p.mu.Unlock()
	if err := a.start(ctx, cfg, onStart); err != nil {
		p.mu.Lock()
		if p.agents[key] == a {
			delete(p.agents, key)
		}
		p.mu.Unlock()
		a.close()
		return nil, err
	}
	return a, nil
}

// release ends a's turn: it stays warm (unless it died) and its idle
// timer starts.
func (p *Pool) release(a *agent) {
	cfg := p.cfg()
	p.mu.Lock()
	defer p.mu.Unlock()
	a.busy = false
	a.lastUsed = time.Now()
	if p.agents[a.key] != a {
		p.closeLater(a)
		return
	}
	if a.dead() || p.closed || a.retired {
		delete(p.agents, a.key)
		p.closeLater(a)
		return
	}
	idle := cfg.ACPIdle
	a.idle = time.AfterFunc(idle, func() { p.closeIdle(a, idle) })
	p.evictLocked(cfg.ACPMaxWarm)
}

// retire has a closed when its turn ends, and the pair's next turn start
// a new process.
func (p *Pool) retire(a *agent) {
	p.mu.Lock()
	a.retired = true
	p.mu.Unlock()
	p.log.Info("closing the ACP agent after its failed turn; the next turn starts a new one", "thread", a.key.thread, "participant", a.key.participant, "pid", a.pid)
}

// closeIdle closes a when it has not been used for idle.
func (p *Pool) closeIdle(a *agent, idle time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.agents[a.key] != a || a.busy || time.Since(a.lastUsed) < idle {
		return
	}
	delete(p.agents, a.key)
	p.log.Info("closing idle ACP agent", "thread", a.key.thread, "participant", a.key.participant, "idle", idle)
	p.closeLater(a)
}

// evictLocked closes the least recently used idle agents until at most
// limit remain; busy ones are never closed, so the cap may be passed
// while all are working.
func (p *Pool) evictLocked(limit int) {
	for len(p.agents) > max(limit, 0) {
		var lru *agent
		for _, a := range p.agents {
			if !a.busy && (lru == nil || a.lastUsed.Before(lru.lastUsed)) {
				lru = a
			}
		}
		if lru == nil {
			return
		}
		delete(p.agents, lru.key)
		p.log.Info("closing least recently used ACP agent", "thread", lru.key.thread, "participant", lru.key.participant)
		p.closeLater(lru)
	}
}

// closeLater closes a in the background; closeAll waits for it.
func (p *Pool) closeLater(a *agent) {
	if a.idle != nil {
		a.idle.Stop()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		a.close()
	}()
}

// Close closes every warm agent and waits for them to exit: the
// coordinator's shutdown, after the running turns have ended.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	for k, a := range p.agents {
		delete(p.agents, k)
		p.closeLater(a)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// start runs the agent process and initializes the connection.
func (a *agent) start(ctx context.Context, cfg *config.Config, onStart func(*agent)) error {
	p := a.pool
	a.cwd = a.cfg.Workdir
	if a.cwd == "" {
		a.cwd = filepath.Join(a.pool.dir, a.key.thread)
	}
	if err := os.MkdirAll(a.cwd, 0o755); err != nil {
		return fmt.Errorf("create the session folder: %w", err)
	}
	if abs, err := filepath.Abs(a.cwd); err == nil {
		a.cwd = abs
	}
	argv := a.cfg.ACP
	a.cmd = exec.Command(argv[0], argv[1:]...)
	a.cmd.Dir = a.cwd
	a.cmd.SysProcAttr = procAttr()
	a.token = p.host.Token(ctx, a.key.thread, a.key.participant)
	a.cmd.Env = agentEnviron(a.cfg.Env, cfg, a.key, p.exe, a.token.Value())
	inW, outR, errR, err := a.spawn()
	if err != nil {
		return err
	}
	a.pid, a.started, a.stdin = a.cmd.Process.Pid, time.Now(), inW
	onStart(a)
	p.log.Info("started ACP agent", "thread", a.key.thread, "participant", a.key.participant, "pid", a.pid, "argv", argv)
	a.pool.wg.Add(2)
	go func() {
		defer a.pool.wg.Done()
		defer close(a.stderrDone)
		defer errR.Close()
		_, _ = io.Copy(a.stderr, errR)
	}()
	go func() {
		defer a.pool.wg.Done()
		err := a.cmd.Wait()
		a.exitCode = a.cmd.ProcessState.ExitCode()
		if err != nil && a.exitCode == 0 {
			a.exitCode = -1
		}
		// Whatever it left in its group goes with it.
		_ = syscall.Kill(-a.pid, syscall.SIGKILL)
		close(a.exited)
	}()
	a.conn = sdk.NewClientSideConnection(&agentClient{a: a}, &promptWriter{w: inW, hook: a.pool.promptWritten.Load(), sent: &a.promptSent, open: a.openTurn}, outR)
	a.conn.SetLogger(p.log.With("acp_participant", a.key.participant))
	a.pool.wg.Add(1)
	go func() {
		defer a.pool.wg.Done()
		<-a.conn.Done()
		outR.Close()
	}()
	return a.initialize(ctx)
}

// agentEnviron is an ACP agent's environment: the coordinator's without its
// credentials (adapters.Inherited), the entry's variables in key order
// (but BRIDGE_TOKEN), then the bridge's, this binary and the agent's own
// token (Token.Value).
func agentEnviron(vars map[string]string, cfg *config.Config, key pairKey, exe, token string) []string {
	env := adapters.Inherited(os.Environ(), cfg.BridgeToken)
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != adapters.EnvToken {
			env = append(env, k+"="+vars[k])
		}
	}
	env = append(env, "BRIDGE_URL="+cfg.BridgeURL, "BRIDGE_THREAD_ID="+key.thread,
		"BRIDGE_PARTICIPANT_ID="+key.participant, adapters.EnvAgentBridgeBin+"="+exe)
	return append(env, adapters.EnvToken+"="+token)
}

// spawn starts a.cmd on three pipes and returns the ends the coordinator
// keeps: the agent's stdin, stdout and stderr. When it fails, nothing is
// left open and a.exited and a.stderrDone are closed.
func (a *agent) spawn() (inW, outR, errR *os.File, err error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, nil, nil, err
	}
	a.cmd.Stdin, a.cmd.Stdout, a.cmd.Stderr = inR, outW, errW
	err = a.cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		close(a.exited)
		close(a.stderrDone)
		return nil, nil, nil, fmt.Errorf("start %s: %w", a.cfg.ACP[0], err)
	}
	return inW, outR, errR, nil
}

// initialize sends the ACP initialize request, within startTimeout.
func (a *agent) initialize(ctx context.Context) error {
	ictx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	caps := sdk.ClientCapabilities{Elicitation: elicitationCapabilities()}
	if a.cfg.ACPFS {
		caps.Fs = sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}
	}
	err := a.call(ictx, func(ctx context.Context) error {
		r, err := a.conn.Initialize(ctx, sdk.InitializeRequest{
			ProtocolVersion:    sdk.ProtocolVersionNumber,
			ClientCapabilities: caps,
			ClientInfo:         &sdk.Implementation{Name: "agent-bridge", Version: buildVersion()},
		})
		a.loadSession = r.AgentCapabilities.LoadSession
		a.images = r.AgentCapabilities.PromptCapabilities.Image
		return err
	})
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	return nil
}

// call runs one request, returning early when the process dies (the
// connection then fails the request too, but only once its output pipe
// closes, which a grandchild may hold).
func (a *agent) call(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	select {
	case err := <-done:
		return err
	case <-a.exited:
		cancel()
		<-done
		return fmt.Errorf("the agent exited (code %d)", a.exitCode)
	}
}

// dead reports whether the process has exited or its connection closed.
func (a *agent) dead() bool {
	select {
	case <-a.exited:
		return true
	default:
	}
	if a.conn == nil {
		return false
	}
	select {
	case <-a.conn.Done():
		return true
	default:
		return false
	}
}

// close ends the process: stdin closed, then SIGTERM to its group, then
// SIGKILL after closeGrace. It returns once the process is reaped.
func (a *agent) close() {
	// Revoked once the process is gone (revoke runs after this returns).
	defer func() {
		if a.token != nil {
			a.token.Revoke()
		}
	}()
	if a.stdin != nil {
		a.stdin.Close()
	}
	if a.pid == 0 {
		return
	}
	select {
	case <-a.exited:
		return
	default:
	}
	_ = syscall.Kill(-a.pid, syscall.SIGTERM)
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-a.exited:
	case <-t.C:
		a.kill()
		<-a.exited
	}
}

// kill kills the process group at once.
func (a *agent) kill() {
	if a.pid > 0 {
		_ = syscall.Kill(-a.pid, syscall.SIGKILL)
	}
}

// mcpServers is the bridge's own MCP server, acting as the participant.
func (a *agent) mcpServers(cfg *config.Config) []sdk.McpServer {
	// The agent's own token, never the coordinator's: the server acts
	// as the participant with what the participant may do.
	env := []sdk.EnvVariable{{Name: adapters.EnvToken, Value: a.token.Value()}}
	return []sdk.McpServer{{Stdio: &sdk.McpServerStdio{
		Name: "agent-bridge", Command: a.pool.exe,
		Args: []string{"mcp", "--as", a.key.participant, "--url", cfg.BridgeURL}, Env: env,
	}}}
}

// ensureSession makes sure a has the session the ledger remembers for the
// pair (stored, "" for none): the warm one when it is that, else loaded
// where the agent offers session/load, else a new one. fresh reports a new
// session, which must be sent the whole recent context.
func (a *agent) ensureSession(ctx context.Context, cfg *config.Config, stored string, progress func(adapters.ProgressRecord)) (fresh bool, err error) {
	if a.session != "" && a.session == stored {
		// Reported on every turn, so the ledger counts the session's turns.
		progress(adapters.ProgressRecord{Status: "warm session", Kind: "session", Session: stored})
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if stored != "" && a.loadSession {
		a.session = ""
		var models *sdk.SessionModelState
		err := a.call(ctx, func(ctx context.Context) error {
			r, err := a.conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(stored), Cwd: a.cwd, McpServers: a.mcpServers(cfg)})
			models = r.Models
			return err
		})
		if err == nil {
			a.session = stored
			a.setModels(models)
			a.awaitReplay(ctx, time.Now())
			progress(adapters.ProgressRecord{Status: "session loaded", Kind: "session", Session: stored})
			return false, nil
		}
		if a.dead() {
			return false, fmt.Errorf("session/load: %w", err)
		}
		progress(adapters.ProgressRecord{Status: "session/load refused; starting a new session", Kind: "session",
			Detail: jsonOf(map[string]string{"error": err.Error()})})
	}
	var id string
	var models *sdk.SessionModelState
	err = a.call(ctx, func(ctx context.Context) error {
		r, err := a.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: a.cwd, McpServers: a.mcpServers(cfg)})
		id, models = string(r.SessionId), r.Models
		return err
	})
	if err != nil {
		return false, fmt.Errorf("session/new: %w", err)
	}
	a.session, a.costSeen = id, 0
	a.setModels(models)
	progress(adapters.ProgressRecord{Status: "new session", Kind: "session", Session: id})
	return true, nil
}

// setModels notes the models a session's answer offered.
func (a *agent) setModels(m *sdk.SessionModelState) {
	a.models, a.model = m, ""
	if m != nil {
		a.model = string(m.CurrentModelId)
	}
}

// ensureModel asks the session for the participant's model with
// session/set_model when the agent offers models and the session runs
// another. The model "default" (what invite sends for an ACP entry naming
// none) leaves the agent's own choice. A refusal is recorded in the
// turn's progress and the turn runs on the agent's model.
func (a *agent) ensureModel(ctx context.Context, model string, progress func(adapters.ProgressRecord)) {
	if a.models == nil || model == "" || model == DefaultModel || model == a.model {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	err := a.call(cctx, func(ctx context.Context) error {
		_, err := a.conn.UnstableSetSessionModel(ctx, sdk.UnstableSetSessionModelRequest{SessionId: sdk.SessionId(a.session), ModelId: sdk.UnstableModelId(model)})
		return err
	})
	if err != nil && ctx.Err() != nil {
		// The turn was stopped meanwhile; the next one asks again.
		return
	}
	if err != nil {
		progress(adapters.ProgressRecord{Status: "session/set_model refused; the agent's own model runs", Kind: "session",
			Detail: jsonOf(map[string]string{"model": model, "error": err.Error()})})
		return
	}
	a.model = model
	progress(adapters.ProgressRecord{Status: "model " + oneLineStatus(model), Kind: "session", Detail: jsonOf(map[string]string{"model": model})})
}

// awaitReplay returns once the agent has sent no session/update for
// replayQuiet since loaded (when session/load answered), at most
// replayMax after it: the end of a history replay that follows the
// load's answer. The SDK handles every update read before a response
// before it returns that response, so a replay sent before the answer
// (as the ACP spec asks) is over at once; what still arrives before the
// prompt is written is dropped (agent.openTurn).
func (a *agent) awaitReplay(ctx context.Context, loaded time.Time) {
	deadline := loaded.Add(replayMax)
	for {
		last := loaded
		if u := time.Unix(0, a.lastUpdate.Load()); u.After(last) {
			last = u
		}
		wait := min(time.Until(last.Add(replayQuiet)), time.Until(deadline))
		if wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		case <-a.exited:
			t.Stop()
			return
		}
	}
}

// Run is one turn on the pair's warm agent (contract 6.6): acquire the
// agent and its session, send the prompt and wait for its answer (or stop
// it), then read the result. why, when not empty, is the sentence for the
// thread when the turn failed.
func (p *Pool) Run(ctx context.Context, run Run) (res adapters.Result, why string) {
	cfg, inv := p.cfg(), run.Invocation
	progress := run.Progress
	if progress == nil {
		progress = func(adapters.ProgressRecord) {}
	}
	res = adapters.Result{ExitCode: -1, Started: time.Now()}
	noPresence := p.tookNoPresence(inv.ID)
	if ctx.Err() != nil {
		return stoppedResult(ctx, res), ""
	}
	// A cold start is marked running at once (it may take seconds, and a
	// cancel meanwhile must stop a running turn); a warm turn after its
	// prompt is written.
	cold := false
	a, err := p.acquire(ctx, cfg, pairKey{inv.Thread, inv.Participant}, run.Entry, func(a *agent) {
		cold = true
		p.host.MarkRunning(ctx, inv, a.pid, res.Started)
	})
	if err != nil && ctx.Err() != nil {
		return stoppedResult(ctx, res), ""
	}
	if err != nil {
		return failed(res, fmt.Sprintf("The ACP agent could not be started: %v.", err), nil)
	}
	defer p.release(a)
	errMark := a.stderr.mark()
	fresh, err := a.ensureSession(ctx, cfg, run.Payload.Session.ID, progress)
	if err != nil && ctx.Err() != nil {
		// Stopped while the session was being set up.
		return stoppedResult(ctx, res), ""
	}
	if err != nil {
		return failed(res, fmt.Sprintf("The ACP agent could not open a session: %v.", err), a)
	}
	a.ensureModel(ctx, run.Payload.Participant.Profile.Model, progress)
	res.PID, res.PGID = a.pid, a.pid
	text := p.promptText(ctx, inv, a, run.Payload, fresh, noPresence)
	t := a.beginTurn(cfg, run, progress)
	t.started = res.Started
	defer a.endTurn()
	prompt := promptBlocks(text, run.Payload, fresh, a.images, p.log)
	a.watchStderr(t)
	defer a.stderr.watchLines(nil)
	ans, stopped := p.exchange(ctx, inv, a, t, prompt, cold)
	res.Finished = time.Now()
	res.StderrTail = a.stderr.since(errMark)
	return p.settle(res, a, t, ans, stopped, run.Scene, progress)
}

// settle reads a turn's result once its prompt is answered or stopped:
// the usage reported, then the reply (with a scene actor's private
// thinking) or why the turn failed, an agent that may be out of step with
// its session retired.
func (p *Pool) settle(res adapters.Result, a *agent, t *turn, ans promptAnswer, stopped string, scene bool, progress func(adapters.ProgressRecord)) (adapters.Result, string) {
	reply, thought := t.result()
	reportUsage(t, ans.resp, progress)
	if res, why, done := stopResult(res, a, t, ans, stopped); done {
		if (ans.err != nil && !a.dead()) || (stopped == "" && ans.err == nil && ans.resp.StopReason == sdk.StopReasonEndTurn) {
			// An agent that answered with an error, or ended a turn it
			// did not run (the only end_turn stopResult fails), may be
			// out of step with its session (claude-agent-acp 0.23 is: see
			// unanswered): the next turn gets a new process, which loads
			// the session.
			p.retire(a)
		}
		return res, why
	}
	if scene && thought != "" && !strings.Contains(reply, "<thinking>") {
		// A scene actor's private thinking comes as thought chunks.
		reply = "<thinking>" + thought + "</thinking>\n" + reply
	}
	res.ExitCode, res.PID = 0, 0
	res.Stdout = []byte(reply)
	res.StdoutBytes = int64(len(reply))
	return res, ""
}

// failed is res for a turn that failed, with why and the end of the
// agent's stderr (none for a nil agent, one that never started).
func failed(res adapters.Result, why string, a *agent) (adapters.Result, string) {
	res.StartErr, res.Finished = errTurn, time.Now()
	if a != nil {
		res.StderrTail = a.stderr.since(0)
		if tail := strings.TrimSpace(string(res.StderrTail)); tail != "" {
			why += "\n\nThe end of its stderr:\n" + tail
		}
	}
	return res, why
}

// promptText renders the turn's prompt. A warm session has the roster
// from its first prompt: it is sent again only when who is invited changed;
// a payload built without presence (SkipPresence) gets it now.
func (p *Pool) promptText(ctx context.Context, inv Invocation, a *agent, payload adapters.Payload, fresh, noPresence bool) string {
	if fresh {
		payload.Session = adapters.SessionInfo{}
	} else {
		payload.Session.ID = a.session
	}
	roster := rosterKey(payload.Participants)
	switch {
	case !fresh && roster == a.rosterSent:
		payload.Participants = nil
	case noPresence:
		st := p.host.Presence(ctx, inv.Thread)
		for i, e := range payload.Participants {
			if !e.Human {
				payload.Participants[i].Presence = cmp.Or(st[e.ID], agentbridge.PresenceOffline)
			}
		}
	}
	a.rosterSent = roster
	return adapters.RenderPrompt(payload)
}

// promptAnswer is the agent's answer to session/prompt.
type promptAnswer struct {
	resp sdk.PromptResponse
	err  error
}

// exchange sends the prompt and waits for the agent's answer, its exit,
// the end of ctx or the adapter timeout. stopped says why the turn was
// stopped ("cancelled", "interrupted", "timeout"), empty when it was not;
// a stopped turn is sent session/cancel, and its agent's process group is
// killed when it does not answer that within cancelWait.
func (p *Pool) exchange(ctx context.Context, inv Invocation, a *agent, t *turn, prompt []sdk.ContentBlock, cold bool) (ans promptAnswer, stopped string) {
	answered := make(chan promptAnswer, 1)
	promptCtx, cancelPrompt := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelPrompt()
	sent := make(chan struct{})
	a.promptSent.Store(&sent)
	go func() {
		r, err := a.conn.Prompt(promptCtx, sdk.PromptRequest{SessionId: sdk.SessionId(a.session), Prompt: prompt})
		answered <- promptAnswer{r, err}
	}()
	// A warm turn's running mark goes beside the prompt, as adapters.Run
	// writes the payload first: the ledger write is off the turn's
	// critical path. It ends before the turn does, so the outcome is
	// always recorded after it.
	marked := make(chan struct{})
	go func() {
		defer close(marked)
		if cold {
			return
		}
		// After the prompt's write, so the two do not compete for a CPU.
		wait := time.NewTimer(50 * time.Millisecond)
		select {
		case <-sent:
		case <-wait.C:
		}
		wait.Stop()
		p.host.MarkRunning(ctx, inv, a.pid, t.started)
	}()
	defer func() { <-marked }()
	defer t.clock.stop()
	// Once the prompt is answered or stopped, a request to a person still
	// open is withdrawn, and its notice posted before the run (and its
	// claim) ends.
	defer func() {
		t.stop()
		t.settle(settleWait)
	}()
	select {
	case ans = <-answered:
	case <-a.exited:
		select {
		case ans = <-answered:
		case <-time.After(time.Second):
			ans.err = errors.New("the agent exited")
		}
	case <-ctx.Done():
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, adapters.ErrCancelled):
			stopped = "cancelled"
		case errors.Is(cause, adapters.ErrGaveUp):
			// The turn's progress said it failed (watchStderr).
			stopped = "gave up"
		default:
			stopped = "interrupted"
		}
	case <-t.clock.C():
		stopped = "timeout"
	}
	if stopped == "" {
		return ans, ""
	}
	t.stop()
	_ = a.conn.Cancel(context.Background(), sdk.CancelNotification{SessionId: sdk.SessionId(a.session)})
	wait := time.NewTimer(cancelWait)
	defer wait.Stop()
	select {
	case ans = <-answered:
	case <-wait.C:
		p.log.Warn("the ACP agent did not answer session/cancel; killing its process group", "id", inv.ID, "pid", a.pid)
		a.kill()
		cancelPrompt()
		ans = <-answered
	}
	return ans, stopped
}

// stopResult is the result of a turn that did not end with end_turn: one
// stopped (stopped not empty), an agent that answered with an error or
// exited, or another stop reason. done is false for a turn that ended well.
func stopResult(res adapters.Result, a *agent, t *turn, ans promptAnswer, stopped string) (adapters.Result, string, bool) {
	switch stopped {
	case "cancelled":
		res.Cancelled = true
		return res, "", true
	case "interrupted":
		res.Interrupted = true
		return res, "", true
	case "timeout":
		res.TimedOut = true
		return res, "", true
	case "gave up":
		res.GaveUp, res.StderrTail = true, a.stderr.since(0)
		return res, "", true
	}
	if ans.err != nil {
		if a.dead() {
			// The connection closed; the process may linger.
			select {
			case <-a.exited:
			case <-time.After(closeGrace):
				a.kill()
				<-a.exited
			}
			// What it said last on stderr is the reason; the pipe is read
			// apart from the exit, so wait a moment for its end.
			select {
			case <-a.stderrDone:
			case <-time.After(time.Second):
			}
			res, why := failed(res, fmt.Sprintf("The ACP agent exited during the turn (exit code %d).", a.exitCode), a)
			return res, why, true
		}
		res, why := failed(res, fmt.Sprintf("The ACP agent answered the prompt with an error: %v.", ans.err), a)
		return res, why, true
	}
	if ans.resp.StopReason == sdk.StopReasonEndTurn && unanswered(t, ans.resp) {
		res, why := failed(res, "The ACP agent ended the turn at once, without an answer and without a model call (end_turn, no update, no tokens): it did not run this prompt.", a)
		return res, why, true
	}
	if ans.resp.StopReason == sdk.StopReasonEndTurn {
		return res, "", false
	}
	why := stopReasonWhy(ans.resp.StopReason, t.refusals())
	res, why = failed(res, why, a)
	return res, why, true
}

// stopReasonWhy words a turn's stop reason other than end_turn for the
// thread; refusals is how many permission requests were refused in it.
func stopReasonWhy(reason sdk.StopReason, refusals int) string {
	switch reason {
	case sdk.StopReasonMaxTokens:
		return "The ACP agent stopped because it reached its token limit (max_tokens)."
	case sdk.StopReasonRefusal:
		return "The ACP agent refused to go on (refusal)."
	case sdk.StopReasonMaxTurnRequests:
		return "The ACP agent stopped because it reached its limit of model requests in one turn (max_turn_requests)."
	case sdk.StopReasonCancelled:
		if refusals > 0 {
			return "The ACP agent ended its turn after a permission request was refused."
		}
		return "The ACP agent cancelled the turn itself."
	}
	return fmt.Sprintf("The ACP agent ended the turn with an unknown stop reason %q.", reason)
}

// reportUsage records the turn's usage: tokens from the prompt's answer (its
// usage, else Gemini CLI's _meta.quota.token_count), cost from the agent's
// running total (claude-agent-acp's usage_update) as the difference over
// the turn.
func reportUsage(t *turn, resp sdk.PromptResponse, progress func(adapters.ProgressRecord)) {
	cost, hasCost := t.costDelta()
	u := resp.Usage
	quota, hasQuota := quotaTokens(resp.Meta)
	if u == nil && !hasQuota && !hasCost {
		return
	}
	usage := &adapters.Usage{CostUSD: cost}
	if u == nil && hasQuota {
		usage.InputTokens, usage.OutputTokens = quota[0], quota[1]
	}
	if u != nil {
		usage.InputTokens = int64(u.InputTokens)
		if u.CachedReadTokens != nil {
			usage.InputTokens += int64(*u.CachedReadTokens)
		}
		if u.CachedWriteTokens != nil {
			usage.InputTokens += int64(*u.CachedWriteTokens)
		}
		usage.OutputTokens = int64(u.OutputTokens)
	}
	progress(adapters.ProgressRecord{Status: "usage", Kind: "usage", Usage: usage})
}

// quotaTokens reads {"quota": {"token_count": {"input_tokens",
// "output_tokens"}}} from a prompt answer's _meta, where Gemini CLI
// reports the turn's tokens.
func quotaTokens(meta map[string]any) ([2]int64, bool) {
	quota, _ := meta["quota"].(map[string]any)
	count, _ := quota["token_count"].(map[string]any)
	in, okIn := count["input_tokens"].(float64)
	out, okOut := count["output_tokens"].(float64)
	if !okIn && !okOut {
		return [2]int64{}, false
	}
	return [2]int64{int64(in), int64(out)}, true
}

// stderrTail keeps the end of an agent's stderr and counts what was
// written, so that a turn can take what was written during it.
type stderrTail struct {
	mu    sync.Mutex
	buf   []byte
	total int64
	// watch, while set (watchLines), gets each line written, without its
	// newline; line is the unfinished one (its first stderrKeep bytes).
	watch func(string)
	line  []byte
}

func (s *stderrTail) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.total += int64(len(p))
	s.buf = append(s.buf, p...)
	if len(s.buf) > stderrKeep {
		s.buf = slices.Clone(s.buf[len(s.buf)-stderrKeep:])
	}
	var lines []string
	watch := s.watch
	for rest := p; watch != nil && len(rest) > 0; {
		part, after, full := bytes.Cut(rest, []byte("\n"))
		s.line = append(s.line, part[:min(len(part), max(stderrKeep-len(s.line), 0))]...)
		if full {
			lines = append(lines, string(s.line))
			s.line = s.line[:0]
		}
		rest = after
	}
	s.mu.Unlock()
	// Outside the lock: watch may take its time.
	for _, l := range lines {
		watch(l)
	}
	return len(p), nil
}

// watchLines has f called with each line written from now on (a line
// begun before is read from its next byte); nil stops it.
func (s *stderrTail) watchLines(f func(string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watch, s.line = f, s.line[:0]
}

// mark is the count written so far.
func (s *stderrTail) mark() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// since returns what was written after mark (its kept end).
func (s *stderrTail) since(mark int64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(s.total-mark, int64(len(s.buf)))
	return slices.Clone(s.buf[int64(len(s.buf))-n:])
}

// buildVersion is the module version this binary was built from, for the
// clientInfo of initialize.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

// defaultDir is where per-thread session folders go: dir when set, else
// agent-bridge/acp in the user's cache folder (the temporary folder when
// there is none).
func defaultDir(dir string) string {
	if dir != "" {
		return dir
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "agent-bridge", "acp")
}

// promptWriter is an agent's stdin. It tells when a session/prompt
// request is written: to the turn before the write (open: it collects
// updates from then on) and after it (sent), and to the hook of the
// turn-overhead benchmark.
type promptWriter struct {
	w    io.Writer
	hook *func(time.Time)
	sent *atomic.Pointer[chan struct{}]
	open func()
}

func (pw *promptWriter) Write(b []byte) (int, error) {
	prompt := bytes.Contains(b, []byte(`"method":"session/prompt"`))
	if prompt {
		pw.open()
	}
	n, err := pw.w.Write(b)
	if prompt {
		if pw.hook != nil {
			(*pw.hook)(time.Now())
		}
		if ch := pw.sent.Swap(nil); ch != nil {
			close(*ch)
		}
	}
	return n, err
}

// SkipPresence reports whether inv's pair has a warm session, and if so
// notes that its payload is built without presence: a warm session is
// sent no roster unless who is invited changed, and Run reads the
// presence itself when it is.
func (p *Pool) SkipPresence(inv Invocation) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.agents[pairKey{inv.Thread, inv.Participant}]
	if a == nil || a.busy || a.dead() || a.session == "" {
		return false
	}
	p.noPresence[inv.ID] = true
	return true
}

// tookNoPresence reports (and forgets) whether inv's payload was built
// without presence (SkipPresence).
func (p *Pool) tookNoPresence(id int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.noPresence[id]
	delete(p.noPresence, id)
	return v
}

// rosterKey names who is invited, to tell when a warm session's roster
// is out of date.
func rosterKey(r []adapters.RosterEntry) string {
	ids := make([]string, 0, len(r))
	for _, e := range r {
		ids = append(ids, e.ID)
	}
	return strings.Join(ids, "\x00")
}

// stoppedResult is res for a run whose ctx ended before its prompt: a
// cancel, or the coordinator's shutdown.
func stoppedResult(ctx context.Context, res adapters.Result) adapters.Result {
	res.Finished = time.Now()
	if errors.Is(context.Cause(ctx), adapters.ErrCancelled) {
		res.Cancelled = true
	} else {
		res.Interrupted = true
	}
	return res
}

// SetPromptHook has f called with the time each session/prompt request is
// written to an agent started from then on: the turn-overhead benchmarks
// measure from it.
func (p *Pool) SetPromptHook(f func(time.Time)) { p.promptWritten.Store(&f) }
