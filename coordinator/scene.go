package coordinator

import (
	"encoding/json"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// sceneRun is what an actor's invocation knows of its scene step.
type sceneRun struct {
	step agentbridge.SceneStep
	// next is the actor the speech goes to.
	next string
	// threadName labels the journal entry.
	threadName string
}

// sceneBriefing adds the actor's own briefing to p (contract 5.8): its
// character, journal and brief, never another actor's; primer, the actor
// system prompt, replaces the thread primer.
func sceneBriefing(p *adapters.Payload, step agentbridge.SceneStep, threadName string, journal []ledger.JournalEntry, primer string) *sceneRun {
	actor := p.Participant.ID
	sc := step.Scene
	with := make([]string, 0, len(sc.Actors)-1)
	for _, a := range sc.Actors {
		if a != actor {
			with = append(with, a)
		}
	}
	p.Scene = &adapters.ScenePayload{
		Actor: actor, Character: p.Participant.Profile.Character, Journal: ledger.JournalText(journal),
		Brief: sc.Briefs[actor], Setting: sc.Setting, Turn: step.Turn, Nudge: step.Nudge, Step: step.Step, With: with,
	}
	if p.Trigger.Type == agentbridge.TypeControl {
		p.Content, p.Trigger.Content = SceneStartContent, SceneStartContent
	}
	p.Primer = primer
	return &sceneRun{step: step, next: sc.NextAfter(actor), threadName: threadName}
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

// correctionPayload is the payload and body of a scene turn's correction
// run, when a successful turn did not use the <thinking> and <speech> tags
// (ok false otherwise).
func correctionPayload(in prepared, res adapters.Result) (adapters.Payload, []byte, bool) {
	if in.scene == nil || in.scene.step.Step == agentbridge.SceneStepJournal || !res.OK() {
		return adapters.Payload{}, nil, false
	}
	if _, _, ok := agentbridge.ParseSceneOutput(string(res.Stdout)); ok {
		return adapters.Payload{}, nil, false
	}
	p := in.p
	sc := *p.Scene
	sc.Nudge = agentbridge.CorrectionPrompt + "\n\nYour last response was:\n\n" + strings.TrimSpace(string(res.Stdout))
	p.Scene = &sc
	body, err := json.Marshal(p)
	if err != nil {
		body = in.payload
	}
	return p, body, true
}
