package rules

import (
	"slices"

	agentbridge "github.com/agent-bridge/agent-bridge"
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
// the decision; otherwise the ordinary rules run (and dropActors drops
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
	after := agentbridge.FoldParsed(before, r.e, r.ctl, r.cfg.HumanIDs)
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
