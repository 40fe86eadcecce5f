package realclitest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
)

// The real claude, run by the coordinator for a question in one thread,
// finds a decision posted in another thread through the MCP tool search
// ("agent-bridge mcp" on the run's own agent token, as
// AGENT_BRIDGE_CLAUDE_ARGS configures it) and quotes it in its reply; the
// fake model's SearchMarker makes the call. A thread claude is not
// invited to is never among the hits (contract 8.6).
func TestRealClaudeSearchesAnotherThread(t *testing.T) {
	t.Parallel()
	need(t)
	a := newAgent(t, "claude", "claude")
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"bridge": map[string]any{
		"command": bin, "args": []string{"mcp", "--as", a.id}}}})
	path := filepath.Join(a.work, "mcp.json")
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	a.extras["AGENT_BRIDGE_CLAUDE_ARGS"] = "--mcp-config " + path + " --strict-mcp-config --allowedTools mcp__bridge__search"
	a.fake.SetResponder(fakemodel.SearchResponder("bridge"))
	s := newStackWith(t, true, a)

	const decision = "Decision: we ship the parser on Friday, tests first."
	plan := s.thread("release plan")
	if _, err := s.cl.Append(t.Context(), plan, agentbridge.EventInput{From: "user", Content: json.RawMessage(`"` + decision + `"`)}, ""); err != nil {
		t.Fatal(err)
	}
	secret, err := s.cl.CreateThread(t.Context(), agentbridge.CreateThreadRequest{Name: "not for claude"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.cl.Append(t.Context(), secret.ID, agentbridge.EventInput{From: "user", Content: json.RawMessage(`"Decision: the parser budget stays between us."`)}, ""); err != nil {
		t.Fatal(err)
	}
	chat := s.thread("chat")
	before := len(a.fake.Requests())
	trig := s.ask(chat, a, "What did we decide about the parser?\n"+fakemodel.SearchMarker+" parser decision")
	reply := text(s.answer(chat, trig, replyTimeout))
	t.Logf("claude replied: %s", reply)
	if !strings.HasPrefix(reply, fakemodel.SearchQuoted) || !strings.Contains(reply, decision) || !strings.Contains(reply, "release plan") {
		t.Errorf("claude's reply does not quote the decision from thread %q:\n%s", plan, reply)
	}
	if strings.Contains(reply, "between us") {
		t.Errorf("the search reached a thread claude is not invited to:\n%s", reply)
	}
	var tools []string
	for _, c := range a.fake.CallsSince(before) {
		if c.Tool != "" {
			tools = append(tools, c.Tool)
		}
	}
	if !slices.Equal(tools, []string{"mcp__bridge__search"}) {
		t.Errorf("the model called %v, want mcp__bridge__search once", tools)
	}
}
