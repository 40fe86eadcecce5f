package fakemodel_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
)

// A tool call, then a text answer, for a real claude; codex is pointed at
// the same server through a CODEX_HOME holding CodexConfig.
func Example() {
	s, err := fakemodel.New("sk-test")
	if err != nil {
		panic(err)
	}
	defer s.Close()
	s.Push(
		fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: "Bash", Input: map[string]string{"command": "echo hi"}}},
		fakemodel.Reply{Text: "done"},
	)
	cmd := exec.Command("claude", "-p", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash")
	cmd.Env = append(os.Environ(), s.ClaudeEnv("sk-test")...)
	cmd.Stdin = strings.NewReader("say hi")
	_ = cmd.Run()

	home, _ := os.MkdirTemp("", "codex-home")
	defer os.RemoveAll(home)
	_ = os.WriteFile(filepath.Join(home, "config.toml"), []byte(s.CodexConfig("gpt-5.1-codex", "FAKE_KEY")), 0o600)
	// codex exec … with CODEX_HOME=home and FAKE_KEY=sk-test in its
	// environment.

	for _, r := range s.Calls() {
		fmt.Println(r.N, r.API, r.Status, r.Usage, r.Tool)
	}
}
