// Command fakecli stands in for the claude and codex CLIs in tests: linked
// or copied under the name "claude" or "codex", it replays a recorded event
// stream from adapters/testdata/cli/<name>/ the way that CLI prints it in
// its machine-readable mode (the formats and their sources are in that
// folder's README).
//
//   - The fixture is chosen by a token "fixture:NAME" in the prompt (stdin),
//     default "normal"; the folder is $FAKE_CLI_FIXTURES.
//   - Resuming (claude --resume ID, codex exec … resume ID) replays the
//     fixture with its session id replaced by ID, unless ID starts with
//     "gone": then it prints an error on stderr and exits 1 before any
//     event, as a CLI that no longer knows the session does.
//   - Each run appends one JSON line {"argv": [...], "stdin": "..."} to the
//     file named by $FAKE_CLI_LOG, so tests can check what the adapter
//     passed.
//   - A fixture that reports a failure makes it exit 1 after printing.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The session ids the fixtures were recorded with.
var fixtureSessions = map[string]string{
	"claude": "5b6f0a3e-0c1d-4a57-9a0e-2f1f6c7b9d10",
	"codex":  "0199a213-81c0-7800-8aa1-bbab2a035a53",
}

var fixtureToken = regexp.MustCompile(`fixture:([a-z_]+)`)

func main() {
	code, err := run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakecli: %v\n", err)
		code = 70
	}
	os.Exit(code)
}

func run() (int, error) {
	cli := filepath.Base(os.Args[0])
	if _, ok := fixtureSessions[cli]; !ok {
		return 0, fmt.Errorf("run me as claude or codex, not %q", cli)
	}
	stdin, err := io.ReadAll(os.Stdin)
	if err != nil {
		return 0, fmt.Errorf("read stdin: %w", err)
	}
	if err := record(os.Args, stdin); err != nil {
		return 0, err
	}
	resume := resumeID(cli, os.Args[1:])
	if strings.HasPrefix(resume, "gone") {
		if cli == "claude" {
			fmt.Fprintf(os.Stderr, "No conversation found with session ID: %s\n", resume)
		} else {
			fmt.Fprintf(os.Stderr, "Error: thread/resume failed: no rollout found for thread id %s\n", resume)
		}
		return 1, nil
	}
	name := "normal"
	if m := fixtureToken.FindSubmatch(stdin); m != nil {
		name = string(m[1])
	}
	b, err := os.ReadFile(filepath.Join(os.Getenv("FAKE_CLI_FIXTURES"), cli, name+".jsonl"))
	if err != nil {
		return 0, fmt.Errorf("read fixture: %w", err)
	}
	out := string(b)
	if resume != "" {
		out = strings.ReplaceAll(out, fixtureSessions[cli], resume)
	}
	if _, err := io.WriteString(os.Stdout, out); err != nil {
		return 0, fmt.Errorf("write events: %w", err)
	}
	if name == "failed" {
		return 1, nil
	}
	return 0, nil
}

// resumeID is the session the arguments ask to resume, "" for none.
func resumeID(cli string, args []string) string {
	for i, a := range args {
		if i+1 >= len(args) {
			break
		}
		if (cli == "claude" && a == "--resume") || (cli == "codex" && a == "resume") {
			return args[i+1]
		}
	}
	return ""
}

func record(argv []string, stdin []byte) error {
	path := os.Getenv("FAKE_CLI_LOG")
	if path == "" {
		return nil
	}
	line, err := json.Marshal(map[string]any{"argv": argv, "stdin": string(stdin)})
	if err != nil {
		return fmt.Errorf("encode log line: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("append log: %w", err)
	}
	return f.Close()
}
