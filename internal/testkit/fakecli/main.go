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
//     "gone": then it exits 1 as that CLI does for a session it no longer
//     knows: claude prints one failed result naming the dead id (and the
//     reason on stderr), codex only an error on stderr.
//   - Each run appends one JSON line {"argv": [...], "stdin": "..."} to the
//     file named by $FAKE_CLI_LOG, so tests can check what the adapter
//     passed.
//   - A fixture that reports a failure makes it exit 1 after printing.
//   - With $FAKE_CLI_NEW_SESSIONS set, every new (not resumed) session gets
//     its own id: the fixture's with its last 12 digits replaced by the
//     run's number in $FAKE_CLI_LOG, as a real CLI never reuses an id.
//   - While the file named by $FAKE_CLI_FORGET exists, every resume is
//     refused as an unknown session, as after the CLI's own session files
//     were deleted.
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

// fixtureSession matches the session id a fixture was recorded with: the
// first session_id (claude) or thread_id (codex) in it.
var fixtureSession = regexp.MustCompile(`"(?:session_id|thread_id)":"([^"]+)"`)

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
	if cli != "claude" && cli != "codex" {
		return 0, fmt.Errorf("run me as claude or codex, not %q", cli)
	}
	stdin, err := io.ReadAll(os.Stdin)
	if err != nil {
		return 0, fmt.Errorf("read stdin: %w", err)
	}
	runNo, err := record(os.Args, stdin)
	if err != nil {
		return 0, err
	}
	resume := resumeID(cli, os.Args[1:])
	if strings.HasPrefix(resume, "gone") || (resume != "" && forgotten()) {
		if cli == "claude" {
			// As claude 2.1.328 does (testdata/cli/claude/lost-session.jsonl):
			// one failed result on stdout carrying the dead id, the
			// reason on stderr too.
			line, err := json.Marshal(map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true,
				"num_turns": 0, "session_id": resume, "total_cost_usd": 0, "errors": []string{"No conversation found with session ID: " + resume}})
			if err != nil {
				return 0, fmt.Errorf("encode result: %w", err)
			}
			fmt.Fprintf(os.Stdout, "%s\n", line)
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
	var id string
	if m := fixtureSession.FindStringSubmatch(out); m != nil && len(m[1]) > 12 {
		id = m[1]
	}
	switch {
	case id == "":
	case resume != "":
		out = strings.ReplaceAll(out, id, resume)
	case os.Getenv("FAKE_CLI_NEW_SESSIONS") != "":
		out = strings.ReplaceAll(out, id, fmt.Sprintf("%s%012d", id[:len(id)-12], runNo))
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

// forgotten reports whether the CLI is to act as if it had lost its
// sessions ($FAKE_CLI_FORGET names a file that exists).
func forgotten() bool {
	path := os.Getenv("FAKE_CLI_FORGET")
	if path == "" {
		return false
	}
	_, err := os.Stat(path)
	return err == nil
}

// record appends the run to $FAKE_CLI_LOG and returns its number there
// (1 for the first run; 0 without a log). The tests run one CLI at a time
// per log, so counting lines is enough.
func record(argv []string, stdin []byte) (int, error) {
	path := os.Getenv("FAKE_CLI_LOG")
	if path == "" {
		return 0, nil
	}
	line, err := json.Marshal(map[string]any{"argv": argv, "stdin": string(stdin)})
	if err != nil {
		return 0, fmt.Errorf("encode log line: %w", err)
	}
	prev, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return 0, fmt.Errorf("read log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, fmt.Errorf("open log: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return 0, fmt.Errorf("append log: %w", err)
	}
	return strings.Count(string(prev), "\n") + 1, f.Close()
}
