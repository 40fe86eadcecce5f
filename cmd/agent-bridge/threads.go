package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/acp"
	"github.com/spf13/cobra"
)

func (m *Main) threadNewCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	id := fs.String("id", "", "choose the thread's id (default: the server assigns one)")
	from := fs.String("from", "user", "who creates the thread")
	return func(ctx context.Context, pos []string) error {
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
}

func (m *Main) threadListCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	limit := fs.Int("limit", 0, "at most this many threads (0 = all)")
	after := fs.String("after", "", "start after this thread id (the last of the previous page)")
	return func(ctx context.Context, pos []string) error {
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
}

func (m *Main) threadRenameCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who renames the thread")
	return func(ctx context.Context, pos []string) error {
		if len(pos) < 2 {
			return usagef("thread rename: give THREAD and the new NAME")
		}
		content, _ := json.Marshal(joinText(pos[1:]))
		in := agentbridge.EventInput{Type: agentbridge.TypeThreadRenamed, From: *from, Content: content}
		return m.appendAndPrint(ctx, cf, pos[0], in, "")
	}
}

// appendAndPrint posts one event and prints its id and seq, and on stderr
// why it will have no effect when the bridge says so.
func (m *Main) appendAndPrint(ctx context.Context, cf *clientFlags, thread string, in agentbridge.EventInput, key string) error {
	_, err := m.appendPrinted(ctx, cf, thread, in, key)
	return err
}

// appendPrinted is appendAndPrint returning the bridge's answer.
func (m *Main) appendPrinted(ctx context.Context, cf *clientFlags, thread string, in agentbridge.EventInput, key string) (*agentbridge.Ignored, error) {
	c, err := m.newClient(cf)
	if err != nil {
		return nil, err
	}
	a, err := c.AppendAnswer(ctx, thread, in, key)
	if err != nil {
		return nil, explain(err, cf.url)
	}
	// An action the bridge stored but that will change nothing is said
	// on stderr; it is not a failure (exit 0), as the event is stored.
	if a.Ignored != nil {
		fmt.Fprintf(m.Stderr, "agent-bridge: note: %s (%s)\n", a.Ignored.Reason, a.Ignored.Code)
	}
	if cf.json {
		return a.Ignored, m.printJSON(a.Event)
	}
	_, err = fmt.Fprintf(m.Stdout, "%s seq %d\n", a.Event.ID, a.Event.Seq)
	return a.Ignored, err
}

func (m *Main) postCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	to := fs.String("to", agentbridge.ToAll, "recipient participant id")
	from := fs.String("from", "user", "sender participant id")
	replyTo := fs.String("reply-to", "", "id of the event this replies to")
	typ := fs.String("type", agentbridge.TypeMessage, "event type (a control's TEXT is its JSON object)")
	key := fs.String("idempotency-key", "", "retrying with the same key stores the event only once")
	var attach stringList
	fs.Var(&attach, "attach", "a file to attach (repeatable): uploaded, then named in the message's meta.attachments")
	return func(ctx context.Context, pos []string) error {
		if len(pos) == 1 && len(attach) > 0 {
			pos = append(pos, attachmentNames(attach))
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
		if len(attach) > 0 {
			c, err := m.newClient(cf)
			if err != nil {
				return err
			}
			list, err := uploadFiles(ctx, c, pos[0], attach)
			if err != nil {
				return explain(err, cf.url)
			}
			if err := withAttachments(&in, list); err != nil {
				return err
			}
		}
		return m.appendAndPrint(ctx, cf, pos[0], in, *key)
	}
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

func (m *Main) inviteCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who sends the invite")
	cl := fs.String("client", "", "the participant's client, such as claude or codex (default: the profile of the agent of that id in the coordinator config)")
	model := fs.String("model", "", "the participant's model (default: as --client; \"default\" for an ACP agent, which then picks its own)")
	configPath := fs.String("config", m.env(agentbridge.EnvCoordinatorConfig, agentbridge.DefaultCoordinatorConfig), "the coordinator config whose agents' profiles give the default client and model")
	envFlag(fs, "config", agentbridge.EnvCoordinatorConfig)
	nick := fs.String("nickname", "", "a name the participant answers to in mentions")
	character := fs.String("character", "", "the participant's character sheet, when it plays an actor in a scene (@FILE reads a file)")
	var roles stringList
	fs.Var(&roles, "role", "a role the participant answers to in mentions (repeatable)")
	var expertise stringList
	fs.Var(&expertise, "expertise", "a topic the participant knows well, which party mode matches against messages (repeatable)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 2 {
			return usagef("invite: give THREAD and the participant ID")
		}
		client, mdl, err := m.inviteProfile(pos[1], *cl, *model, *configPath, m.configNamed(fs))
		if err != nil {
			return err
		}
		sheet := *character
		if name, ok := strings.CutPrefix(sheet, "@"); ok {
			b, err := os.ReadFile(name)
			if err != nil {
				return usagef("--character: %v", err)
			}
			sheet = string(b)
		}
		profile := agentbridge.Profile{Client: client, Model: mdl, Roles: roles, Nickname: *nick, Character: sheet, Expertise: expertise}
		ctl := map[string]any{"invite": map[string]any{"participant_id": pos[1], "profile": profile}}
		if err := m.postControl(ctx, cf, pos[0], *from, ctl); err != nil {
			return err
		}
		m.noteUnserved(ctx, cf, pos[1], client)
		return nil
	}
}

// noteUnserved says, once at the invite, when no coordinator registered
// with the bridge serves the participant (contract 7.1): its messages get
// no reply until one does. A bridge that keeps no registrations, or does
// not answer within registryWait, says nothing.
func (m *Main) noteUnserved(ctx context.Context, cf *clientFlags, participant, client string) {
	cl, err := m.newClient(cf)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, registryWait)
	defer cancel()
	list, err := cl.Coordinators(ctx)
	if err != nil {
		return
	}
	for _, c := range list.Coordinators {
		if agentbridge.ServesParticipant(c.Agents, participant, client) {
			return
		}
	}
	fmt.Fprintf(m.Stderr, "Note: no coordinator registered with the bridge serves %s (no agent named %s or with client %s), so messages to it get no reply until one does; agent-bridge agents --live lists what each serves.\n", participant, participant, client)
}

// inviteProfile is the client and model an invite of participant id
// sends: the flags', else those of the profile of the configured agent of
// that id (what agent-bridge agents lists), which a first run's
// "agent-bridge invite T echo" needs no more than. An "acp" entry naming
// no model gets "default", the agent's own choice. Neither found is a
// usage error naming the flag.
func (m *Main) inviteProfile(id, client, model, configPath string, configNamed bool) (string, string, error) {
	if client == "" || model == "" {
		cfg, _, _, err := m.loadUpConfig(configPath, configNamed)
		if err != nil {
			return "", "", err
		}
		if a, ok := cfg.Agents[id]; ok {
			if a.Profile != nil {
				client, model = cmp.Or(client, a.Profile.Client), cmp.Or(model, a.Profile.Model)
			}
			client = cmp.Or(client, a.Client)
			if len(a.ACP) > 0 {
				// An ACP agent picks its own model unless told one.
				model = cmp.Or(model, acp.DefaultModel)
			}
		}
	}
	switch {
	case client == "":
		return "", "", usagef("--client: required (the participant's client, such as claude or codex): %q is not an agent of the coordinator config with a profile", id)
	case model == "":
		return "", "", usagef("--model: required (the participant's model): the coordinator config's agent %q names none", id)
	}
	return client, model, nil
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

// controlCommand implements the small control subcommands: uninvite,
// mute, unmute, pause, discussion, auto and prod.
func (m *Main) controlCommand(name string) func(c *cobra.Command) runFunc {
	return func(c *cobra.Command) runFunc { return m.control(c, name) }
}

func (m *Main) control(c *cobra.Command, name string) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who sends the control (mute, pause, discussion and auto count only from humans)")
	var mode, agentMentions *string
	if name == "mute" {
		mode = fs.String("mode", agentbridge.MuteHard, "hard (the bridge refuses their messages) or soft (only never invoked)")
	}
	if name == "discussion" {
		agentMentions = fs.String("agent-mentions", "", "whether agents may wake each other by mention (default: same as on|off)")
	}
	return func(ctx context.Context, pos []string) error {
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

func (m *Main) stateCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	at := fs.Int64("at", 0, "the state as of this seq (0 = now)")
	return func(ctx context.Context, pos []string) error {
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
			return explain(cursorTypo(err, "--at", *at, pos[0]), cf.url)
		}
		st = st.Normalize()
		if cf.json {
			return m.printJSON(struct {
				Thread string                  `json:"thread"`
				Seq    int64                   `json:"seq"`
				State  agentbridge.ThreadState `json:"state"`
			}{pos[0], seq, st})
		}
		return agentbridge.WriteStateText(m.Stdout, pos[0], seq, st)
	}
}
