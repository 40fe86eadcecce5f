package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/spf13/cobra"
)

// followPoll is how often "invocations show --follow" asks for news; the
// coordinator flushes progress every 200 ms, so faster would show nothing
// more.
const followPoll = 500 * time.Millisecond

// cancelCommand posts a cancel control: the way a person stops a participant,
// whichever coordinator runs it (docs/runs.md).
func (m *Main) cancelCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who cancels (only a human's cancel counts)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 2 {
			return usagef("cancel: give THREAD and the participant ID")
		}
		ctl := map[string]any{"cancel": map[string]string{"participant_id": pos[1]}}
		return m.postControl(ctx, cf, pos[0], *from, ctl)
	}
}

// parseInvocationID checks the ID argument of invocations show|cancel.
func parseInvocationID(cmd string, pos []string) (string, error) {
	if len(pos) != 1 {
		return "", usagef("invocations %s takes one argument: the invocation id", cmd)
	}
	if n, err := strconv.ParseInt(pos[0], 10, 64); err != nil || n < 1 {
		return "", usagef("invocations %s: %q is not an invocation id (a number from agent-bridge invocations)", cmd, pos[0])
	}
	return pos[0], nil
}

func (m *Main) invocationCancelCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	base := m.coordinatorURLFlag(fs)
	return func(ctx context.Context, pos []string) error {
		id, err := parseInvocationID("cancel", pos)
		if err != nil {
			return err
		}
		var inv ledger.Invocation
		if err := m.statusDo(ctx, http.MethodPost, base(), "/invocations/"+id+"/cancel", nil, &inv); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "invocation %d (%s in %s) cancelled\n", inv.ID, inv.Participant, inv.Thread)
		return nil
	}
}

func (m *Main) invocationShowCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	base := m.coordinatorURLFlag(fs)
	follow := fs.Bool("follow", false, "keep printing new progress until the invocation ends")
	asJSON := fs.Bool("json", false, "print the record and its progress as JSON")
	return func(ctx context.Context, pos []string) error {
		id, err := parseInvocationID("show", pos)
		if err != nil {
			return err
		}
		if *asJSON && *follow {
			return usagef("invocations show: --json and --follow do not go together")
		}
		var rec status.InvocationResponse
		if err := m.statusGet(ctx, base(), "/invocations/"+id, nil, &rec); err != nil {
			return err
		}
		if *asJSON {
			return m.printJSON(rec)
		}
		printInvocation(m.Stdout, rec.Invocation)
		last := printProgress(m.Stdout, rec.Progress, 0)
		if !*follow {
			return nil
		}
		t := time.NewTicker(followPoll)
		defer t.Stop()
		for !ended(rec.Invocation) {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			q := url.Values{"after": {strconv.FormatInt(last, 10)}}
			if err := m.statusGet(ctx, base(), "/invocations/"+id, q, &rec); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			last = printProgress(m.Stdout, rec.Progress, last)
		}
		fmt.Fprintf(m.Stdout, "-- %s", rec.Status)
		if rec.ExitCode != nil {
			fmt.Fprintf(m.Stdout, " (exit %d)", *rec.ExitCode)
		}
		fmt.Fprintf(m.Stdout, " after %s, %s tokens, %s\n", time.Duration(rec.DurationMS)*time.Millisecond, tokens(rec.Invocation), cost(rec.Invocation))
		return nil
	}
}

// ended reports whether an invocation will change no more: not queued or
// running, and its reply or notice posted.
func ended(inv ledger.Invocation) bool {
	switch inv.Status {
	case ledger.StatusQueued, ledger.StatusRunning:
		return false
	}
	return inv.FinishedAt != "" || inv.Status == ledger.StatusCancelled || inv.Status == ledger.StatusInterrupted
}

func printInvocation(w io.Writer, inv ledger.Invocation) {
	exit := "-"
	if inv.ExitCode != nil {
		exit = strconv.Itoa(*inv.ExitCode)
	}
	fmt.Fprintf(w, "invocation %d: %s for %s in thread %s (trigger %s)\n", inv.ID, inv.Status, inv.Participant, inv.Thread, inv.TriggerID)
	fmt.Fprintf(w, "queued %s", inv.QueuedAt)
	if inv.StartedAt != "" {
		fmt.Fprintf(w, ", started %s", inv.StartedAt)
	}
	if inv.FinishedAt != "" {
		fmt.Fprintf(w, ", finished %s (%s)", inv.FinishedAt, time.Duration(inv.DurationMS)*time.Millisecond)
	}
	fmt.Fprintf(w, "\nexit %s, %s tokens, %s, %s", exit, tokens(inv), cost(inv), plural(inv.ProgressCount, "progress record"))
	// The coordinator counts bad lines when the run ends.
	if inv.FinishedAt != "" {
		fmt.Fprintf(w, " (%s skipped as bad)", plural(inv.ProgressBad, "line"))
	}
	fmt.Fprintln(w)
	if inv.ReplyEventID != "" {
		fmt.Fprintf(w, "reply %s\n", inv.ReplyEventID)
	}
	if inv.Failure != nil {
		fmt.Fprintf(w, "failure: %s\n", failureText(inv))
	}
	if inv.Error != "" {
		fmt.Fprintf(w, "error: %s\n", firstLine(inv.Error))
	}
}

// failureText is an invocation's failure for a list (contract 8.5):
// "quota until 15:04", "handed to codex: quota until 15:04", "-".
func failureText(inv ledger.Invocation) string {
	switch {
	case inv.Failure == nil:
		return "-"
	case inv.HandedTo != "":
		return agentbridge.HandedReason(inv.HandedTo, *inv.Failure, time.Now(), time.Local)
	}
	return inv.Failure.Summary(time.Now(), time.Local)
}

// printProgress prints the records newer than last, one line each, and
// returns the id of the newest.
func printProgress(w io.Writer, ps []ledger.Progress, last int64) int64 {
	for _, p := range ps {
		if p.ID <= last {
			continue
		}
		ts := p.TS
		if t, err := agentbridge.ParseTime(p.TS); err == nil {
			ts = t.Local().Format("15:04:05")
		}
		kind := p.Kind
		if kind == "" {
			kind = "-"
		}
		fmt.Fprintf(w, "%s  %-11s %s\n", ts, kind, firstLine(p.Status))
		last = p.ID
	}
	return last
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// tokens words an invocation's token usage, "-" when none was reported.
func tokens(inv ledger.Invocation) string {
	if inv.InputTokens == 0 && inv.OutputTokens == 0 {
		return "-"
	}
	return fmt.Sprintf("%d in/%d out", inv.InputTokens, inv.OutputTokens)
}

// cost words an invocation's cost, "-" when none was reported.
func cost(inv ledger.Invocation) string {
	if inv.CostUSD == 0 {
		return "-"
	}
	return fmt.Sprintf("$%.4f", inv.CostUSD)
}

// runDuration is an invocation's duration for the list: its final one
// once it ended, the time it has run so far (to the second) while it
// runs, "-" while it waits in the queue.
func runDuration(inv ledger.Invocation, now time.Time) string {
	if inv.FinishedAt != "" {
		return (time.Duration(inv.DurationMS) * time.Millisecond).String()
	}
	started, err := agentbridge.ParseTime(inv.StartedAt)
	if err != nil {
		return "-"
	}
	return now.Sub(started).Round(time.Second).String()
}

// plural is "1 line", "2 lines".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func (m *Main) invocationsCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	thread := fs.String("thread", "", "only this thread (its name or id)")
	participant := fs.String("participant", "", "only this participant's")
	statusFlag := fs.String("status", "", "only this status: queued, running, succeeded, failed, timeout, interrupted, refused, cancelled or passed")
	limit := fs.Int("limit", 100, "at most this many, newest first")
	asJSON := fs.Bool("json", false, "print the records as JSON (one array per coordinator asked)")
	targets := m.coordinatorURLsFlag(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("invocations takes no arguments, got %q", pos[0])
		}
		if *statusFlag != "" && !ledger.ValidStatus(*statusFlag) {
			return usagef("--status: %q is not one of queued, running, succeeded, failed, timeout, interrupted, refused, cancelled, passed", *statusFlag)
		}
		if *limit < 1 || *limit > agentbridge.MaxEventsLimit {
			return usagef("--limit: must be from 1 to %d", agentbridge.MaxEventsLimit)
		}
		q := url.Values{"limit": {strconv.Itoa(*limit)}}
		id, err := m.threadFlagID(ctx, *thread)
		if err != nil {
			return err
		}
		if id != "" {
			q.Set("thread", id)
		}
		if *participant != "" {
			q.Set("participant", *participant)
		}
		if *statusFlag != "" {
			q.Set("status", *statusFlag)
		}
		list := targets(ctx)
		var firstErr error
		answered := 0
		for _, tg := range list {
			var out status.InvocationsResponse
			if err := m.statusGetTarget(ctx, tg, "/invocations", q, &out); err != nil {
				if len(list) > 1 {
					fmt.Fprintf(m.Stderr, "coordinator %s (%s): %v\n", tg.name, tg.url, err)
				}
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			answered++
			if *asJSON {
				if err := m.printJSON(out.Invocations); err != nil {
					return err
				}
				continue
			}
			if len(list) > 1 {
				fmt.Fprintf(m.Stdout, "coordinator %s (%s):\n", tg.name, tg.url)
			}
			if err := m.printInvocations(out.Invocations); err != nil {
				return err
			}
		}
		if answered == 0 {
			return firstErr
		}
		return nil
	}
}

// printInvocations prints invocation records as a table.
func (m *Main) printInvocations(list []ledger.Invocation) error {
	if len(list) == 0 {
		fmt.Fprintln(m.Stdout, "no invocations")
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tPARTICIPANT\tTHREAD\tTRIGGER\tEXIT\tDURATION\tTOKENS\tCOST\tFAILURE\tREPLY")
	for _, inv := range list {
		exit := "-"
		if inv.ExitCode != nil {
			exit = strconv.Itoa(*inv.ExitCode)
		}
		reply := inv.ReplyEventID
		if reply == "" {
			reply = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", inv.ID, inv.Status, inv.Participant, inv.Thread, inv.TriggerID,
			exit, runDuration(inv, time.Now()), tokens(inv), cost(inv), failureText(inv), reply)
	}
	return tw.Flush()
}

func (m *Main) whyCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	targets := m.coordinatorURLsFlag(fs)
	asJSON := fs.Bool("json", false, "print the recorded decision as JSON (one line per coordinator that decided)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) < 1 || len(pos) > 2 {
			return usagef("why takes the event id, or the event's THREAD and its seq as tail prints them")
		}
		event := pos[len(pos)-1]
		if len(pos) == 2 {
			var err error
			if event, err = m.seqEvent(ctx, pos[0], event); err != nil {
				return err
			}
		}
		var firstErr error
		found := 0
		list := targets(ctx)
		for _, tg := range list {
			var rec ledger.DecisionRecord
			if err := m.statusGetTarget(ctx, tg, "/decisions", url.Values{"event": {event}}, &rec); err != nil {
				if firstErr == nil || bridgeNotFound(firstErr) {
					firstErr = err
				}
				continue
			}
			found++
			if *asJSON {
				if err := m.printJSON(rec); err != nil {
					return err
				}
				continue
			}
			var d rules.Decision
			if err := json.Unmarshal(rec.Decision, &d); err != nil {
				return fmt.Errorf("decode decision: %w", err)
			}
			if len(list) > 1 {
				fmt.Fprintf(m.Stdout, "coordinator %s (%s):\n", tg.name, tg.url)
			}
			printDecision(m.Stdout, rec, d)
		}
		if found == 0 {
			return firstErr
		}
		return nil
	}
}

// bridgeNotFound reports whether err is a 404 answer: when several
// coordinators are asked, another error says more.
func bridgeNotFound(err error) bool {
	var ae *agentbridge.Error
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// printDecision words a recorded decision for a person.
func printDecision(w io.Writer, rec ledger.DecisionRecord, d rules.Decision) {
	fmt.Fprintf(w, "event %s (thread %s, seq %d), decided %s\n", rec.EventID, rec.Thread, rec.Seq, rec.CreatedAt)
	rule := d.Rule
	if d.Reason != "" {
		rule += " (" + d.Reason + ")"
	}
	fmt.Fprintf(w, "rule: %s\n", rule)
	fmt.Fprintf(w, "hop: %d\n", d.Hop)
	if len(d.Invoke) == 0 {
		fmt.Fprintln(w, "invoked: nobody")
	} else {
		fmt.Fprintln(w, "invoked:")
		for _, t := range d.Invoke {
			fmt.Fprintf(w, "  %s (agent %s)\n", t.Participant, t.Agent)
		}
	}
	if len(d.Skipped) > 0 {
		fmt.Fprintln(w, "not invoked:")
		for _, s := range d.Skipped {
			fmt.Fprintf(w, "  %s: %s\n", s.Participant, s.Reason)
		}
	}
	if d.Clarify != "" {
		fmt.Fprintf(w, "clarification sent: %s\n", d.Clarify)
	}
	if d.LoopGuard {
		fmt.Fprintln(w, "loop guard: the hop limit was reached; a notice was posted")
	}
	if d.SceneClose != "" {
		fmt.Fprintf(w, "scene: this event closed the scene (%s); scene.closed was posted\n", d.SceneClose)
	}
	printPartySelection(w, d.Party)
}
