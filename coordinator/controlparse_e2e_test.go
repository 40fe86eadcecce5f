package coordinator_test

import (
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestControlParsedOnceInCoordinator: a control event is parsed once on
// its path through the coordinator, by process, which hands the parsed
// control to the rules, the control handlers and the fold. The bridge runs
// in this process too and parses an appended control once (the bridge's
// TestControlParsedOnce), so each control counts 2 here: 1 each.
func TestControlParsedOnceInCoordinator(t *testing.T) {
	s := startStack(t, nil)
	th := s.thread("parsed once")
	s.decision(s.say(th, "all", "warm the thread's cached state").ID)
	controls := []struct {
		name    string
		content any
	}{
		{"pause (the fold)", map[string]any{"pause": map[string]any{"on": true}}},
		{"resume", map[string]any{"pause": map[string]any{"on": false}}},
		{"reset_session (its handler)", map[string]any{"reset_session": map[string]any{"participant_id": "alice"}}},
		{"cancel with nothing running (its handler)", map[string]any{"cancel": map[string]any{"participant_id": "alice"}}},
		{"mute", map[string]any{"mute": map[string]any{"targets": []string{"bob"}}}},
	}
	for _, c := range controls {
		before := agentbridge.ControlParses()
		s.control(th, "user", c.content)
		// The follow loop handles events in order and folds a batch before
		// it reads the next event, so the control is decided, handled and
		// folded once the second message after it is decided.
		s.decision(s.say(th, "all", "after "+c.name).ID)
		s.decision(s.say(th, "all", "and once more").ID)
		if n := agentbridge.ControlParses() - before; n != 2 {
			t.Errorf("%s: parsed %d times in this process, want 2 (1 at the bridge's append, 1 in the coordinator)", c.name, n)
		}
	}
}
