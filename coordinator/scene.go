package coordinator

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// Scene rules and reasons (contract 5.8). A scene's turns are decided
// here, inside Decide, from the thread's state before and after the event:
// the scene lives in the fold, so these rules stay a pure function of
// (state, event) like the others.
const (
	// RuleScene routes a scene's start and its speeches: the next actor
	// speaks. The loop guard does not apply; the scene's caps do.
	RuleScene = "scene"
	// RuleSceneJournal asks every actor for a journal entry after
	// scene.closed.
	RuleSceneJournal = "scene-journal"
	// SkipSceneOver is the skip reason of a speech posted after its scene
	// stopped running (a turn that was queued when a human closed it).
	SkipSceneOver = "scene not running"
	// ReasonInScene is why an actor is not woken by other messages while
	// its scene runs: it speaks only in turn.
	ReasonInScene = "in a scene"
)

// decideScene applies the scene rules to e. It returns true when it made
// the decision; otherwise the ordinary rules run (and finishScene drops
// the actors of a running scene from their targets).
func (r *router) decideScene() bool {
	before := r.state
	switch r.e.Type {
	case agentbridge.TypeControl, agentbridge.TypeMessage:
		if before.Scene == nil && !(r.e.Type == agentbridge.TypeControl && r.cfg.HumanIDs.Has(r.e.From)) {
			return false
		}
	case agentbridge.TypeSceneClosed:
		if before.Scene == nil || before.Scene.Status == agentbridge.SceneClosed {
			return false
		}
		r.d.Rule = RuleSceneJournal
		r.want = slices.Clone(before.Scene.Actors)
		return true
	default:
		return false
	}
	after := agentbridge.Fold(before, r.e, r.cfg.HumanIDs)
	if reason, ok := agentbridge.SceneClosedBy(before, after); ok {
		r.d.Rule = RuleScene
		r.d.SceneClose = reason
		return true
	}
	if agentbridge.SceneStarted(before, after) {
		r.d.Rule = RuleScene
		r.want = []string{after.Scene.First}
		return true
	}
	if r.e.Type != agentbridge.TypeMessage {
		return false
	}
	m, ok := agentbridge.SceneMetaOf(r.e)
	if !ok || m.Turn == 0 {
		return false
	}
	if !before.Scene.Running() || !before.Scene.HasActor(r.e.From) {
		r.d.Rule, r.d.Reason = RuleSkip, SkipSceneOver
		return true
	}
	r.d.Rule = RuleScene
	r.want = []string{after.Scene.Next}
	return true
}

// dropActors keeps a running scene's actors out of any other rule's
// targets: they speak only in turn.
func (r *router) dropActors() {
	sc := r.state.Scene
	if !sc.Running() || r.d.Rule == RuleScene || r.d.Rule == RuleSceneJournal {
		return
	}
	keep := r.d.Invoke[:0]
	for _, t := range r.d.Invoke {
		if sc.HasActor(t.Participant) {
			r.skip(t.Participant, ReasonInScene)
			continue
		}
		keep = append(keep, t)
	}
	r.d.Invoke = keep
}

// sceneRun is what an actor's invocation knows of its scene step.
type sceneRun struct {
	step agentbridge.SceneStep
	// next is the actor the speech goes to.
	next string
	// threadName labels the journal entry.
	threadName string
}

// sceneBriefing adds the actor's own briefing to p (contract 5.8): its
// character, journal and brief, never another actor's.
func (c *Coordinator) sceneBriefing(ctx context.Context, cfg *Config, p *adapters.Payload, step agentbridge.SceneStep, threadName string) (*sceneRun, error) {
	actor := p.Participant.ID
	entries, err := c.db.Journal(ctx, actor)
	if err != nil {
		return nil, err
	}
	sc := step.Scene
	with := make([]string, 0, len(sc.Actors)-1)
	for _, a := range sc.Actors {
		if a != actor {
			with = append(with, a)
		}
	}
	p.Scene = &adapters.ScenePayload{
		Actor: actor, Character: p.Participant.Profile.Character, Journal: ledger.JournalText(entries),
		Brief: sc.Briefs[actor], Setting: sc.Setting, Turn: step.Turn, Nudge: step.Nudge, Step: step.Step, With: with,
	}
	if p.Trigger.Type == agentbridge.TypeControl {
		p.Content, p.Trigger.Content = SceneStartContent, SceneStartContent
	}
	// The actor system prompt replaces the thread primer.
	p.Primer = c.readPrimer(cfg.ScenePrimerPath, agentbridge.BuiltinScenePrimer())
	return &sceneRun{step: step, next: sc.NextAfter(actor), threadName: threadName}, nil
}

// withoutControls drops controls from an actor's context: invites hold
// every actor's character sheet and the scene control every brief.
func withoutControls(events []agentbridge.Event) []agentbridge.Event {
	out := events[:0:0]
	for _, e := range events {
		if e.Type != agentbridge.TypeControl {
			out = append(out, e)
		}
	}
	return out
}

// SceneStartContent is the message the first actor receives when a scene
// starts (the trigger is the human's control, which it must not read).
const SceneStartContent = "The scene begins now. You speak first."

// sceneOutcome turns a successful actor run into what is owed to the
// thread: for a turn, its private thinking and its speech to the next
// actor, after at most one correction run; for the journal step, the
// private journal event and the journal entry itself. It returns the last
// adapter result (the correction run's when there was one).
func (c *Coordinator) sceneOutcome(ctx context.Context, cfg *Config, inv ledger.Invocation, in prepared, res adapters.Result, o *ledger.Outcome) adapters.Result {
	sr := in.scene
	private := map[string]json.RawMessage{agentbridge.MetaPrivate: json.RawMessage("true")}
	meta := func(extra map[string]json.RawMessage) agentbridge.Meta {
		return agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator"}, Extra: extra}
	}
	if sr.step.Step == agentbridge.SceneStepJournal {
		text := adapters.TruncateReply(string(res.Stdout), cfg.MaxReplyChars)
		o.Status = ledger.StatusSucceeded
		o.Post = mustJSON(agentbridge.EventInput{Type: agentbridge.TypeJournal, From: inv.Participant, To: inv.Participant,
			Content: mustJSON(text), Meta: meta(private)})
		o.Journal = &ledger.JournalEntry{Participant: inv.Participant, Thread: inv.Thread, ThreadName: sr.threadName, Entry: text}
		return res
	}
	thinking, speech, ok := agentbridge.ParseSceneOutput(string(res.Stdout))
	corrected := false
	if !ok {
		p := in.p
		sc := *p.Scene
		sc.Nudge = agentbridge.CorrectionPrompt + "\n\nYour last response was:\n\n" + strings.TrimSpace(string(res.Stdout))
		p.Scene = &sc
		body, err := json.Marshal(p)
		if err != nil {
			body = in.payload
		}
		// The first run's progress monitor has stopped; the correction
		// run reports no progress.
		var why string
		res, why = c.runAgent(ctx, inv, in, p, body, nil)
		o.Finished, o.OutputBytes, o.StderrTail = res.Finished, o.OutputBytes+res.StdoutBytes, string(res.StderrTail)
		switch {
		case res.Cancelled:
			o.Status, o.Error = ledger.StatusCancelled, cancelReason("")
			return res
		case res.Interrupted:
			o.Status, o.Error = ledger.StatusInterrupted, adapters.ErrorMessage(res, cfg.AdapterTimeout)
			return res
		case !res.OK():
			o.Status = ledger.StatusFailed
			if res.TimedOut {
				o.Status = ledger.StatusTimeout
			}
			o.Error = adapters.ErrorMessage(res, cfg.AdapterTimeout)
			if why != "" {
				o.Error = why
			}
			post := c.errorPost(cfg, inv, o.Error)
			post.Meta.Extra[agentbridge.MetaScene] = mustJSON(agentbridge.SceneMeta{Close: agentbridge.CloseError})
			o.Post = mustJSON(post)
			return res
		}
		thinking, speech, ok = agentbridge.ParseSceneOutput(string(res.Stdout))
		corrected = true
	}
	if !ok {
		o.Status = ledger.StatusFailed
		o.Error = "the answer did not use the <thinking> and <speech> tags, even after the correction prompt"
		post := c.errorPost(cfg, inv, "Its answer did not use the <thinking> and <speech> tags, even after the correction prompt, so the scene is closed.")
		post.Meta.Extra[agentbridge.MetaScene] = mustJSON(agentbridge.SceneMeta{Close: agentbridge.CloseError})
		o.Post = mustJSON(post)
		return res
	}
	o.Status = ledger.StatusSucceeded
	var posts []agentbridge.EventInput
	if thinking != "" {
		posts = append(posts, agentbridge.EventInput{Type: agentbridge.TypeThinking, From: inv.Participant, To: inv.Participant,
			Content: mustJSON(adapters.TruncateReply(thinking, cfg.MaxReplyChars)), Meta: meta(private)})
	}
	// No meta.hop: a scene's speeches are not bound by the loop guard, and
	// the bridge derives the hop from reply_to (contract 5.1).
	sm := meta(map[string]json.RawMessage{agentbridge.MetaScene: mustJSON(agentbridge.SceneMeta{Turn: sr.step.Turn, Corrected: corrected})})
	posts = append(posts, agentbridge.EventInput{Type: agentbridge.TypeMessage, From: inv.Participant, To: sr.next,
		Content: mustJSON(adapters.TruncateReply(speech, cfg.MaxReplyChars)), Meta: sm})
	o.Post = mustJSON(posts)
	return res
}
