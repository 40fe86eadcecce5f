package realclitest

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
)

var record = flag.Bool("record", false, "re-record adapters/testdata/cli from the installed CLIs (TestRecordFixtures)")

// fixture is one recorded run: the CLI's stdout, written to
// adapters/testdata/cli/<cli>/<name>.jsonl.
type fixture struct {
	name    string
	replies []fakemodel.Reply
	failing *fakemodel.Reply  // the answer to every call, when set
	key     string            // the key the CLI sends; goodKey when ""
	args    []string          // after the CLI's machine-readable flags
	env     map[string]string // extra environment
	prompt  string
}

// TestRecordFixtures re-records the CLI event streams the adapters
// package's tests replay, from the installed (pinned) CLIs against the fake
// model server. It runs only with -record:
//
//	go test ./internal/realclitest/ -run TestRecordFixtures -record
//
// The adapters tests assert on what these runs print (replies, usage,
// cost, retries), so run them after recording. One fixture alone:
// -run 'TestRecordFixtures/claude/usage-limit$' (a resumed one needs its
// turn1 in the same run).
func TestRecordFixtures(t *testing.T) {
	if !*record {
		t.Skip("records only with -record")
	}
	need(t)
	s := newStack(t)
	if _, err := s.cl.CreateThread(t.Context(), agentbridge.CreateThreadRequest{ID: "t1", Name: "fixtures"}); err != nil {
		t.Fatal(err)
	}
	// One fixed working folder, so that the paths the CLIs print (and
	// the tests expect) are the same at every recording.
	work := filepath.Join(os.TempDir(), "agent-bridge-fixtures", "project")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(work)) })
	parse := "package parse\n\nfunc Count(s []string) int {\n\tn := len(s)\n\treturn n - 1\n}\n"
	if err := os.WriteFile(filepath.Join(work, "parse.go"), []byte(parse), 0o644); err != nil {
		t.Fatal(err)
	}
	grep := "grep -n 'n - 1' parse.go"
	for _, cli := range []string{"claude", "codex"} {
		t.Run(cli, func(t *testing.T) { recordCLI(t, s, cli, work, grep) })
	}
}

// recordCLI records cli's fixtures, in order (a resumed run resumes the
// session of the first).
func recordCLI(t *testing.T, s *stack, cli, work, grep string) {
	a := newAgent(t, cli, cli)
	a.work = work
	mcp := func(msg string) []fakemodel.Reply {
		return []fakemodel.Reply{{Tool: &fakemodel.ToolCall{Name: "mcp__bridge__post", Input: map[string]string{"thread": "t1", "content": msg}}}, {Text: "posted it"}}
	}
	var session string // filled in by the first run
	var fixtures []fixture
	if cli == "claude" {
		cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"bridge": map[string]any{
			"command": bin, "args": []string{"mcp", "--as", "claude-mcp"}, "env": map[string]string{"BRIDGE_URL": s.bridgeURL, "BRIDGE_TOKEN": s.token}}}})
		mcpConfig := filepath.Join(a.work, "mcp.json")
		if err := os.WriteFile(mcpConfig, cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		fixtures = []fixture{
			{name: "turn1", replies: []fakemodel.Reply{{Text: "turn one answer"}}, prompt: "first question"},
			{name: "turn2-resumed-bash", replies: []fakemodel.Reply{{Tool: &fakemodel.ToolCall{Name: "Bash", Input: map[string]string{"command": "echo hi-from-bash", "description": "say hi"}}}, {Text: "turn two answer"}},
				args: []string{"--resume", "$SESSION", "--allowedTools", "Bash"}, prompt: "second question"},
			{name: "turn3-resumed", replies: []fakemodel.Reply{{Text: "turn three"}}, args: []string{"--resume", "$SESSION"}, prompt: "third question"},
			{name: "lost-session", args: []string{"--resume", "11111111-2222-3333-4444-555555555555"}, prompt: "lost"},
			{name: "bad-key", key: "sk-wrong", env: map[string]string{"CLAUDE_CODE_MAX_RETRIES": "2"}, prompt: "q"},
			{name: "mcp-post", replies: mcp("hello from claude over MCP"), args: []string{"--mcp-config", mcpConfig, "--strict-mcp-config", "--allowedTools", "mcp__bridge__post"}, prompt: "post hi"},
			{name: "normal", replies: []fakemodel.Reply{
				{Thinking: "The test fails; look at Count first.", Tool: &fakemodel.ToolCall{Name: "Bash", Input: map[string]string{"command": grep, "description": "Find the subtraction"}}},
				{Tool: &fakemodel.ToolCall{Name: "Read", Input: map[string]string{"file_path": filepath.Join(work, "parse.go")}}},
				{Text: "The test fails because Count subtracts one.\nRemove the `- 1` in parse.go and it passes."}},
				args: []string{"--allowedTools", "Bash,Read"}, prompt: "why does the test fail?"},
			{name: "failed", replies: []fakemodel.Reply{{Tool: &fakemodel.ToolCall{Name: "Bash", Input: map[string]string{"command": "make deploy", "description": "Deploy"}}}},
				failing: &fakemodel.Reply{Status: 529, Error: "overloaded"}, env: map[string]string{"CLAUDE_CODE_MAX_RETRIES": "0"},
				args: []string{"--allowedTools", "Bash"}, prompt: "deploy it"},
			// Usage limits (contract 8.5): the Anthropic API's 429
			// with retry-after. claude waits it out and retries (its
			// first api_retry says the limit); a wait it will not make
			// fails at once.
			{name: "usage-limit", replies: []fakemodel.Reply{{Text: "answered after the limit"}}, env: map[string]string{"CLAUDE_CODE_MAX_RETRIES": "1"},
				prompt: "say hi " + fakemodel.LimitMarker(fakemodel.Anthropic, 20*time.Second)},
			{name: "usage-limit-rejected", prompt: "say hi " + fakemodel.LimitMarker(fakemodel.Anthropic, 15*time.Minute)},
			{name: "unreachable", env: map[string]string{"ANTHROPIC_BASE_URL": deadURL, "CLAUDE_CODE_MAX_RETRIES": "0"}, prompt: "q"},
		}
	} else {
		fixtures = []fixture{
			{name: "turn1", replies: []fakemodel.Reply{{Text: "turn one answer"}}, prompt: "first question"},
			{name: "turn2-resumed-command", replies: []fakemodel.Reply{{Tool: &fakemodel.ToolCall{Name: "exec_command", Input: map[string]string{"cmd": "echo hi-from-bash"}}}, {Text: "turn two answer"}},
				args: []string{"resume", "$SESSION"}, prompt: "second question"},
			{name: "bad-key", key: "sk-wrong", prompt: "q"},
			{name: "server-error", failing: &fakemodel.Reply{Status: 500, Error: "upstream exploded"},
				args: []string{"-c", "model_providers." + fakemodel.CodexProvider + ".stream_max_retries=1", "-c", "model_providers." + fakemodel.CodexProvider + ".request_max_retries=1"}, prompt: "q"},
			{name: "normal", replies: []fakemodel.Reply{
				{Thinking: "Look at Count first.", Tool: &fakemodel.ToolCall{Name: "exec_command", Input: map[string]string{"cmd": grep}}},
				{Text: "Fixed: Count no longer subtracts one; the tests pass."}}, prompt: "fix the test"},
			{name: "failed", replies: []fakemodel.Reply{{Tool: &fakemodel.ToolCall{Name: "exec_command", Input: map[string]string{"cmd": "make deploy"}}}},
				failing: &fakemodel.Reply{Status: 429, Error: "rate limit reached"},
				args:    []string{"-c", "model_providers." + fakemodel.CodexProvider + ".stream_max_retries=0", "-c", "model_providers." + fakemodel.CodexProvider + ".request_max_retries=0"}, prompt: "deploy it"},
			// Usage limits (contract 8.5): a ChatGPT plan's
			// usage_limit_reached, naming when it resets, and an API
			// key's insufficient_quota.
			{name: "usage-limit", prompt: "say hi " + fakemodel.LimitMarker(fakemodel.OpenAI, 15*time.Minute)},
			{name: "insufficient-quota", failing: &fakemodel.Reply{Status: 429, ErrorType: "insufficient_quota",
				Error: "You exceeded your current quota, please check your plan and billing details."}, prompt: "q"},
			// Last: it adds the MCP server to the config.
			{name: "mcp-post", replies: mcp("hello from codex over MCP"), prompt: "post hi"},
		}
	}
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) { session = recordOne(t, s, a, cli, f, session) })
	}
}

// deadURL is an address where nothing listens: a model server that
// cannot be reached. claude's run only: codex 0.169 pointed at it did not
// end within the recording's minute (TestErrorsSurfaceWithinSeconds runs
// it through the adapter, which stops it).
const deadURL = "http://127.0.0.1:9"

// recordOne runs fixture f of cli and writes what it printed; session is the
// session the first run began (f's $SESSION), and the one to resume next.
func recordOne(t *testing.T, s *stack, a *agent, cli string, f fixture, session string) string {
	a.fake.Push(f.replies...)
	a.fake.SetDefault(fakemodel.Reply{Text: "ok"})
	if f.failing != nil {
		a.fake.SetDefault(*f.failing)
	}
	a.key = goodKey
	if f.key != "" {
		a.key = f.key
	}
	if f.name == "mcp-post" && cli == "codex" {
		a.writeCodexConfig(t, "\n[mcp_servers.bridge]\ncommand = \""+bin+"\"\nargs = [\"mcp\", \"--as\", \"codex-mcp\"]\nenv = { BRIDGE_URL = \""+s.bridgeURL+"\", BRIDGE_TOKEN = \""+s.token+"\" }\n")
	}
	args := []string{"-p", "--output-format", "stream-json", "--verbose"}
	if cli == "codex" {
		args = []string{"exec", "--json", "--skip-git-repo-check"}
	}
	for _, x := range f.args {
		args = append(args, strings.ReplaceAll(x, "$SESSION", session))
	}
	if cli == "codex" {
		args = append(args, "-")
	}
	ctx, cancel := context.WithTimeout(t.Context(), replyTimeout)
	cmd := a.command(ctx, t, args...)
	for k, v := range f.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(f.prompt)
	out, err := cmd.Output()
	cancel()
	t.Logf("%s/%s: %d bytes, %v", cli, f.name, len(out), err)
	if f.name == "turn1" {
		var first struct {
			SessionID string `json:"session_id"`
			ThreadID  string `json:"thread_id"`
		}
		_ = json.Unmarshal([]byte(strings.SplitN(string(out), "\n", 2)[0]), &first)
		session = first.SessionID + first.ThreadID
	}
	path := filepath.Join(root, "adapters", "testdata", "cli", cli, f.name+".jsonl")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return session
}
