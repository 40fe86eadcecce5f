package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/spf13/cobra"
)

// Tail's reconnect backoff: doubling from tailBackoffMin up to
// tailBackoffMax, with jitter, reset once a stream delivers again.
const (
	tailBackoffMin = 100 * time.Millisecond
	tailBackoffMax = 5 * time.Second
)

// tailer follows a stream and prints each item once, resuming from the last
// printed cursor after a broken connection.
type tailer struct {
	m        *Main
	c        *client.Client
	cf       *clientFlags
	log      *slog.Logger
	thread   string // "" with --all
	presence bool
	// receipts prints receipt changes (on by default, --no-receipts);
	// dim wraps them in ANSI dim, only when stdout is a terminal.
	receipts, dim bool
	// cursor is the seq (thread) or gseq (--all) of the last printed event.
	cursor int64
	// answers marks a second answer to a permission request as without
	// effect.
	answers answerNotes
}

func (m *Main) tailCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	all := fs.Bool("all", false, "follow every thread (the global stream)")
	after := fs.Int64("after", -1, "start after this seq (gseq with --all); default: the last --last events, or the end with --all")
	last := fs.Int("last", 10, "without --after, print this many past events of the thread first")
	presence := fs.Bool("presence", false, "with --all, print presence changes too")
	noReceipts := fs.Bool("no-receipts", false, "do not print receipts (what became of each addressed participant)")
	return func(ctx context.Context, pos []string) error {
		switch {
		case *all && len(pos) > 0:
			return usagef("tail: give either THREAD or --all, not both")
		case !*all && len(pos) != 1:
			return usagef("tail: give one THREAD, or --all")
		case *last < 0:
			return usagef("--last: must be 0 or more, not %d", *last)
		}
		c, err := m.newClient(cf)
		if err != nil {
			return err
		}
		t := &tailer{m: m, c: c, cf: cf, presence: *presence, cursor: *after,
			log: slog.New(slog.NewTextHandler(m.Stderr, nil)), receipts: !*noReceipts}
		if f, ok := unescaped(m.Stdout).(*os.File); ok && isTerminal(f) {
			t.dim = true
		}
		if !*all {
			t.thread = pos[0]
		}
		if err := t.start(ctx, *last); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return explain(err, cf.url)
		}
		return explain(t.follow(ctx), cf.url)
	}
}

// tailPage is how many past events tail --after reads per request.
const tailPage = 500

// start prints what comes before following: a thread's last --last events,
// or with --after every event of the thread after that seq, each with its
// current receipts. The global stream starts at the log's end, or after
// --after, and replays events only (receipts are not kept by gseq).
func (t *tailer) start(ctx context.Context, last int) error {
	if t.thread == "" {
		if t.cursor >= 0 {
			return nil
		}
		head, err := t.c.Head(ctx)
		t.cursor = head
		return err
	}
	if t.cursor < 0 {
		events, err := t.c.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: t.thread, After: -1, Tail: max(last, 1)})
		if err != nil {
			return err
		}
		t.cursor = 0
		if n := len(events); n > 0 {
			t.cursor = events[n-1].Seq
		}
		if len(events) > last {
			events = events[len(events)-last:]
		}
		return t.printBacklog(ctx, events)
	}
	for {
		events, err := t.c.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: t.thread, After: t.cursor, Limit: tailPage})
		if err != nil {
			return cursorTypo(err, "--after", t.cursor, t.thread)
		}
		if len(events) == 0 {
			return nil
		}
		if err := t.printBacklog(ctx, events); err != nil {
			return err
		}
		t.cursor = events[len(events)-1].Seq
		if len(events) < tailPage {
			return nil
		}
	}
}

// printBacklog prints past events, each followed by its current receipts:
// receipts are not replayed on the stream, so they are asked for.
func (t *tailer) printBacklog(ctx context.Context, events []agentbridge.Event) error {
	byEvent := map[string][]agentbridge.Receipt{}
	if t.receipts && len(events) > 0 {
		rs, err := t.c.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: t.thread, FromEvent: events[0].ID, Limit: agentbridge.MaxEventsLimit})
		if err != nil {
			t.log.Warn("tail: the past events' receipts could not be read; printing new ones only", "err", err)
		}
		for _, r := range rs {
			byEvent[r.Event] = append(byEvent[r.Event], r)
		}
	}
	for _, e := range events {
		if err := t.printEvent(e); err != nil {
			return err
		}
		for _, r := range byEvent[e.ID] {
			if err := t.printReceipt(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// follow streams from the cursor until ctx ends or the bridge refuses for
// good (the thread is gone, the cursor is past the head after a restore, the
// token is wrong) or printing fails; client.Follow reconnects from the last
// printed event, so a bridge restart loses and repeats nothing.
func (t *tailer) follow(ctx context.Context) error {
	return t.c.Follow(ctx, t.cursor, client.FollowOptions{
		Thread:  t.thread,
		Backoff: client.Backoff{Min: tailBackoffMin, Max: tailBackoffMax},
		Logger:  t.log,
		Handle:  t.print,
	})
}

// print prints one stream item: events always, presence with --presence,
// receipts unless --no-receipts.
func (t *tailer) print(it client.Item) error {
	switch {
	case it.Presence != nil && t.presence:
		return t.printPresence(*it.Presence)
	case it.Receipt != nil && t.receipts:
		return t.printReceipt(*it.Receipt)
	case it.Event != nil:
		if err := t.printEvent(*it.Event); err != nil {
			return err
		}
		t.cursor = it.Event.Seq
		if t.thread == "" {
			t.cursor = it.Event.GSeq
		}
	}
	return nil
}

// printEvent prints one event, as JSON with --json. A failure to write
// (a closed pipe) ends tail: client.Follow retries only the bridge.
func (t *tailer) printEvent(e agentbridge.Event) error {
	var err error
	if t.cf.json {
		err = t.m.printJSON(e)
	} else {
		_, err = fmt.Fprintln(t.m.Stdout, formatEvent(e, t.thread == "")+t.answers.note(e))
	}
	if err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// printPresence prints one presence change (--all --presence).
func (t *tailer) printPresence(p agentbridge.Presence) error {
	var err error
	if t.cf.json {
		err = t.m.printJSON(map[string]any{"presence": p})
	} else {
		_, err = fmt.Fprintf(t.m.Stdout, "[presence] %s %s %s: %s\n", p.UpdatedAt, p.Thread, p.ID, p.State)
	}
	if err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// printReceipt prints a receipt change as one line, dim on a terminal so
// that it reads as a footnote to the conversation.
func (t *tailer) printReceipt(r agentbridge.Receipt) error {
	var err error
	switch {
	case t.cf.json:
		err = t.m.printJSON(map[string]any{"receipt": r})
	case t.dim:
		// The dim codes are written around the escaped line, not through
		// the escaper, which would show them.
		raw := t.m.rawOut()
		if _, err = io.WriteString(raw, "\x1b[2m"); err == nil {
			if _, err = fmt.Fprint(t.m.Stdout, formatReceipt(r, t.thread == "")); err == nil {
				_, err = io.WriteString(raw, "\x1b[0m\n")
			}
		}
	default:
		_, err = fmt.Fprintln(t.m.Stdout, formatReceipt(r, t.thread == ""))
	}
	if err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// formatReceipt renders a receipt as "  ↳ participant: state (details) for
// event" (with --all, the thread is named too).
func formatReceipt(r agentbridge.Receipt, global bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  ↳ %s: %s", r.Participant, r.State)
	if r.Reason != "" {
		fmt.Fprintf(&b, " — %s", r.Reason)
	}
	if r.Invocation != "" {
		fmt.Fprintf(&b, " (invocation %s)", r.Invocation)
	}
	if r.Reply != "" {
		fmt.Fprintf(&b, " reply %s", r.Reply)
	}
	b.WriteString(" for ")
	if global {
		b.WriteString(r.Thread + "/")
	}
	b.WriteString(r.Event)
	return b.String()
}

// formatEvent renders an event as one readable line:
// "[seq] ts from → to: content" (with --all, "[gseq] thread#seq ts …"); a
// permission request and a question with fields also show their id.
// Types other than message are named; continuation lines of a multi-line
// content are indented so that every event still starts with "[".
func formatEvent(e agentbridge.Event, global bool) string {
	var b strings.Builder
	if global {
		fmt.Fprintf(&b, "[%d] %s#%d ", e.GSeq, e.Thread, e.Seq)
	} else {
		fmt.Fprintf(&b, "[%d] ", e.Seq)
	}
	fmt.Fprintf(&b, "%s %s → %s", e.TS, e.From, e.To)
	if e.Type != agentbridge.TypeMessage {
		fmt.Fprintf(&b, " (%s)", e.Type)
	}
	if slices.Contains(e.Meta.Tags, "permission") || agentbridge.IsFieldQuestion(e) {
		// What permit and answer name (its seq, printed first, works too).
		fmt.Fprintf(&b, " (id %s)", e.ID)
	}
	b.WriteString(": ")
	b.WriteString(strings.ReplaceAll(strings.TrimRight(e.Text(), "\n"), "\n", "\n    "))
	writeAttachments(&b, e)
	return b.String()
}
