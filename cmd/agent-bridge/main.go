// Command agent-bridge is the bridge server, the coordinator daemon and a
// command-line client in one binary. This package only parses flags and wires
// the packages together; behaviour lives in the packages it imports.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/agent-bridge/agent-bridge/internal/service"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	err := m.Run(ctx, os.Args[1:])
	stop()
	os.Exit(exitCode(m.Stderr, err))
}

// Main is the program with its environment injected, so tests can run
// subcommands in-process and capture their output.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// usageError is a usage or configuration mistake: exit code 2, one line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a *usageError with a formatted message.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError carries a specific exit code whose message was already printed
// (doctor's failed checks, say).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCode prints err (if any) and maps it to the process exit code.
func exitCode(stderr io.Writer, err error) int {
	var ue *usageError
	var ee *exitError
	var ce interface{ ConfigKey() string }
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue), errors.As(err, &ce):
		fmt.Fprintf(stderr, "agent-bridge: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "agent-bridge: %v\n", err)
		return 1
	}
}

const usage = `agent-bridge: a local substrate for multi-agent conversation.

Daemons:
  serve          the bridge server (HTTP API, streams, web UI)
  coordinator    the coordinator daemon (trigger rules, adapters)
  up             both in one process, for a first run

Client:
  thread new NAME | thread list
  post THREAD TEXT [--to ID] [--from user]
  invite THREAD ID --client C --model M [--nickname N] [--role R]... [--expertise E]...
  uninvite THREAD ID | mute|unmute|prod THREAD ID... | pause|discussion|auto THREAD on|off
  party THREAD on|off [--agents a,b] [--max-agents N] [--no-cross-talk]
  state THREAD [--at SEQ]
  tail THREAD | tail --all
  prompt         render an adapter payload (stdin) as a prompt
  adapter echo   the built-in echo agent (payload on stdin, its content on stdout)
  adapter stream claude|codex  a CLI's JSON events (stdin) to reply and progress
                 (also adapter-stream)
  invocations [--thread T] [--participant P] [--status S]  the coordinator's invocation records
  invocations show ID [--follow] | invocations cancel ID
  cancel THREAD ID  stop a participant's queued and running invocations
  permit THREAD EVENT OPTION  answer an ACP agent's permission request
  sessions [--thread T] | sessions reset THREAD ID  the CLI sessions kept per participant
  why EVENT_ID   the coordinator's routing decision for one event
  scene THREAD on --actors a,b [--setting S] [--brief a=TEXT]... | scene THREAD off
  transcript THREAD [--format md|json]
  journal ID     an actor's journal (kept by the coordinator)
  mcp --as ID    an MCP server on stdio acting as participant ID (docs/mcp.md)

Operations:
  service install|uninstall|start|stop|status serve|coordinator
  backup --to FILE | restore --from FILE
  doctor
  version

Run "agent-bridge COMMAND -h" for a command's flags.
`

// Run runs the subcommand named by args[0].
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stderr, usage)
		return usagef("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return m.runUnderServiceManager(ctx, service.Serve, m.runServe, rest)
	case "coordinator":
		return m.runUnderServiceManager(ctx, service.Coordinator, m.runCoordinator, rest)
	case "up":
		return m.runUp(ctx, rest)
	case "thread":
		return m.runThread(ctx, rest)
	case "post":
		return m.runPost(ctx, rest)
	case "invite":
		return m.runInvite(ctx, rest)
	case "state":
		return m.runState(ctx, rest)
	case "uninvite", "mute", "unmute", "pause", "discussion", "auto", "prod":
		return m.runControl(ctx, cmd, rest)
	case "tail":
		return m.runTail(ctx, rest)
	case "prompt":
		return m.runPrompt(ctx, rest)
	case "invocations":
		return m.runInvocations(ctx, rest)
	case "why":
		return m.runWhy(ctx, rest)
	case "scene":
		return m.runScene(ctx, rest)
	case "journal":
		return m.runJournal(ctx, rest)
	case "transcript":
		return m.runTranscript(ctx, rest)
	case "cancel":
		return m.runCancel(ctx, rest)
	case "permit":
		return m.runPermit(ctx, rest)
	case "mcp":
		return m.runMCP(ctx, rest)
	case "adapter":
		return m.runAdapter(ctx, rest)
	case "adapter-stream":
		return m.runAdapterStream(ctx, rest)
	case "party":
		return m.runParty(ctx, rest)
	case "sessions":
		return m.runSessions(ctx, rest)
	case "service":
		return m.runService(ctx, rest)
	case "backup":
		return m.runBackup(ctx, rest)
	case "restore":
		return m.runRestore(ctx, rest)
	case "doctor":
		return m.runDoctor(ctx, rest)
	case "version", "--version", "-v":
		fmt.Fprintf(m.Stdout, "agent-bridge %s\n", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(m.Stdout, usage)
		return nil
	default:
		fmt.Fprint(m.Stderr, usage)
		return usagef("unknown command %q", cmd)
	}
}

// newFlagSet returns a flag set that reports errors to m.Stderr and leaves
// the exit decision to exitCode.
func (m *Main) newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("agent-bridge "+name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	return fs
}

// parseFlags parses args allowing flags before and after positional
// arguments ("post T hi --to codex"), and returns the positionals. A "--"
// ends flag parsing.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{msg: err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// env returns the value of key in m's environment, or def when unset.
func (m *Main) env(key, def string) string {
	if v := m.Getenv(key); v != "" {
		return v
	}
	return def
}

// newLogger builds the daemon logger: text on a terminal, JSON otherwise
// (launchd and systemd write stderr to files), at the given level.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return nil, usagef("--log-level: %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
