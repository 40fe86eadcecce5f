package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// Workspaces' changes in a thread (contract 8.1, docs/workspaces.md):
// changes lists each participant's branch as the thread tells it, diff
// prints a participant's diffs, merge and discard post a person's change
// control and wait for the coordinator's notice.

// threadEventsAll reads every event of a thread, oldest first.
func threadEventsAll(ctx context.Context, cl *client.Client, thread string) ([]agentbridge.Event, error) {
	var all []agentbridge.Event
	after := int64(0)
	for {
		page, err := cl.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: after, Limit: agentbridge.MaxEventsLimit})
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < agentbridge.MaxEventsLimit {
			return all, nil
		}
		after = page[len(page)-1].Seq
	}
}

// threadChanges reads a thread's events into each participant's branch
// (agentbridge.ChangesOf), with the client it read them with.
func (m *Main) threadChanges(ctx context.Context, cf *clientFlags, thread string) (*client.Client, []agentbridge.BranchChanges, error) {
	cl, err := m.newClient(cf)
	if err != nil {
		return nil, nil, err
	}
	evs, err := threadEventsAll(ctx, cl, thread)
	if err != nil {
		return nil, nil, explain(err, cf.url)
	}
	return cl, agentbridge.ChangesOf(evs), nil
}

func (m *Main) changesCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usagef("changes: give one THREAD")
		}
		_, list, err := m.threadChanges(ctx, cf, pos[0])
		if err != nil {
			return err
		}
		if cf.json {
			if list == nil {
				list = []agentbridge.BranchChanges{}
			}
			return m.printJSON(list)
		}
		return writeChanges(m.Stdout, list)
	}
}

// writeChanges prints each branch: its participant, branch, state and
// totals, then its commits, newest last.
func writeChanges(w io.Writer, list []agentbridge.BranchChanges) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No agent has changed anything in this thread's workspaces.")
		return err
	}
	for _, b := range list {
		state := b.State
		if b.State == agentbridge.ChangeMerged && b.Commit != "" {
			state = "merged as " + shortID(b.Commit)
		}
		if _, err := fmt.Fprintf(w, "%s  %s (from %s, workspace %s)  %s  %d commit(s)  +%d −%d\n",
			b.Participant, b.Branch, b.Base, b.Workspace, state, len(b.Changes), b.Added, b.Removed); err != nil {
			return err
		}
		for _, ch := range b.Changes {
			files := make([]string, len(ch.Files))
			for i, f := range ch.Files {
				files[i] = fmt.Sprintf("%s (%s +%d −%d)", f.Path, f.Status, f.Added, f.Removed)
			}
			if _, err := fmt.Fprintf(w, "  %s  %s  +%d −%d  %s\n", shortID(ch.Commit), ch.Subject, ch.Added, ch.Removed, strings.Join(files, ", ")); err != nil {
				return err
			}
		}
	}
	return nil
}

// diffCommand prints a participant's open changes in the thread as one
// unified diff per change, oldest first: each reply's diff attachment
// (parent..commit).
func (m *Main) diffCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 2 {
			return usagef("diff: give THREAD and the PARTICIPANT whose change to show")
		}
		cl, list, err := m.threadChanges(ctx, cf, pos[0])
		if err != nil {
			return err
		}
		for _, b := range list {
			if b.Participant != pos[1] {
				continue
			}
			if b.State != "open" {
				fmt.Fprintf(m.Stderr, "agent-bridge: %s's last change in this thread was %s; its diffs follow\n", b.Participant, b.State)
			}
			for _, ch := range b.Changes {
				if err := m.printDiff(ctx, cl, ch); err != nil {
					return explain(err, cf.url)
				}
			}
			return nil
		}
		return fmt.Errorf("%s has changed nothing in this thread's workspaces", pos[1])
	}
}

// printDiff copies one change's diff attachment to stdout, saying on
// stderr when it was cut.
func (m *Main) printDiff(ctx context.Context, cl *client.Client, ch agentbridge.ChangeInReply) error {
	if ch.Diff == "" {
		return nil
	}
	rc, _, err := cl.DownloadAttachment(ctx, ch.Diff)
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(m.Stdout, rc); err != nil {
		return fmt.Errorf("read the diff of %s: %w", shortID(ch.Commit), err)
	}
	if ch.DiffTruncated {
		fmt.Fprintf(m.Stderr, "agent-bridge: the diff of %s was cut at %d bytes\n", shortID(ch.Commit), agentbridge.MaxDiffBytes)
	}
	return nil
}

func shortID(c string) string { return c[:min(12, len(c))] }

// changeControl posts a person's change control and waits for the
// coordinator's notice answering it, which it prints; a refusal exits 1.
func (m *Main) changeControl(ctx context.Context, cf *clientFlags, thread, from string, ctl map[string]any, wait time.Duration) error {
	cl, err := m.newClient(cf)
	if err != nil {
		return err
	}
	content, err := json.Marshal(ctl)
	if err != nil {
		return fmt.Errorf("encode control: %w", err)
	}
	a, err := cl.AppendAnswer(ctx, thread, agentbridge.EventInput{Type: agentbridge.TypeControl, From: from, Content: content}, "")
	if err != nil {
		return explain(err, cf.url)
	}
	if a.Ignored != nil {
		fmt.Fprintf(m.Stderr, "agent-bridge: %s (%s)\n", a.Ignored.Reason, a.Ignored.Code)
		return &exitError{code: 1}
	}
	n, err := waitChangeNotice(ctx, cl, thread, a.Event, wait)
	if err != nil {
		return explain(err, cf.url)
	}
	if cf.json {
		return m.printJSON(n)
	}
	if _, err := fmt.Fprintln(m.Stdout, n.Text()); err != nil {
		return err
	}
	if r, ok := agentbridge.ChangeResultOf(n); ok && r.State == agentbridge.ChangeRefused {
		return &exitError{code: 1}
	}
	return nil
}

// waitChangeNotice polls the thread after ctl for the coordinator's notice
// that answers it, up to wait.
func waitChangeNotice(ctx context.Context, cl *client.Client, thread string, ctl agentbridge.Event, wait time.Duration) (agentbridge.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	after := ctl.Seq
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		evs, err := cl.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: after, Limit: agentbridge.MaxEventsLimit})
		if err != nil && ctx.Err() == nil {
			return agentbridge.Event{}, err
		}
		for _, e := range evs {
			if e.Meta.ReplyTo == ctl.ID && e.Meta.HasTag("change") {
				return e, nil
			}
			after = e.Seq
		}
		select {
		case <-ctx.Done():
			return agentbridge.Event{}, fmt.Errorf("no coordinator answered the change control %s within %s: is the coordinator that has the participant's worktree running?", ctl.ID, wait)
		case <-tick.C:
		}
	}
}

func (m *Main) mergeCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who merges (only a human's merge counts)")
	into := fs.String("into", "", "the branch to merge into (default: the workspace's base)")
	squash := fs.Bool("squash", false, "one commit on the branch instead of a merge commit")
	wait := fs.Duration("wait", 2*time.Minute, "how long to wait for the coordinator's answer")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 2 {
			return usagef("merge: give THREAD and the PARTICIPANT whose change to merge")
		}
		if *into != "" && !agentbridge.ValidBranchName(*into) {
			return usagef("--into: %q is not a branch name", *into)
		}
		merge := map[string]any{"participant": pos[1], "squash": *squash}
		if *into != "" {
			merge["into"] = *into
		}
		return m.changeControl(ctx, cf, pos[0], *from, map[string]any{"change": map[string]any{"merge": merge}}, *wait)
	}
}

func (m *Main) discardCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who discards (only a human's discard counts)")
	wait := fs.Duration("wait", 2*time.Minute, "how long to wait for the coordinator's answer")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 2 {
			return usagef("discard: give THREAD and the PARTICIPANT whose change to drop")
		}
		return m.changeControl(ctx, cf, pos[0], *from, map[string]any{"change": map[string]any{"discard": map[string]any{"participant": pos[1]}}}, *wait)
	}
}
