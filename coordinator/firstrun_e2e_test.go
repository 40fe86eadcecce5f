package coordinator_test

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestSelfCommandAndBuiltinPrimer runs an agent whose command is
// "agent-bridge" (the coordinator's own executable, here the fake adapter)
// with a primer_path that names no file, as a coordinator started away from
// the repository has: the agent runs, and its payload carries the primer
// built into the binary.
func TestSelfCommandAndBuiltinPrimer(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(cfg *config.Config) {
		cfg.Agents["dave"] = config.Agent{Command: []string{config.SelfCommand}}
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

// TestWarnsWhenHumansDiffer: a coordinator whose human_ids are not the
// bridge's --humans says so when it starts (and one whose are, does not).
func TestWarnsWhenHumansDiffer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		humans agentbridge.Humans
		warn   bool
	}{{agentbridge.Humans{"alice"}, true}, {agentbridge.Humans{"user"}, false}} {
		var logs testutil.Buffer
		s := newStack(t)
		s.logger = slog.New(slog.NewTextHandler(&logs, nil))
		s.cfg.HumanIDs = tc.humans
		s.startCoordinator()
		if got := strings.Contains(logs.String(), "differ from this config's human_ids"); got != tc.warn {
			t.Errorf("human_ids %v: warned %v, want %v; logs:\n%s", tc.humans, got, tc.warn, logs.String())
		}
		s.stopCoordinator()
	}
}
