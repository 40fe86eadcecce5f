package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// firstHourCLIs returns the folder of the real claude and claude-agent-acp
// (AGENT_BRIDGE_CLI_BIN), skipping the test without them (failing it in
// CI, where they must be there).
func firstHourCLIs(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AGENT_BRIDGE_CLI_BIN")
	why := ""
	if dir == "" {
		why = "AGENT_BRIDGE_CLI_BIN is not set (the folder of claude and claude-agent-acp)"
	}
	for _, name := range []string{"claude", "claude-agent-acp"} {
		if _, err := os.Stat(filepath.Join(dir, name)); why == "" && err != nil {
			why = "AGENT_BRIDGE_CLI_BIN has no " + name + ": " + err.Error()
		}
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	return dir
}

// firstHourConfig writes the shipped coordinator.config.json into dir as a
// new user would have it, pointed at the fake model: the claude-code
// agent as shipped (its profile included) with the adapter's absolute
// path, and the claude-acp example moved into agents, as its comment
// says to.
func firstHourConfig(t *testing.T, root, dir, cliDir, bin string, model *fakemodel.Server) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "coordinator.config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	env := map[string]any{
		"PATH":                    cliDir + ":" + filepath.Dir(bin) + ":/usr/bin:/bin",
		"AGENT_BRIDGE_BIN":        bin,
		"HOME":                    t.TempDir(),
		"IS_SANDBOX":              "1", // claude under root (docs/acp.md)
		"CLAUDE_CODE_MAX_RETRIES": "1",
	}
	for _, kv := range model.ClaudeEnv("sk-first-hour") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	agents := cfg["agents"].(map[string]any)
	cc := agents["claude-code"].(map[string]any)
	cc["command"] = []string{filepath.Join(root, "adapters", "claude_code.sh")}
	cc["env"] = env
	acpEntry := cfg["_acp_examples"].(map[string]any)["claude-acp"].(map[string]any)
	acpEntry["acp"] = []string{filepath.Join(cliDir, "claude-agent-acp")}
	acpEntry["env"] = env
	acpEntry["workdir"] = filepath.Join(dir, "work")
	agents["claude-acp"] = acpEntry
	cfg["primer_path"] = filepath.Join(root, "docs", "bridge-agent-primer.md")
	cfg["scene_primer_path"] = filepath.Join(root, "docs", "scene-actor-primer.md")
	cfg["adapter_timeout_s"] = 120
	out, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "coordinator.config.json"), out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFirstHour runs a new user's first hour with the real claude CLI and
// claude-agent-acp against the fake model: the README's first run with
// claude-code in echo's place, the thread named rather than given by id
// and claude-code invited by name with no flag (the shipped config's
// profile); then an ACP agent's permission request, answered with the seq
// tail prints. tail runs as the README says, until it is stopped.
func TestFirstHour(t *testing.T) {
	t.Parallel()
	cliDir := firstHourCLIs(t)
	bin := buildServeBinary(t)
	root, err := testutil.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	model := fakemodel.Start(t, "")
	model.SetResponder(func(r fakemodel.Request) (fakemodel.Reply, bool) {
		if r.Contains("PLEASE_MKDIR") && !r.Contains("tool_result") && slices.Contains(r.ToolNames(), "Bash") {
			return fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: "Bash", Input: map[string]any{"command": "mkdir made-by-agent", "description": "Make a folder"}}}, true
		}
		if r.Contains("PLEASE_MKDIR") {
			return fakemodel.Reply{Text: "the folder is made"}, true
		}
		return fakemodel.Reply{Text: "hello from claude"}, true
	})
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	firstHourConfig(t, root, dir, cliDir, bin, model)
	local := filepath.Join(dir, "agent-bridge")
	if err := os.Symlink(bin, local); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}

	up := exec.Command(local, "up", "--addr", "127.0.0.1:0", "--status-addr", "127.0.0.1:0")
	up.Dir, up.Env = dir, env
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var upOut, upErr testutil.Buffer
	up.Stderr = &upErr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = up.Process.Signal(os.Interrupt)
		_ = up.Wait()
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			upOut.Write([]byte(sc.Text() + "\n"))
		}
	}()
	var bridgeURL string
	testutil.WaitFor(t, 30*time.Second, "up to list its agents", func() bool {
		if m := regexp.MustCompile(`Open the UI at (\S+)/ui`).FindStringSubmatch(upOut.String()); m != nil && strings.Contains(upOut.String(), "Agents") {
			bridgeURL = m[1]
			return true
		}
		return false
	})
	runEnv := append(env, "BRIDGE_URL="+bridgeURL)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(local, args...)
		cmd.Dir, cmd.Env = dir, runEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("agent-bridge %s: %v\n%s\nup's stderr:\n%s", strings.Join(args, " "), err, out, upErr.String())
		}
		return string(out)
	}

	// The README's first run, with claude-code for echo, by name.
	cmds := readmeFirstRun(t)
	if !slices.ContainsFunc(cmds, func(c string) bool { return strings.Contains(c, "invite") && strings.Contains(c, "echo") }) {
		t.Fatalf("the README's first run invites no echo: %q", cmds)
	}
	run("thread", "new", "demo")
	run("invite", "demo", "claude-code")
	run("post", "demo", "hello claude", "--to", "claude-code")
	tail := exec.Command(local, "tail", "demo")
	tail.Dir, tail.Env = dir, runEnv
	var tailOut, tailErr testutil.Buffer
	tail.Stdout, tail.Stderr = &tailOut, &tailErr
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// As the README says: tail runs until Ctrl-C.
		_ = tail.Process.Signal(os.Interrupt)
		_ = tail.Wait()
		if t.Failed() {
			t.Logf("tail:\n%s\nstderr:\n%s\nup's output:\n%s\nup's stderr:\n%s", tailOut.String(), tailErr.String(), upOut.String(), upErr.String())
		}
	})
	testutil.WaitFor(t, 120*time.Second, "claude-code's reply in tail", func() bool {
		return regexp.MustCompile(`(?m)^\[\d+\] \S+ claude-code → \S+: hello from claude$`).MatchString(tailOut.String())
	})

	// An ACP agent asks before it writes; the user answers by the seq
	// tail shows.
	run("invite", "demo", "claude-acp")
	run("post", "demo", "PLEASE_MKDIR in your folder", "--to", "claude-acp")
	request := regexp.MustCompile(`(?m)^\[(\d+)\] \S+ bridge-coordinator → \S+ \(id \S+\): claude-acp asks permission`)
	var seq string
	testutil.WaitFor(t, 120*time.Second, "the permission request in tail", func() bool {
		if m := request.FindStringSubmatch(tailOut.String()); m != nil {
			seq = m[1]
			return true
		}
		return false
	})
	run("permit", "demo", seq, "allow")
	testutil.WaitFor(t, 120*time.Second, "claude-acp's reply in tail", func() bool {
		return regexp.MustCompile(`(?m)^\[\d+\] \S+ claude-acp → \S+: the folder is made$`).MatchString(tailOut.String())
	})
	if _, err := os.Stat(filepath.Join(dir, "work", "made-by-agent")); err != nil {
		t.Errorf("the allowed mkdir did not run: %v", err)
	}
}
