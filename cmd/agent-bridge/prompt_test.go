package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
)

// promptTestPayload is a payload as the coordinator sends it.
func promptTestPayload(t *testing.T) (adapters.Payload, []byte) {
	t.Helper()
	earlier := agentbridge.Event{ID: "e1", Seq: 2, Thread: "t1", Type: agentbridge.TypeMessage, From: "claude", To: "all",
		Content: json.RawMessage(`"Shall we split the work?"`)}
	trigger := agentbridge.Event{ID: "e2", Seq: 3, TS: "2026-11-21T10:00:00.123456Z", Thread: "t1",
		Type: agentbridge.TypeMessage, From: "user", To: "codex", Content: json.RawMessage(`"yes, @codex take the parser"`)}
	p := adapters.NewPayload("http://127.0.0.1:5111", agentbridge.Thread{ID: "t1", Name: "design"}, trigger, "codex",
		agentbridge.Profile{Client: "codex", Model: "gpt-5-codex", Roles: []string{"reviewer"}},
		[]agentbridge.Event{earlier, trigger}, "PRIMER")
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, b
}

// runPromptCmd runs "agent-bridge prompt args..." in-process and returns
// stdout, stderr and the exit code.
func runPromptCmd(stdin []byte, args ...string) (string, string, int) {
	var stdout, stderr bytes.Buffer
	m := &Main{Stdin: bytes.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	code := exitCode(&stderr, m.Run(context.Background(), append([]string{"prompt"}, args...)))
	return stdout.String(), stderr.String(), code
}

func TestPromptRendersPayload(t *testing.T) {
	t.Parallel()
	p, b := promptTestPayload(t)
	out, errOut, code := runPromptCmd(b)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := adapters.RenderPrompt(p); out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	for _, s := range []string{"PRIMER", "claude -> all: Shall we split the work?", "user -> codex: yes, @codex take the parser"} {
		if !strings.Contains(out, s) {
			t.Errorf("prompt lacks %q", s)
		}
	}
}

func TestPromptField(t *testing.T) {
	t.Parallel()
	_, b := promptTestPayload(t)
	tests := []struct{ field, want string }{
		{"content", "yes, @codex take the parser\n"},
		{"thread_id", "t1\n"},
		{"event_id", "e2\n"},
		{"from", "user\n"},
		{"to", "codex\n"},
		{"participant.id", "codex\n"},
		{"participant.profile.model", "gpt-5-codex\n"},
		{"participant.profile.roles", "[\"reviewer\"]\n"},
		{"participant.profile.nickname", "\n"},
		{"thread.name", "design\n"},
		{"trigger.seq", "3\n"},
		{"bridge.url", "http://127.0.0.1:5111\n"},
		{"context_window.0.content", "Shall we split the work?\n"},
		{"context_window.9.content", "\n"},
		{"content.deeper", "\n"},
		// Any dotted path works, also of fields a payload has only in
		// some modes (docs/adapter-protocol.md).
		{"party.round", "\n"},
		{"not_a_field", "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			out, errOut, code := runPromptCmd(b, "--field", tt.field)
			if code != 0 || out != tt.want {
				t.Errorf("--field %s: exit %d, stdout %q (stderr %q), want %q", tt.field, code, out, errOut, tt.want)
			}
		})
	}
}

func TestPromptBadInput(t *testing.T) {
	t.Parallel()
	_, b := promptTestPayload(t)
	tests := []struct {
		name    string
		stdin   string
		args    []string
		wantErr string
	}{
		{"bad JSON", "{not json", nil, "not an adapter payload"},
		{"empty stdin", "", nil, "not an adapter payload"},
		{"bad JSON with --field", "[1,2", []string{"--field", "content"}, "not an adapter payload"},
		{"array with --field", "[1,2]", []string{"--field", "content"}, "expected a JSON object"},
		{"empty path segment", string(b), []string{"--field", "party..round"}, `"party..round" is not a dotted path`},
		{"positional argument", string(b), []string{"extra"}, "unexpected argument"},
		{"unknown flag", string(b), []string{"--bogus"}, "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runPromptCmd([]byte(tt.stdin), tt.args...)
			if code != 2 || out != "" {
				t.Errorf("exit %d, stdout %q; want exit 2 and no output", code, out)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut, tt.wantErr)
			}
			// Our own refusals are one line; the flag package adds usage.
			if tt.name != "unknown flag" && strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("stderr %q is more than one line", errOut)
			}
		})
	}
}

// The shipped shell adapters run "agent-bridge prompt". The tests give them
// this test binary in that role: a wrapper script named agent-bridge that
// re-executes it in helper mode.
const promptHelperEnv = "AGENT_BRIDGE_PROMPT_TEST_HELPER"

func TestPromptHelperProcess(t *testing.T) {
	if os.Getenv(promptHelperEnv) != "1" {
		t.Skip("helper process for the adapter script tests")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	os.Exit(exitCode(m.Stderr, m.Run(context.Background(), args)))
}

// scriptEnv prepares a PATH for the adapter scripts: a folder with the
// agent-bridge wrapper and the given fake CLIs, plus a folder with only the
// POSIX tools the scripts use, so no real claude or codex can be found.
func scriptEnv(t *testing.T, fakes map[string]string) (env []string, logDir string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bin")
	tools := filepath.Join(t.TempDir(), "tools")
	logDir = t.TempDir()
	for _, d := range []string{bin, tools} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// GORACE: a race-enabled binary otherwise sleeps a second at exit.
	wrapper := "#!/bin/sh\n" + promptHelperEnv + "=1 GORACE=atexit_sleep_ms=0 exec '" + self + "' -test.run='^TestPromptHelperProcess$' -- \"$@\"\n"
	write := func(path, body string) {
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin, "agent-bridge"), wrapper)
	for name, body := range fakes {
		write(filepath.Join(bin, name), body)
	}
	for _, tool := range []string{"cat", "rm", "mkdir", "mktemp", "mv", "sed", "head", "dirname"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s not found: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(tools, tool)); err != nil {
			t.Fatal(err)
		}
	}
	env = []string{
		"PATH=" + bin + string(os.PathListSeparator) + tools,
		"XDG_STATE_HOME=" + filepath.Join(t.TempDir(), "state"),
		// codex.sh keeps session totals under $CODEX_HOME: not the
		// user's.
		"CODEX_HOME=" + filepath.Join(t.TempDir(), "codex-home"),
		"AGENT_BRIDGE_BIN=" + filepath.Join(bin, "agent-bridge"),
	}
	return env, logDir
}

func runScript(t *testing.T, script string, env []string, payload []byte) adapters.Result {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "adapters", script))
	if err != nil {
		t.Fatal(err)
	}
	return adapters.Run(context.Background(), adapters.Spec{Command: []string{path}, Env: env}, payload, nil)
}

func TestEchoScript(t *testing.T) {
	t.Parallel()
	_, b := promptTestPayload(t)
	env, _ := scriptEnv(t, nil)
	res := runScript(t, "echo.sh", env, b)
	if !res.OK() || string(res.Stdout) != "yes, @codex take the parser\n" {
		t.Fatalf("echo.sh: %s, stdout %q", adapters.ErrorMessage(res, 0), res.Stdout)
	}
	// Without AGENT_BRIDGE_BIN, agent-bridge is found on PATH.
	res = runScript(t, "echo.sh", append(env, "AGENT_BRIDGE_BIN="), b)
	if !res.OK() || string(res.Stdout) != "yes, @codex take the parser\n" {
		t.Fatalf("echo.sh via PATH: %s, stdout %q", adapters.ErrorMessage(res, 0), res.Stdout)
	}
	res = runScript(t, "echo.sh", append(env, "AGENT_BRIDGE_BIN=/nonexistent/agent-bridge"), b)
	if res.ExitCode != 127 || !strings.Contains(string(res.StderrTail), "AGENT_BRIDGE_BIN") {
		t.Errorf("missing binary: exit %d, stderr %q", res.ExitCode, res.StderrTail)
	}
}

func TestScriptsMissingCLI(t *testing.T) {
	t.Parallel()
	_, b := promptTestPayload(t)
	env, _ := scriptEnv(t, nil)
	for script, cli := range map[string]string{"claude_code.sh": "claude", "codex.sh": "codex"} {
		res := runScript(t, script, env, b)
		if res.ExitCode != 127 || !strings.Contains(string(res.StderrTail), "the "+cli+" CLI is not on PATH") {
			t.Errorf("%s without %s: exit %d, stderr %q", script, cli, res.ExitCode, res.StderrTail)
		}
	}
}
