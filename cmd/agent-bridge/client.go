package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// Tail's reconnect backoff: doubling from tailBackoffMin up to
// tailBackoffMax, with jitter, reset once a stream delivers again.
const (
	tailBackoffMin = 100 * time.Millisecond
	tailBackoffMax = 5 * time.Second
)

// clientFlags are the flags every client subcommand shares.
type clientFlags struct {
	url       string
	tokenFile string
	json      bool
}

func (m *Main) addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{}
	fs.StringVar(&cf.url, "url", m.env(agentbridge.EnvBridgeURL, agentbridge.DefaultBridgeURL), "bridge URL (env BRIDGE_URL)")
	fs.StringVar(&cf.tokenFile, "token-file", "", "file holding the bearer token (default: env BRIDGE_TOKEN)")
	fs.BoolVar(&cf.json, "json", false, "print JSON instead of readable text")
	return cf
}

// newClient builds the HTTP client from the shared flags.
func (m *Main) newClient(cf *clientFlags) (*client.Client, error) {
	u, err := url.Parse(cf.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--url: %q is not an http:// or https:// URL", cf.url)
	}
	token := strings.TrimSpace(m.Getenv(agentbridge.EnvToken))
	if cf.tokenFile != "" {
		b, err := os.ReadFile(cf.tokenFile)
		if err != nil {
			return nil, usagef("--token-file: cannot read the token: %v", err)
		}
		token = strings.TrimSpace(string(b))
	}
	return client.New(cf.url, client.WithToken(token)), nil
}

// serverError is a refusal by the bridge, printed as the server's own
// sentence.
type serverError struct{ e *agentbridge.Error }

func (s *serverError) Error() string { return s.e.Message }
func (s *serverError) Unwrap() error { return s.e }

// explain turns a client error into what the CLI prints: the server's
// sentence for a refusal, a hint for a bridge that is not running.
func explain(err error, bridgeURL string) error {
	var e *agentbridge.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return &serverError{e: e}
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w (is the bridge running at %s? start it with \"agent-bridge serve\")", err, bridgeURL)
	default:
		return err
	}
}

func (m *Main) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = fmt.Fprintf(m.Stdout, "%s\n", b)
	return err
}

// joinText joins the words of a positional argument that was not quoted.
func joinText(words []string) string { return strings.Join(words, " ") }

// runThread dispatches "thread new|list|rename".
func (m *Main) runThread(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("thread: give a subcommand: new, list or rename")
	}
	switch args[0] {
	case "new":
		return m.runThreadNew(ctx, args[1:])
	case "list", "ls":
		return m.runThreadList(ctx, args[1:])
	case "rename":
		return m.runThreadRename(ctx, args[1:])
	default:
		return usagef("thread: unknown subcommand %q (want new, list or rename)", args[0])
	}
}

func (m *Main) runThreadNew(ctx context.Context, args []string) error {
	fs := m.newFlagSet("thread new")
	cf := m.addClientFlags(fs)
	id := fs.String("id", "", "choose the thread's id (default: the server assigns one)")
	from := fs.String("from", "user", "who creates the thread")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("thread new: give the thread a NAME")
	}
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	th, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: *id, Name: joinText(pos), From: *from})
	if err != nil {
		return explain(err, cf.url)
	}
	if cf.json {
		return m.printJSON(th)
	}
	_, err = fmt.Fprintln(m.Stdout, th.ID)
	return err
}

func (m *Main) runThreadList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("thread list")
	cf := m.addClientFlags(fs)
	limit := fs.Int("limit", 0, "at most this many threads (0 = all)")
	after := fs.String("after", "", "start after this thread id (the last of the previous page)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("thread list: unexpected argument %q", pos[0])
	}
	if *limit < 0 {
		return usagef("--limit: must be 0 or more, not %d", *limit)
	}
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	threads, err := c.Threads(ctx, *after, *limit)
	if err != nil {
		return explain(err, cf.url)
	}
	if cf.json {
		if threads == nil {
			threads = []agentbridge.Thread{}
		}
		return m.printJSON(threads)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tEVENTS\tUPDATED")
	for _, th := range threads {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", th.ID, th.Name, th.EventCount, th.UpdatedAt)
	}
	return tw.Flush()
}

func (m *Main) runThreadRename(ctx context.Context, args []string) error {
	fs := m.newFlagSet("thread rename")
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who renames the thread")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("thread rename: give THREAD and the new NAME")
	}
	content, _ := json.Marshal(joinText(pos[1:]))
	in := agentbridge.EventInput{Type: agentbridge.TypeThreadRenamed, From: *from, Content: content}
	return m.appendAndPrint(ctx, cf, pos[0], in, "")
}

// appendAndPrint posts one event and prints its id and seq.
func (m *Main) appendAndPrint(ctx context.Context, cf *clientFlags, thread string, in agentbridge.EventInput, key string) error {
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	e, err := c.Append(ctx, thread, in, key)
	if err != nil {
		return explain(err, cf.url)
	}
	if cf.json {
		return m.printJSON(e)
	}
	_, err = fmt.Fprintf(m.Stdout, "%s seq %d\n", e.ID, e.Seq)
	return err
}

func (m *Main) runPost(ctx context.Context, args []string) error {
	fs := m.newFlagSet("post")
	cf := m.addClientFlags(fs)
	to := fs.String("to", agentbridge.ToAll, "recipient participant id")
	from := fs.String("from", "user", "sender participant id")
	replyTo := fs.String("reply-to", "", "id of the event this replies to")
	typ := fs.String("type", agentbridge.TypeMessage, "event type (a control's TEXT is its JSON object)")
	key := fs.String("idempotency-key", "", "retrying with the same key stores the event only once")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("post: give THREAD and TEXT (TEXT - reads standard input)")
	}
	text := joinText(pos[1:])
	if text == "-" {
		b, err := io.ReadAll(m.Stdin)
		if err != nil {
			return fmt.Errorf("read standard input: %w", err)
		}
		text = strings.TrimRight(string(b), "\r\n")
	}
	in := agentbridge.EventInput{Type: *typ, From: *from, To: *to, Content: encodeContent(*typ, text)}
	in.Meta.ReplyTo = *replyTo
	return m.appendAndPrint(ctx, cf, pos[0], in, *key)
}

// encodeContent makes TEXT the event's content: a string for messages and
// renames, the JSON itself for controls and other types when TEXT is JSON
// (so "post T '{\"pause\":{\"on\":true}}' --type control" works), a string
// otherwise (the server then says what is wrong).
func encodeContent(typ, text string) json.RawMessage {
	switch typ {
	case agentbridge.TypeMessage, agentbridge.TypeThreadCreated, agentbridge.TypeThreadRenamed:
	default:
		if t := strings.TrimSpace(text); json.Valid([]byte(t)) {
			return json.RawMessage(t)
		}
	}
	b, _ := json.Marshal(text)
	return b
}

// stringList is a repeatable string flag (--role a --role b).
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func (m *Main) runInvite(ctx context.Context, args []string) error {
	fs := m.newFlagSet("invite")
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who sends the invite")
	cl := fs.String("client", "", "the participant's client, such as claude or codex (required)")
	model := fs.String("model", "", "the participant's model (required)")
	nick := fs.String("nickname", "", "a name the participant answers to in mentions")
	character := fs.String("character", "", "the participant's character sheet, when it plays an actor in a scene (@FILE reads a file)")
	var roles stringList
	fs.Var(&roles, "role", "a role the participant answers to in mentions (repeatable)")
	var expertise stringList
	fs.Var(&expertise, "expertise", "a topic the participant knows well, which party mode matches against messages (repeatable)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("invite: give THREAD and the participant ID")
	}
	if *cl == "" {
		return usagef("--client: required (the participant's client, such as claude or codex)")
	}
	if *model == "" {
		return usagef("--model: required (the participant's model)")
	}
	sheet := *character
	if name, ok := strings.CutPrefix(sheet, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return usagef("--character: %v", err)
		}
		sheet = string(b)
	}
	profile := agentbridge.Profile{Client: *cl, Model: *model, Roles: roles, Nickname: *nick, Character: sheet, Expertise: expertise}
	ctl := map[string]any{"invite": map[string]any{"participant_id": pos[1], "profile": profile}}
	return m.postControl(ctx, cf, pos[0], *from, ctl)
}

// postControl posts a control event built from ctl.
func (m *Main) postControl(ctx context.Context, cf *clientFlags, thread, from string, ctl map[string]any) error {
	content, err := json.Marshal(ctl)
	if err != nil {
		return fmt.Errorf("encode control: %w", err)
	}
	in := agentbridge.EventInput{Type: agentbridge.TypeControl, From: from, Content: content}
	return m.appendAndPrint(ctx, cf, thread, in, "")
}

// runControl implements the small control subcommands: uninvite, mute,
// unmute, pause, discussion, auto and prod.
func (m *Main) runControl(ctx context.Context, name string, args []string) error {
	fs := m.newFlagSet(name)
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who sends the control (mute, pause, discussion and auto count only from humans)")
	var mode, agentMentions *string
	if name == "mute" {
		mode = fs.String("mode", agentbridge.MuteHard, "hard (the bridge refuses their messages) or soft (only never invoked)")
	}
	if name == "discussion" {
		agentMentions = fs.String("agent-mentions", "", "whether agents may wake each other by mention (default: same as on|off)")
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	var ctl map[string]any
	switch name {
	case "uninvite":
		if len(pos) != 2 {
			return usagef("uninvite: give THREAD and the participant ID")
		}
		ctl = map[string]any{"uninvite": map[string]string{"participant_id": pos[1]}}
	case "mute", "unmute", "prod":
		if len(pos) < 2 {
			return usagef("%s: give THREAD and one or more participant IDs", name)
		}
		switch name {
		case "mute":
			if *mode != agentbridge.MuteHard && *mode != agentbridge.MuteSoft {
				return usagef("--mode: must be hard or soft, not %q", *mode)
			}
			ctl = map[string]any{"mute": map[string]any{"targets": pos[1:], "mode": *mode}}
		case "unmute":
			ctl = map[string]any{"unmute": map[string]any{"targets": pos[1:]}}
		default:
			ctl = map[string]any{"prod": pos[1:]}
		}
	case "pause", "discussion", "auto":
		if len(pos) != 2 {
			return usagef("%s: give THREAD and on or off", name)
		}
		on, ok := parseOnOff(pos[1])
		if !ok {
			return usagef("%s: the second argument must be on or off, not %q", name, pos[1])
		}
		switch name {
		case "pause":
			ctl = map[string]any{"pause": map[string]bool{"on": on}}
		case "auto":
			ctl = map[string]any{"invited_auto": map[string]bool{"on": on}}
		default:
			d := map[string]bool{"on": on}
			if *agentMentions != "" {
				am, err := strconv.ParseBool(*agentMentions)
				if err != nil {
					return usagef("--agent-mentions: must be true or false, not %q", *agentMentions)
				}
				d["allow_agent_mentions"] = am
			}
			ctl = map[string]any{"discussion": d}
		}
	}
	return m.postControl(ctx, cf, pos[0], *from, ctl)
}

func parseOnOff(s string) (on, ok bool) {
	switch strings.ToLower(s) {
	case "on", "true", "yes", "1":
		return true, true
	case "off", "false", "no", "0":
		return false, true
	}
	return false, false
}

func (m *Main) runState(ctx context.Context, args []string) error {
	fs := m.newFlagSet("state")
	cf := m.addClientFlags(fs)
	at := fs.Int64("at", 0, "the state as of this seq (0 = now)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("state: give one THREAD")
	}
	if *at < 0 {
		return usagef("--at: must be a seq of 1 or more, not %d", *at)
	}
	c, err := m.newClient(cf)
	if err != nil {
		return err
	}
	st, seq, err := c.State(ctx, pos[0], *at)
	if err != nil {
		return explain(err, cf.url)
	}
	st = st.Normalize()
	if cf.json {
		return m.printJSON(struct {
			Thread string                  `json:"thread"`
			Seq    int64                   `json:"seq"`
			State  agentbridge.ThreadState `json:"state"`
		}{pos[0], seq, st})
	}
	w := m.Stdout
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	fmt.Fprintf(w, "thread %s at seq %d\n", pos[0], seq)
	fmt.Fprintf(w, "paused:       %s\n", onOff(st.Paused))
	fmt.Fprintf(w, "muted:        %s\n", listOrNone(st.Muted))
	if len(st.SoftMuted) > 0 {
		fmt.Fprintf(w, "soft-muted:   %s\n", listOrNone(st.SoftMuted))
	}
	fmt.Fprintf(w, "discussion:   %s (agent mentions %s)\n", onOff(st.Discussion.On), onOff(st.Discussion.AllowAgentMentions))
	fmt.Fprintf(w, "invited_auto: %s\n", onOff(st.InvitedAuto.On))
	if st.Scene != nil {
		fmt.Fprintf(w, "scene:        %s\n", st.Scene)
	}
	fmt.Fprintf(w, "party:        %s\n", partyLine(st.Party))
	if len(st.Participants.Invited) == 0 {
		_, err = fmt.Fprintln(w, "invited:      none")
		return err
	}
	fmt.Fprintln(w, "invited:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, inv := range st.Participants.Invited {
		p := inv.Profile
		fmt.Fprintf(tw, "  %s\tclient=%s\tmodel=%s", inv.ID, p.Client, p.Model)
		if p.Nickname != "" {
			fmt.Fprintf(tw, "\tnickname=%s", p.Nickname)
		}
		if len(p.Roles) > 0 {
			fmt.Fprintf(tw, "\troles=%s", strings.Join(p.Roles, ","))
		}
		if len(p.Expertise) > 0 {
			fmt.Fprintf(tw, "\texpertise=%s", strings.Join(p.Expertise, ","))
		}
		fmt.Fprintf(tw, "\t(invited by %s)\n", inv.InvitedBy)
	}
	return tw.Flush()
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

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
}

func (m *Main) runTail(ctx context.Context, args []string) error {
	fs := m.newFlagSet("tail")
	cf := m.addClientFlags(fs)
	all := fs.Bool("all", false, "follow every thread (the global stream)")
	after := fs.Int64("after", -1, "start after this seq (gseq with --all); default: the last --last events, or the end with --all")
	last := fs.Int("last", 10, "without --after, print this many past events of the thread first")
	presence := fs.Bool("presence", false, "with --all, print presence changes too")
	noReceipts := fs.Bool("no-receipts", false, "do not print receipts (what became of each addressed participant)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
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
	if f, ok := m.Stdout.(*os.File); ok && isTerminal(f) {
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

// start sets the cursor when --after was not given: a thread's last events
// are printed first; the global stream starts at the log's end.
func (t *tailer) start(ctx context.Context, last int) error {
	if t.cursor >= 0 {
		return nil
	}
	if t.thread == "" {
		head, err := t.c.Head(ctx)
		t.cursor = head
		return err
	}
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
	// Receipts are not replayed on the stream, so the backlog's current
	// ones are asked for: each is printed under its event, as the live
	// changes that follow are.
	byEvent := map[string][]agentbridge.Receipt{}
	if t.receipts && len(events) > 0 {
		rs, err := t.c.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: t.thread, FromEvent: events[0].ID})
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
// token is wrong). A broken connection is retried with capped exponential
// backoff and jitter, from the last printed event, so a bridge restart loses
// and repeats nothing.
func (t *tailer) follow(ctx context.Context) error {
	b := client.Backoff{Min: tailBackoffMin, Max: tailBackoffMax}
	for {
		var s *client.Stream
		var err error
		if t.thread == "" {
			s, err = t.c.StreamAll(ctx, t.cursor)
		} else {
			s, err = t.c.Stream(ctx, t.thread, t.cursor)
		}
		if err == nil {
			var progressed bool
			progressed, err = t.drain(s)
			s.Close()
			if progressed {
				b.Reset()
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if permanent(err) {
			return err
		}
		delay := b.Next()
		t.log.Warn("tail: stream lost; reconnecting", "err", err, "after", t.cursor, "in", delay.Round(time.Millisecond))
		if !client.Sleep(ctx, delay) {
			return nil
		}
	}
}

// drain prints the stream's items until it ends, skipping anything at or
// before the cursor, and reports whether anything arrived.
func (t *tailer) drain(s *client.Stream) (progressed bool, err error) {
	for {
		it, err := s.Next()
		if err != nil {
			if err == io.EOF {
				err = errors.New("the bridge closed the stream")
			}
			return progressed, err
		}
		progressed = true
		switch {
		case it.Presence != nil:
			if t.presence {
				if err := t.printPresence(*it.Presence); err != nil {
					return progressed, err
				}
			}
		case it.Receipt != nil:
			if t.receipts {
				if err := t.printReceipt(*it.Receipt); err != nil {
					return progressed, err
				}
			}
		case it.Event != nil:
			pos := it.Event.Seq
			if t.thread == "" {
				pos = it.Event.GSeq
			}
			if pos <= t.cursor {
				continue
			}
			if err := t.printEvent(*it.Event); err != nil {
				return progressed, err
			}
			t.cursor = pos
		}
	}
}

// permanent reports whether retrying cannot help: the bridge answered with a
// client error (unknown thread, cursor ahead, unauthorized …), or printing
// failed.
func permanent(err error) bool {
	var e *agentbridge.Error
	if errors.As(err, &e) {
		return e.Status >= 400 && e.Status < 500 && e.Status != http.StatusRequestTimeout && e.Status != http.StatusTooManyRequests
	}
	var pe *printError
	return errors.As(err, &pe)
}

// printError marks a failure to write the output (a closed pipe), which
// ends tail rather than being retried.
type printError struct{ err error }

func (p *printError) Error() string { return "write output: " + p.err.Error() }
func (p *printError) Unwrap() error { return p.err }

func (t *tailer) printEvent(e agentbridge.Event) error {
	var err error
	if t.cf.json {
		err = t.m.printJSON(e)
	} else {
		_, err = fmt.Fprintln(t.m.Stdout, formatEvent(e, t.thread == ""))
	}
	if err != nil {
		return &printError{err: err}
	}
	return nil
}

func (t *tailer) printPresence(p agentbridge.Presence) error {
	var err error
	if t.cf.json {
		err = t.m.printJSON(map[string]any{"presence": p})
	} else {
		_, err = fmt.Fprintf(t.m.Stdout, "[presence] %s %s %s: %s\n", p.UpdatedAt, p.Thread, p.ID, p.State)
	}
	if err != nil {
		return &printError{err: err}
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
		_, err = fmt.Fprintf(t.m.Stdout, "\x1b[2m%s\x1b[0m\n", formatReceipt(r, t.thread == ""))
	default:
		_, err = fmt.Fprintln(t.m.Stdout, formatReceipt(r, t.thread == ""))
	}
	if err != nil {
		return &printError{err: err}
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
// "[seq] ts from → to: content" (with --all, "[gseq] thread#seq ts …").
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
	b.WriteString(": ")
	b.WriteString(strings.ReplaceAll(strings.TrimRight(e.Text(), "\n"), "\n", "\n    "))
	return b.String()
}
