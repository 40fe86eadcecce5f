package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Arguments people type as they see them: a thread by its name (as the
// UI and "thread list" show it) and an event by its seq (as tail shows
// it). Both are turned into ids here, once, before a command runs.

// takesThread reports whether a command's first argument is a THREAD.
func takesThread(use string) bool {
	f := strings.Fields(use)
	return len(f) > 1 && strings.Trim(f[1], "[]") == "THREAD"
}

// threadPages bounds how many pages of threads a name is looked for in.
const threadPages = 20

// threadArg returns the thread id arg names: arg itself when a thread has
// that id, else the one thread named arg. A name that several threads
// carry is a usage error listing their ids. When neither is found, or the
// bridge cannot be asked, arg is returned as it is and the command says
// what is wrong, as it would have.
func (m *Main) threadArg(c *cobra.Command, arg string) (string, error) {
	cl := m.commandClient(c)
	if cl == nil {
		return arg, nil
	}
	return resolveThread(commandContext(c), cl, arg)
}

// resolveThread is threadArg with the bridge's client at hand.
func resolveThread(ctx context.Context, cl *client.Client, arg string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := cl.Thread(ctx, arg)
	if err == nil || agentbridge.ErrorCode(err) != agentbridge.ECodeThreadNotFound {
		return arg, nil
	}
	var ids []string
	after := ""
	for range threadPages {
		page, err := cl.Threads(ctx, after, agentbridge.MaxEventsLimit)
		if err != nil {
			return arg, nil
		}
		for _, th := range page {
			if th.Name == arg {
				ids = append(ids, th.ID)
			}
		}
		if len(page) < agentbridge.MaxEventsLimit {
			break
		}
		after = page[len(page)-1].ID
	}
	switch len(ids) {
	case 0:
		return arg, nil
	case 1:
		return ids[0], nil
	}
	return "", usagef("%q is the name of %d threads (%s): give the id of the one you mean", arg, len(ids), strings.Join(ids, ", "))
}

// seqEvent is the id of the event a THREAD (id or name) and a seq name,
// for a command with no bridge flags of its own (why): the bridge is found
// as every command finds it.
func (m *Main) seqEvent(ctx context.Context, thread, seq string) (string, error) {
	cl, err := m.discoveredClient()
	if err != nil {
		return "", err
	}
	if thread, err = resolveThread(ctx, cl, thread); err != nil {
		return "", err
	}
	if _, err := strconv.ParseInt(seq, 10, 64); err != nil {
		return "", usagef("why THREAD SEQ: %q is not a seq (a whole number, as tail prints it)", seq)
	}
	return m.eventArg(ctx, cl, thread, seq)
}

// discoveredClient is a client for the bridge a command without bridge
// flags of its own talks to: found as every command finds it (env
// BRIDGE_URL, a running up, the default), with the token found likewise.
func (m *Main) discoveredClient() (*client.Client, error) {
	return m.newClient(&clientFlags{fs: pflag.NewFlagSet("discover", pflag.ContinueOnError), url: agentbridge.DefaultBridgeURL})
}

// threadFlagID is the thread id a --thread flag of a coordinator command
// names (the status APIs know threads by id): the thread of that name, as
// the UI and "thread list" show it, or the id itself. It is the value as
// given when the bridge cannot be asked.
func (m *Main) threadFlagID(ctx context.Context, arg string) (string, error) {
	if arg == "" {
		return "", nil
	}
	cl, err := m.discoveredClient()
	if err != nil {
		return arg, nil
	}
	return resolveThread(ctx, cl, arg)
}

// eventArg returns the id of the event arg names in thread: arg itself,
// or, when arg is a seq (a whole number, as tail prints it), the id of the
// thread's event at that seq.
func (m *Main) eventArg(ctx context.Context, cl *client.Client, thread, arg string) (string, error) {
	seq, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || seq < 1 {
		return arg, nil
	}
	evs, err := cl.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: seq - 1, Limit: 1})
	if err != nil {
		if agentbridge.ErrorCode(err) == agentbridge.ECodeCursorAhead {
			return "", usagef("thread %s has no event %d yet", thread, seq)
		}
		return "", fmt.Errorf("read event %d of %s: %w", seq, thread, err)
	}
	if len(evs) == 0 {
		return "", usagef("thread %s has no event %d", thread, seq)
	}
	return evs[0].ID, nil
}

// commandClient is a client for the bridge c would talk to (its --url and
// --token-file), or nil for a command that talks to no bridge.
func (m *Main) commandClient(c *cobra.Command) *client.Client {
	if c.Flags().Lookup("url") == nil || c.Flags().Lookup("token-file") == nil {
		return nil
	}
	cf := &clientFlags{fs: c.Flags()}
	cf.url, _ = c.Flags().GetString("url")
	cf.tokenFile, _ = c.Flags().GetString("token-file")
	cl, err := m.newClient(cf)
	if err != nil {
		return nil
	}
	return cl
}

// commandContext is c's context, or the background one when it has none.
func commandContext(c *cobra.Command) context.Context {
	if ctx := c.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
