package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/spf13/cobra"
)

// Exit statuses of adapter-stream besides 0 (the run succeeded).
const (
	// streamFailed: the run reported an error half way.
	streamFailed = 1
	// streamNotStarted: the run failed before the CLI reported a
	// session, which is how a resume of a session the CLI no longer
	// knows looks; the shipped scripts then retry once without resuming.
	streamNotStarted = 3
)

// adapterEchoCommand is the echo agent: it replies with the content of the
// message it was sent, to check the coordinator loop end to end without an
// AI CLI (the default config's "echo" agent).
func (m *Main) adapterEchoCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "usage: agent-bridge adapter echo < payload.json") }
	return func(_ context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("adapter echo: unexpected argument %q: the payload is read from stdin", pos[0])
		}
		raw, err := io.ReadAll(m.Stdin)
		if err != nil {
			return fmt.Errorf("adapter echo: read stdin: %w", err)
		}
		content, err := payloadField(raw, "content")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(m.rawOut(), content)
		return err
	}
}

// adapterStreamCommand ("adapter stream", also "adapter-stream") reads a CLI's
// JSON event lines on stdin, writes progress records to the progress fd
// (when BRIDGE_PROGRESS_FD is set) and the reply to stdout
// (docs/adapter-protocol.md, "The shipped adapters").
func (m *Main) adapterStreamCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: claude -p --output-format stream-json --verbose … | agent-bridge adapter stream claude\n"+
			"       codex exec --json … | agent-bridge adapter stream codex\n"+
			"(adapter-stream is the same command under its first name, which the shipped scripts use)")
	}
	totalsDir := fs.String("session-totals", "", "folder keeping each session's running usage total, so a resumed run books only its own (codex.sh passes $CODEX_HOME/agent-bridge-usage)")
	return func(_ context.Context, pos []string) error {
		if len(pos) != 1 || (pos[0] != adapters.StreamClaude && pos[0] != adapters.StreamCodex) {
			return usagef("adapter-stream takes one argument: claude or codex")
		}
		emit, closeFD := m.progressWriter()
		defer closeFD()
		totals := adapters.SessionTotals{Dir: *totalsDir}
		out, err := adapters.ConvertStreamWith(pos[0], m.Stdin, emit, adapters.StreamOptions{Baseline: totals.Load})
		if err != nil {
			return err
		}
		if out.SessionTotal != nil {
			if err := totals.Save(out.Session, *out.SessionTotal); err != nil {
				// The reply matters more than the next run's figures.
				fmt.Fprintf(m.Stderr, "agent-bridge adapter-stream: %v\n", err)
			}
		}
		if out.Failed {
			fmt.Fprintf(m.Stderr, "agent-bridge adapter-stream: %s failed: %s\n", pos[0], out.Error)
			if out.Bad > 0 {
				fmt.Fprintf(m.Stderr, "agent-bridge adapter-stream: %d of %d lines were not JSON events\n", out.Bad, out.Lines)
			}
			if !out.Started {
				return &exitError{code: streamNotStarted}
			}
			return &exitError{code: streamFailed}
		}
		_, err = io.WriteString(m.rawOut(), out.Reply)
		return err
	}
}

// progressWriter returns the function that writes one record to the
// progress fd, or one that does nothing when there is none. A write error
// (the coordinator stopped listening) ends the writing, never the run.
func (m *Main) progressWriter() (func(adapters.ProgressRecord), func()) {
	n, err := strconv.Atoi(m.Getenv(adapters.EnvProgressFD))
	if err != nil || n < 3 {
		return func(adapters.ProgressRecord) {}, func() {}
	}
	f := os.NewFile(uintptr(n), "progress")
	if f == nil {
		return func(adapters.ProgressRecord) {}, func() {}
	}
	broken := false
	return func(r adapters.ProgressRecord) {
			if broken {
				return
			}
			b, err := json.Marshal(r)
			if err != nil || len(b) > adapters.MaxProgressLine {
				return
			}
			if _, err := f.Write(append(b, '\n')); err != nil {
				broken = true
			}
		}, func() {
			_ = f.Close()
		}
}
