package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// Preparing a run is gather, then plan: gather does every read (the
// ledger, the bridge, the primer files, presence) into an invokeFacts, and
// buildPayload turns the facts and the config into the adapter's spec and
// payload without any I/O, so the payload rules are tested as a table.

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
	// token is the run's agent token (agenttoken.go), nil for an ACP
	// agent, whose process holds its own.
	token *agentToken
	// workspace is the workspace the run works in ("" for none): the
	// thread's pick, else the agent entry's (config.WorkspaceFor).
	workspace string
	// tree is the run's worktree once readied (workspaces.begin).
	tree *runTree
	// why, with startErr, is the sentence for the thread when the run
	// could not be prepared within its retry budget.
	why string
}

// invokeFacts is what building one invocation's payload reads from
// outside the coordinator's config.
type invokeFacts struct {
	inv     ledger.Invocation
	trigger agentbridge.Event
	// events are the thread's last events up to and including the
	// trigger, oldest first: at least the context window and the span
	// since_last_turn needs.
	events []agentbridge.Event
	// after is the thread's state at the trigger.
	after agentbridge.ThreadState
	// profile is the profile the run uses (profileFor): the invite's that
	// the decision matched, or the agent's own.
	profile agentbridge.Profile
	// step is the actor's scene step when inScene (agentbridge.SceneStepFor
	// at the trigger).
	step       agentbridge.SceneStep
	inScene    bool
	threadName string
	session    adapters.SessionInfo
	// presence is each participant's presence for the roster (nil for a
	// warm ACP session, which is sent no roster).
	presence map[string]string
	// party is a party invocation's block; partyAnswers are, for round 2,
	// the round-1 answers after the trigger.
	party        *adapters.PartyInfo
	partyAnswers []agentbridge.Event
	// journal is an actor's journal, for a scene step.
	journal []ledger.JournalEntry
	// primer is the thread primer, scenePrimer the actor's (scene steps).
	primer, scenePrimer string
	// exe is this binary, for SelfCommand and the adapter's environment.
	exe string
}

// prepare gathers the facts of a job and builds the adapter's spec and
// payload. A bridge or ledger out of reach is waited for until ctx ends;
// only then is an error returned. A failure of the run's own (poisoned:
// its context does not decode, its trigger or party round is not there)
// is tried again within the run's retry budget (contract 8.3), counted in
// the ledger so that a restart does not renew it; past it, and for a
// thread that is gone, it gives a prepared with startErr: the run fails
// with one error notice, and its pair's queue moves on.
func (c *Coordinator) prepare(ctx context.Context, j job, cfg *config.Config) (prepared, error) {
	var f invokeFacts
	var spent string
	err := c.retry(ctx, retrying{what: "prepare invocation", attrs: []any{"id", j.inv.ID},
		permanent: func(err error) bool { return bridgeStatus(err, http.StatusNotFound) || spent != "" }},
		func() (err error) {
			if f, err = c.gather(ctx, j, cfg); err != nil && poisoned(err) {
				spent = c.spendRetry(ctx, j.inv, cfg, err)
			}
			return err
		})
	switch {
	case ctx.Err() != nil:
		return prepared{}, ctx.Err()
	case err != nil:
		// The thread is gone, or the budget is spent: nothing to run.
		return prepared{startErr: err, why: spent}, nil
	}
	p, err := buildPayload(f, cfg)
	if err != nil {
		return prepared{startErr: err}, nil
	}
	return p, nil
}

// errTriggerMissing is a context read back without the run's trigger.
var errTriggerMissing = errors.New("the trigger is not among the thread's events")

// poisoned reports whether err, a failed gather, is the run's own: an
// answer that cannot be decoded, a refusal, a trigger or a party round
// that is not there. Those are what the retry budget counts; the bridge or
// the ledger out of reach (no answer, a 5xx, 408 or 429) is waited out,
// as every loop of the coordinator waits it out.
func poisoned(err error) bool {
	var ae *agentbridge.Error
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &ae):
		return ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusRequestTimeout && ae.Status != http.StatusTooManyRequests
	case errors.As(err, &se), errors.As(err, &te):
		return true
	}
	return errors.Is(err, ledger.ErrNotFound) || errors.Is(err, errTriggerMissing)
}

// spendRetry counts one more poisoned attempt to prepare inv in the
// ledger, and returns the sentence for the thread once the budget
// (run_retry_attempts, run_retry_window_s) is spent, else "". A ledger
// that cannot count leaves the budget as it was.
func (c *Coordinator) spendRetry(ctx context.Context, inv ledger.Invocation, cfg *config.Config, cause error) string {
	now := time.Now()
	n, first, err := c.db.PrepareFailed(context.WithoutCancel(ctx), inv.ID, now)
	if err != nil {
		c.log.Warn("cannot count a failed preparation", "id", inv.ID, "err", err)
		return ""
	}
	if n < cfg.RunRetryAttempts && now.Sub(first) < cfg.RunRetryWindow {
		return ""
	}
	c.log.Error("a run could not be prepared within its retry budget; failing it", "id", inv.ID, "thread", inv.Thread,
		"participant", inv.Participant, "trigger", inv.TriggerID, "attempts", n, "err", cause)
	return fmt.Sprintf("%s's run for this message could not be prepared: %d attempts in %s failed (%s). It is given up; %s's next messages here are answered as usual.",
		inv.Participant, n, now.Sub(first).Round(time.Second), agentbridge.Clip(cause.Error(), 300), inv.Participant)
}

// gather reads what buildPayload needs: the events up to the trigger (from
// the follow loop's recent events when they cover the span), the thread's
// state and name, the pair's session, presence, the party round and the
// actor's journal, and the primers.
func (c *Coordinator) gather(ctx context.Context, j job, cfg *config.Config) (invokeFacts, error) {
	inv := j.inv
	f := invokeFacts{inv: inv, exe: c.exe}
	// A warm ACP session needs no presence for its roster (acp.Pool.SkipPresence).
	presence := c.payloadPresence(ctx, inv)
	// One read serves both the context window and since_last_turn.
	sinceNeed, err := c.sinceSpan(ctx, inv)
	if err != nil {
		return f, err
	}
	if f.events, err = c.eventsUpTo(ctx, inv, max(cfg.ContextWindowSize, sinceNeed)); err != nil {
		return f, err
	}
	f.trigger = f.events[len(f.events)-1]
	if j.trigger != nil {
		f.trigger = *j.trigger
	}
	var invited agentbridge.Profile
	if f.after, invited, err = c.stateAt(ctx, j); err != nil {
		return f, err
	}
	if f.threadName, err = c.threadName(ctx, inv.Thread); err != nil {
		return f, err
	}
	f.profile = profileFor(invited, cfg.Agents[inv.Agent])
	if f.session, err = c.sessionFor(ctx, inv, f.profile.Client); err != nil {
		return f, err
	}
	f.presence = presence()
	if inv.Round > 0 {
		if f.party, f.partyAnswers, err = c.partyFacts(ctx, inv); err != nil {
			return f, err
		}
	}
	f.primer = c.readPrimer(cfg.PrimerPath, agentbridge.BuiltinPrimer())
	if f.step, f.inScene = agentbridge.SceneStepFor(f.after, f.trigger, inv.Participant); f.inScene {
		if f.journal, err = c.db.Journal(ctx, inv.Participant); err != nil {
			return f, err
		}
		f.scenePrimer = c.readPrimer(cfg.ScenePrimerPath, agentbridge.BuiltinScenePrimer())
	}
	return f, nil
}

// stateAt is the thread's state at j's trigger and the participant's
// invited profile: the state the follow loop handed on, or else read from
// the bridge (a recovered job); the profile its invocation keeps, or else
// (a record without one) the invite's in that state.
func (c *Coordinator) stateAt(ctx context.Context, j job) (agentbridge.ThreadState, agentbridge.Profile, error) {
	kept := j.inv.Profile
	if j.after != nil && kept != nil {
		return *j.after, *kept, nil
	}
	st, _, err := c.bridge.State(ctx, j.inv.Thread, j.inv.TriggerSeq)
	if err != nil {
		return st, agentbridge.Profile{}, fmt.Errorf("read thread state: %w", err)
	}
	if kept != nil {
		return st, *kept, nil
	}
	invite, _ := st.Invited(j.inv.Participant)
	return st, invite.Profile, nil
}

// eventsUpTo returns the thread's last span events up to inv's trigger,
// oldest first.
func (c *Coordinator) eventsUpTo(ctx context.Context, inv ledger.Invocation, span int) ([]agentbridge.Event, error) {
	if events, ok := c.recent.Window(inv.Thread, inv.TriggerSeq, span, inv.TriggerID); ok {
		return events, nil
	}
	events, err := c.bridge.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{
		Thread: inv.Thread, After: -1, Until: inv.TriggerSeq, Tail: span,
	})
	if err != nil {
		return nil, fmt.Errorf("read context window: %w", err)
	}
	if len(events) == 0 || events[len(events)-1].ID != inv.TriggerID {
		return nil, fmt.Errorf("trigger %s at seq %d of thread %s: %w", inv.TriggerID, inv.TriggerSeq, inv.Thread, errTriggerMissing)
	}
	return events, nil
}

// profileFor is the profile a run uses: the invite's, or the agent's own
// when the invite names no client.
func profileFor(invited agentbridge.Profile, agent config.Agent) agentbridge.Profile {
	if agent.Profile != nil && invited.Client == "" {
		return *agent.Profile
	}
	return invited
}

// buildPayload turns the facts of one invocation into the adapter's spec
// and payload: the context window the participant may see, since_last_turn,
// the roster, the party block, an actor's briefing, the environment. It
// does no I/O. An agent no longer in the config gives startErr.
func buildPayload(f invokeFacts, cfg *config.Config) (prepared, error) {
	inv := f.inv
	agent, ok := cfg.Agents[inv.Agent]
	if !ok {
		return prepared{startErr: fmt.Errorf("the agent %q is no longer in the coordinator's config", inv.Agent)}, nil
	}
	events := f.events
	since := sinceLastTurn(events, inv.Participant)
	window := events[len(events)-min(cfg.ContextWindowSize, len(events)):]
	window = agentbridge.VisibleTo(window, inv.Participant)
	if f.inScene {
		window = withoutControls(window)
		// The scene and invite controls hold every actor's brief and
		// character: an actor sees its own only, in its briefing.
		since = withoutControls(since)
	}
	payload := adapters.NewPayload(cfg.BridgeURL, agentbridge.Thread{ID: inv.Thread, Name: f.threadName}, f.trigger, inv.Participant, f.profile, window, f.primer)
	payload.SinceLastTurn = since
	payload.Session = f.session
	payload.Participants = adapters.Roster(f.after.Participants.Invited, f.presence, cfg.HumanIDs)
	if inv.Round > 0 && f.party != nil {
		party := *f.party
		payload.Party = &party
		payload.ContextWindow = append(payload.ContextWindow, f.partyAnswers...)
		if inv.Round >= 2 {
			payload.SinceLastTurn = partySince(f.trigger, payload.ContextWindow, inv.Participant)
		}
	}
	var scene *sceneRun
	if f.inScene {
		scene = sceneBriefing(&payload, f.step, f.threadName, f.journal, f.scenePrimer)
	}
	var body []byte
	if len(agent.ACP) == 0 { // an ACP turn renders the payload itself
		var err error
		if body, err = json.Marshal(payload); err != nil {
			return prepared{}, fmt.Errorf("encode payload: %w", err)
		}
	}
	return prepared{
		spec:      adapters.Spec{Command: commandFor(agent.Command, f.exe), Dir: agent.Cwd, Env: adapterEnv(agent.Env, payload, f.exe), Timeout: cfg.AdapterTimeout},
		payload:   body,
		scene:     scene,
		p:         payload,
		trigger:   f.trigger,
		workspace: cfg.WorkspaceFor(inv.Agent, inv.Participant, f.after),
	}, nil
}

// adapterEnv is the adapter's environment beyond the coordinator's own:
// the agent's variables in key order, then the bridge's and this binary.
func adapterEnv(vars map[string]string, payload adapters.Payload, exe string) []string {
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, 0, len(keys)+6)
	for _, k := range keys {
		if k != adapters.EnvToken { // the run's own token is added instead
			env = append(env, k+"="+vars[k])
		}
	}
	env = append(env, adapters.BridgeEnv(payload)...)
	return append(env, adapters.EnvAgentBridgeBin+"="+exe)
}

// commandFor is an agent's argv with SelfCommand replaced by exe.
func commandFor(argv []string, exe string) []string {
	if len(argv) == 0 || argv[0] != config.SelfCommand {
		return argv
	}
	return append([]string{exe}, argv[1:]...)
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

// threadName returns the cached name of a thread, asking the bridge when
// the coordinator has not met it yet (recovery).
func (c *Coordinator) threadName(ctx context.Context, thread string) (string, error) {
	if tc, ok := c.threads.Get(thread); ok {
		return tc.name, nil
	}
	th, err := c.bridge.Thread(ctx, thread)
	if err != nil {
		return "", fmt.Errorf("read thread %s: %w", thread, err)
	}
	return th.Name, nil
}

// sessionFor is the payload's session for the invocation's pair.
func (c *Coordinator) sessionFor(ctx context.Context, inv ledger.Invocation, client string) (adapters.SessionInfo, error) {
	s, err := c.db.Session(ctx, inv.Thread, inv.Participant, client)
	if err != nil {
		return adapters.SessionInfo{}, err
	}
	return adapters.SessionInfo{ID: s.ID, Turns: s.Turns}, nil
}
