package rules

import (
	"encoding/json"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

func speech(from, to string, turn, hop int, text string) agentbridge.Event {
	e := msg(from, to, text)
	m, _ := json.Marshal(agentbridge.SceneMeta{Turn: turn})
	e.Meta = agentbridge.Meta{Hop: &hop, Extra: map[string]json.RawMessage{agentbridge.MetaScene: m}}
	return e
}

// TestDecideScene table-tests the scene rules: they are part of Decide, a
// pure function of (state, event).
func TestDecideScene(t *testing.T) {
	cfg := testConfig()
	cfg.MaxAgentHops = 2
	start := ctl("user", `{"scene":{"on":true,"actors":["codex","echo"],"first":"echo"}}`)
	base := []agentbridge.Event{invite("codex", "codex", "m", ""), invite("echo", "echo", "m", ""), invite("claude", "claude", "m", "")}
	running := fold(append(base, start)...)
	closing := agentbridge.Fold(running, ctl("user", `{"scene":{"on":false}}`), cfg.HumanIDs)
	closedEv := agentbridge.Event{ID: "S1", Thread: "T1", Type: agentbridge.TypeSceneClosed, From: "bridge-coordinator", To: "all", Content: json.RawMessage(`"explicit"`)}
	tests := []struct {
		name   string
		state  agentbridge.ThreadState
		e      agentbridge.Event
		rule   string
		invoke []string
		close  string
		skip   map[string]string
	}{
		{name: "start runs first", state: fold(base...), e: start, rule: RuleScene, invoke: []string{"echo"}},
		{name: "a non-human's start does nothing", state: fold(base...), e: ctl("claude", start.Text()), rule: RuleSkip},
		{name: "speech runs the next actor past the hop limit", state: running, e: speech("echo", "codex", 1, 5, "hi"), rule: RuleScene, invoke: []string{"codex"}},
		{name: "explicit end closes", state: running, e: speech("echo", "codex", 1, 1, agentbridge.SceneEndMarker), rule: RuleScene, close: agentbridge.CloseExplicit},
		{name: "off closes", state: running, e: ctl("user", `{"scene":{"on":false}}`), rule: RuleScene, close: agentbridge.CloseExplicit},
		{name: "off when closing does nothing", state: closing, e: ctl("user", `{"scene":{"on":false}}`), rule: RuleSkip},
		{name: "scene.closed asks for journals", state: closing, e: closedEv, rule: RuleSceneJournal, invoke: []string{"codex", "echo"}},
		{name: "a second scene.closed asks nothing", state: agentbridge.Fold(closing, closedEv, cfg.HumanIDs), e: closedEv, rule: RuleSkip},
		{name: "speech after the close wakes nobody", state: closing, e: speech("echo", "codex", 2, 1, "late"), rule: RuleSkip},
		{name: "actors are not woken by others", state: running, e: msg("user", "all", "@codex @claude hello"), rule: RuleMention,
			invoke: []string{"claude"}, skip: map[string]string{"codex": ReasonInScene}},
		{name: "error notice closes", state: running, e: func() agentbridge.Event {
			e := msg("bridge-coordinator", "all", "echo could not answer")
			e.Meta.Extra = map[string]json.RawMessage{agentbridge.MetaScene: json.RawMessage(`{"close":"error"}`)}
			return e
		}(), rule: RuleScene, close: agentbridge.CloseError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.state, tt.e, agentbridge.ControlOf(tt.e), cfg, nil)
			if d.Rule != tt.rule || d.SceneClose != tt.close || d.LoopGuard {
				t.Fatalf("decision = %+v, want rule %s close %q", d, tt.rule, tt.close)
			}
			var got []string
			for _, tg := range d.Invoke {
				got = append(got, tg.Participant)
			}
			if len(got) != len(tt.invoke) {
				t.Fatalf("invoke = %v, want %v", got, tt.invoke)
			}
			for i := range got {
				if got[i] != tt.invoke[i] {
					t.Fatalf("invoke = %v, want %v", got, tt.invoke)
				}
			}
			for p, r := range tt.skip {
				if reasons(d.Skipped)[p] != r {
					t.Errorf("skipped = %+v, want %s: %s", d.Skipped, p, r)
				}
			}
		})
	}
}

func reasons(sk []Skip) map[string]string {
	out := map[string]string{}
	for _, s := range sk {
		out[s.Participant] = s.Reason
	}
	return out
}
