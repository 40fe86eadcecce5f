package coordinator_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/coordinator/state"
	"github.com/agent-bridge/agent-bridge/internal/fakemodel"
	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

// The real ACP agents (npm @zed-industries/claude-agent-acp and
// @zed-industries/codex-acp, pinned by .ci/run) against the project's fake
// model server. AGENT_BRIDGE_CLI_BIN names the folder of their programs;
// without it the tests skip, except in CI.

var (
	binOnce  sync.Once
	binPath  string
	binBuild error
)

// agentBridgeBin builds the agent-bridge binary once per test binary.
func agentBridgeBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = filepath.Join(fakeDir, "agent-bridge")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/agent-bridge/agent-bridge/cmd/agent-bridge").CombinedOutput()
		if err != nil {
			binBuild = fmt.Errorf("build agent-bridge: %v\n%s", err, out)
		}
	})
	if binBuild != nil {
		t.Fatal(binBuild)
	}
	return binPath
}

// realACP returns the path of an ACP agent program, skipping (or, in CI,
// failing) when it is not installed.
func realACP(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("AGENT_BRIDGE_CLI_BIN")
	why := ""
	if dir == "" {
		why = "AGENT_BRIDGE_CLI_BIN is not set (the folder holding " + name + ")"
	} else if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
		why = name + " is not in AGENT_BRIDGE_CLI_BIN: " + err.Error()
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	return filepath.Join(dir, name)
}

// modelScript answers like a model: a tool call when the prompt asks for
// PLEASE_MKDIR and no tool result came back yet, else text.
func modelScript(m *fakemodel.Server) {
	m.SetResponder(func(r fakemodel.Request) (fakemodel.Reply, bool) {
		tools := r.ToolNames()
		switch {
		case r.Contains("PLEASE_MKDIR") && !r.Contains("tool_result") && !r.Contains("function_call_output") && slices.Contains(tools, "Bash"):
			return fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: "Bash", Input: map[string]any{"command": "mkdir made-by-agent", "description": "Make a folder"}}}, true
		case r.Contains("PLEASE_MKDIR"):
			return fakemodel.Reply{Text: "the tool ran or was refused"}, true
		case r.Contains("PLEASE_WAIT"):
			return fakemodel.Reply{Text: "too late", Delay: time.Minute}, true
		}
		return fakemodel.Reply{Text: "pong from the model"}, true
	})
}

// quiet adds to env what keeps the agents off the network beyond the
// fake model: no telemetry, error reports, update checks or feature flags.
func quiet(env map[string]string) map[string]string {
	for _, k := range []string{"DISABLE_TELEMETRY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER",
		"DISABLE_ERROR_REPORTING", "DISABLE_GROWTHBOOK", "CLAUDE_CODE_DISABLE_FEATURE_FLAGS"} {
		env[k] = "1"
	}
	return env
}

type realAgent struct {
	name string
	argv func(t *testing.T) []string
	env  func(t *testing.T, m *fakemodel.Server) map[string]string
	// asks is whether the agent asks permission for a Bash mkdir.
	asks bool
}

var realAgents = []realAgent{
	{name: "claude-agent-acp", asks: true,
		argv: func(t *testing.T) []string { return []string{realACP(t, "claude-agent-acp")} },
		env: func(t *testing.T, m *fakemodel.Server) map[string]string {
			return quiet(map[string]string{"ANTHROPIC_BASE_URL": m.URL(), "ANTHROPIC_API_KEY": "test-key", "IS_SANDBOX": "1",
				"HOME": t.TempDir(), "CLAUDE_CODE_MAX_RETRIES": "1"})
		}},
	{name: "codex-acp",
		argv: func(t *testing.T) []string { return []string{realACP(t, "codex-acp")} },
		env: func(t *testing.T, m *fakemodel.Server) map[string]string {
			home := t.TempDir()
			toml := "model = \"gpt-5.1-codex\"\nmodel_provider = \"fake\"\ncheck_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n" +
				"[model_providers.fake]\nname = \"fake\"\nbase_url = \"" + m.URL() + "/v1\"\nwire_api = \"responses\"\nenv_key = \"FAKE_OPENAI_KEY\"\n"
			if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(toml), 0o644); err != nil {
				t.Fatal(err)
			}
			return quiet(map[string]string{"CODEX_HOME": home, "FAKE_OPENAI_KEY": "test-key", "HOME": t.TempDir()})
		}},
}

// startRealACP runs a stack whose participant "agent" is the real ACP
// agent ra, with the given permissions.
func startRealACP(t *testing.T, ra realAgent, perms string) (*acpStack, string) {
	argv := ra.argv(t)
	m := fakemodel.Start(t, "")
	modelScript(m)
	work := t.TempDir()
	s := newStack(t)
	// The agent starts "agent-bridge mcp" as its MCP server: the real one.
	s.exe = agentBridgeBin(t)
	s.cfg.Agents["acpy"] = coordinator.AgentConfig{ACP: argv, Env: ra.env(t, m), Workdir: work, Permissions: perms}
	s.cfg.AdapterTimeout = 2 * time.Minute
	s.startCoordinator()
	as := &acpStack{stack: s}
	as.thread = s.thread("real-acp")
	s.invite(as.thread, "acpy", agentbridge.Profile{Client: ra.name})
	return as, work
}

// TestRealACPAgents: reply, a second turn on the same warm process and
// session, and cancel.
func TestRealACPAgents(t *testing.T) {
	for _, ra := range realAgents {
		t.Run(ra.name, func(t *testing.T) {
			s, _ := startRealACP(t, ra, coordinator.PermissionsAsk)
			first := s.ask("say pong")
			r1 := s.reply(first)
			if r1.From != "acpy" || !strings.Contains(r1.Text(), "pong from the model") {
				t.Fatalf("first reply = %q from %s", r1.Text(), r1.From)
			}
			inv1 := s.waitStatus(first.ID, "acpy", state.StatusSucceeded)
			second := s.ask("say pong again")
			r2 := s.reply(second)
			if r2.From != "acpy" || !strings.Contains(r2.Text(), "pong from the model") {
				t.Fatalf("second reply = %q from %s", r2.Text(), r2.From)
			}
			inv2 := s.waitStatus(second.ID, "acpy", state.StatusSucceeded)
			if inv2.PID != inv1.PID || inv1.PID == 0 {
				t.Errorf("second turn on pid %d, first on %d: want the same warm process", inv2.PID, inv1.PID)
			}
			sessions, err := s.db.Sessions(t.Context(), s.thread)
			if err != nil || len(sessions) != 1 || sessions[0].Turns < 2 {
				t.Errorf("sessions = %+v, %v; want one session with both turns", sessions, err)
			}

			slow := s.ask("PLEASE_WAIT for a while")
			s.cancelRunning(slow)
			s.waitStatus(slow.ID, "acpy", state.StatusCancelled)
			for _, e := range s.repliesTo(s.thread, slow.ID) {
				if e.From == "acpy" {
					t.Errorf("a cancelled turn posted %q", e.Text())
				}
			}
		})
	}
}

// TestRealACPPermission: a tool call that asks permission, answered allow
// (the folder is made) and answered deny (it is not).
func TestRealACPPermission(t *testing.T) {
	for _, ra := range realAgents {
		if !ra.asks {
			continue
		}
		for _, answer := range []string{"allow", "reject"} {
			t.Run(ra.name+"/"+answer, func(t *testing.T) {
				s, work := startRealACP(t, ra, coordinator.PermissionsAsk)
				trig := s.ask("PLEASE_MKDIR in your folder")
				req, pm := s.permissionRequest(trig)
				found := false
				for _, o := range pm.Options {
					found = found || o.ID == answer
				}
				if !found || pm.ToolCall.Kind != "execute" {
					t.Fatalf("meta.permission = %+v, want an execute tool call offering %s", pm, answer)
				}
				s.control(s.thread, "user", map[string]any{"permission": map[string]any{"event": req.ID, "option": answer}})
				s.waitStatus(trig.ID, "acpy", state.StatusSucceeded)
				_, err := os.Stat(filepath.Join(work, "made-by-agent"))
				if made := err == nil; made != (answer == "allow") {
					t.Errorf("answered %s: folder made = %v", answer, made)
				}
				testutil.WaitFor(t, waitLong, "the reply", func() bool {
					for _, e := range s.repliesTo(s.thread, trig.ID) {
						if e.From == "acpy" {
							return true
						}
					}
					return false
				})
			})
		}
	}
}
