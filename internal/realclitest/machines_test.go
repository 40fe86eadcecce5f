package realclitest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// otherCoordinator starts a coordinator process of its own (as another
// machine's: its own state, status port, coordinator token, and HOME home)
// named id, serving agents (config entries) on s's bridge, and returns a
// stack whose status API is its.
func (s *stack) otherCoordinator(id, home string, agents map[string]any) *stack {
	t := s.t
	t.Helper()
	tok, err := s.cl.CreateToken(t.Context(), agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: id})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	statusAddr := testutil.FreeAddr(t)
	cfg, _ := json.Marshal(map[string]any{
		"bridge_url": s.bridgeURL, "coordinator_id": id, "host": id, "status_addr": statusAddr,
		"startup_mode": "resume", "shutdown_grace_s": 5, "adapter_timeout_s": 120,
		"primer_path": filepath.Join(root, "docs", "bridge-agent-primer.md"),
		"agents":      agents,
	})
	cfgPath := filepath.Join(dir, "coordinator.config.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	startProc(t, "coordinator "+id, []string{"BRIDGE_TOKEN=" + tok.Secret, "HOME=" + home},
		"coordinator", "--config", cfgPath, "--state", filepath.Join(dir, "coordinator.db"))
	return &stack{t: t, statusURL: "http://" + statusAddr, token: s.token}
}

// TestRealClaudeOnTwoMachines: the real claude CLI, served by two
// coordinators as two machines would (each its own process, HOME, state,
// status port, coordinator token and model server), answers each message
// once, from one machine: the runs are claimed at the bridge (contract
// 7.1), so one machine's model sees each question and the other's never.
func TestRealClaudeOnTwoMachines(t *testing.T) {
	t.Parallel()
	need(t)
	laptop := newAgent(t, "claude", "claude")
	s := newStackWith(t, true, laptop)
	server := newAgent(t, "claude", "claude")
	for _, a := range []*agent{laptop, server} {
		a.fake.SetDefault(fakemodel.Reply{Text: "an answer"})
	}
	s.otherCoordinator("server", server.home,
		map[string]any{"claude": map[string]any{"command": []string{server.adapter()}, "cwd": server.work, "env": server.env(t)}})
	testutil.WaitFor(t, 30*time.Second, "both coordinators to serve claude", func() bool {
		list, err := s.cl.Coordinators(t.Context())
		return err == nil && len(list.Agents["claude"]) == 2
	})

	thread := s.thread("two machines")
	for _, q := range []string{"question one", "question two", "question three"} {
		before := map[*agent]int{laptop: len(laptop.fake.Calls()), server: len(server.fake.Calls())}
		trig := s.ask(thread, laptop, q)
		s.answer(thread, trig, replyTimeout)
		// Each question is in the context of the later ones: what counts
		// is which model was called for it, while it was the newest.
		ran := 0
		for _, a := range []*agent{laptop, server} {
			for _, c := range a.fake.CallsSince(before[a]) {
				if c.Contains(q) {
					ran++
					break
				}
			}
		}
		if ran != 1 {
			t.Errorf("%q reached %d machines' models, want 1", q, ran)
		}
		if n := len(s.answers(thread, trig.ID)); n != 1 {
			t.Errorf("%q: %d answers, want 1", q, n)
		}
	}
}
