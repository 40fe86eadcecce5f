package coordinator_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator"
)

// TestSelfCommandAndBuiltinPrimer runs an agent whose command is
// "agent-bridge" (the coordinator's own executable, here the fake adapter)
// with a primer_path that names no file, as a coordinator started away from
// the repository has: the agent runs, and its payload carries the primer
// built into the binary.
func TestSelfCommandAndBuiltinPrimer(t *testing.T) {
	s := startStack(t, func(cfg *coordinator.Config) {
		cfg.Agents["dave"] = coordinator.AgentConfig{Command: []string{coordinator.SelfCommand}}
		cfg.PrimerPath = filepath.Join(t.TempDir(), "no-such-primer.md")
	})
	th := s.thread("self")
	s.invite(th, "dave", agentbridge.Profile{})
	trigger := s.say(th, "dave", "hi")
	s.waitReplies(th, trigger.ID, 1)
	var p struct {
		Primer string `json:"primer"`
	}
	if err := json.Unmarshal(s.savedPayload(trigger.ID, "dave"), &p); err != nil {
		t.Fatal(err)
	}
	if p.Primer == "" || p.Primer != agentbridge.BuiltinPrimer() {
		t.Errorf("primer = %.80q…, want the built-in primer", p.Primer)
	}
}
