// Command agent-bridge is the bridge server, the coordinator daemon and a
// command-line client in one binary. This package only parses flags and wires
// the packages together; behaviour lives in the packages it imports.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=..."; when
// it is not, the build info says what was built (versionString).
var version = ""

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

	// raw is Stdout unescaped, for output that is data rather than text
	// for a person: JSON, prompts, adapter replies, the MCP protocol,
	// completion scripts. Run sets it and wraps Stdout and Stderr in
	// escapers (escape.go); nil outside Run, where Stdout is used as is.
	raw io.Writer
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

// exitCode prints err (if any) and maps it to the process exit code. The
// message goes through the same escaping as every other line of text, as
// it may quote what the bridge or a user wrote.
func exitCode(stderr io.Writer, err error) int {
	var ue *usageError
	var ee *exitError
	var ce interface{ ConfigKey() string }
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue), errors.As(err, &ce):
		fmt.Fprintf(newEscaper(stderr), "agent-bridge: %v\n", err)
		return 2
	default:
		fmt.Fprintf(newEscaper(stderr), "agent-bridge: %v\n", err)
		return 1
	}
}

// Run runs the command that args name (commands.go has the table).
func (m *Main) Run(ctx context.Context, args []string) error {
	mm := *m
	mm.raw = m.Stdout
	mm.Stdout = newEscaper(m.Stdout)
	mm.Stderr = newEscaper(m.Stderr)
	root := mm.rootCommand()
	root.SetArgs(goStyleFlags(root, args))
	return root.ExecuteContext(ctx)
}

// rawOut is where data goes: JSON, prompts, protocol streams.
func (m *Main) rawOut() io.Writer {
	if m.raw != nil {
		return m.raw
	}
	return m.Stdout
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
		return nil, usagef("--log-level: %q is not one of debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	if f, ok := unescaped(w).(*os.File); ok && isTerminal(f) {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
