package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Bounds of the tools' arguments. Models ask for what the description
// offers, so the bounds are in the descriptions too.
const (
	// defaultListLimit and maxListLimit bound list_threads.
	defaultListLimit = 50
	maxListLimit     = 500
	// defaultReadLimit and maxReadLimit bound read_thread: a page larger
	// than a few hundred events rarely fits a model's context usefully.
	defaultReadLimit = 50
	maxReadLimit     = 500
)

// Inputs. The json names are the tools' argument names; a field is required
// unless it is omitempty; the jsonschema tag is the argument's description.

type listThreadsIn struct {
	Limit int    `json:"limit,omitempty" jsonschema:"how many threads at most, most recently updated first (default 50, at most 500)"`
	After string `json:"after,omitempty" jsonschema:"for the next page: the id of the last thread of the previous page"`
}

type createThreadIn struct {
	Name string `json:"name" jsonschema:"the thread's name, a short title such as 'API design review'"`
	ID   string `json:"id,omitempty" jsonschema:"choose the thread id (letters, digits, . _ -, up to 64); leave out to let the bridge assign one"`
}

type readThreadIn struct {
	Thread string `json:"thread" jsonschema:"the thread id"`
	After  *int64 `json:"after,omitempty" jsonschema:"return events with seq greater than this (0 = from the start); leave out to get the thread's latest events"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many events at most (default 50, at most 500)"`
}

type postIn struct {
	Thread  string `json:"thread" jsonschema:"the thread id"`
	Content string `json:"content" jsonschema:"the message text (markdown is fine); mention a participant with @id to draw their attention"`
	To      string `json:"to,omitempty" jsonschema:"the recipient's participant id, or 'all' (default) for everyone in the thread"`
	ReplyTo string `json:"reply_to,omitempty" jsonschema:"the id of the event this message answers (from read_thread or wait_for_reply)"`
	// Attachments are files to send with the message.
	Attachments []string `json:"attachments,omitempty" jsonschema:"files to send with the message: paths of files in your working folder (relative to it, or absolute inside it), at most 32; they are uploaded to the thread, and people and agents there get them"`
}

type inviteIn struct {
	Thread      string   `json:"thread" jsonschema:"the thread id"`
	Participant string   `json:"participant" jsonschema:"the id of the participant to invite, such as 'codex' or 'claude'"`
	Client      string   `json:"client" jsonschema:"which client runs the participant, such as 'claude' or 'codex'"`
	Model       string   `json:"model" jsonschema:"the participant's model, such as 'sonnet' or 'gpt-5'"`
	Nickname    string   `json:"nickname,omitempty" jsonschema:"another name the participant answers to in @mentions"`
	Roles       []string `json:"roles,omitempty" jsonschema:"roles the participant answers to in @mentions, such as 'reviewer'"`
}

type threadStateIn struct {
	Thread string `json:"thread" jsonschema:"the thread id"`
}

// Outputs: the structured content of each tool. A thread is given as the
// API gives it (agentbridge.Thread).

type listThreadsOut struct {
	Threads []agentbridge.Thread `json:"threads"`
	// NextAfter is the cursor of the next page, empty when this page was
	// not full.
	NextAfter string `json:"next_after,omitempty"`
}

// eventOut is an event as a model needs it: content as text, meta
// flattened to the keys that matter for a conversation.
type eventOut struct {
	ID   string `json:"id"`
	Seq  int64  `json:"seq"`
	TS   string `json:"ts"`
	Type string `json:"type"`
	From string `json:"from"`
	To   string `json:"to"`
	Text string `json:"text,omitempty"`
	// Content is set instead of Text for content that is not a string,
	// such as a control's object.
	Content any      `json:"content,omitempty"`
	ReplyTo string   `json:"reply_to,omitempty"`
	Tags    []string `json:"tags,omitempty"`
}

func toEventOut(e agentbridge.Event) eventOut {
	out := eventOut{ID: e.ID, Seq: e.Seq, TS: e.TS, Type: e.Type, From: e.From, To: e.To, ReplyTo: e.Meta.ReplyTo, Tags: e.Meta.Tags}
	var s string
	if json.Unmarshal(e.Content, &s) == nil {
		out.Text = s
	} else if len(e.Content) > 0 {
		_ = json.Unmarshal(e.Content, &out.Content)
	}
	return out
}

type readThreadOut struct {
	Thread string     `json:"thread"`
	Events []eventOut `json:"events"`
	// NextAfter is the seq to pass as after to read on; the thread's last
	// seq when nothing was returned.
	NextAfter int64 `json:"next_after"`
}

type postedOut struct {
	Thread string `json:"thread"`
	ID     string `json:"id"`
	Seq    int64  `json:"seq"`
	// Attachments are the files a post sent, as stored.
	Attachments []agentbridge.Attachment `json:"attachments,omitempty"`
}

type stateOut struct {
	Thread string                  `json:"thread"`
	Seq    int64                   `json:"seq"`
	State  agentbridge.ThreadState `json:"state"`
}

func (s *Server) addTools() {
	no := false
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}
	writes := &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "list_threads",
		Title:       "List threads",
		Description: "List the bridge's threads, most recently updated first, with their ids, names and event counts.",
		Annotations: readOnly,
	}, s.listThreads)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "create_thread",
		Title:       "Create a thread",
		Description: fmt.Sprintf("Create a new thread, started by %s. Returns the thread's id, which the other tools take.", s.as),
		Annotations: writes,
	}, s.createThread)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "read_thread",
		Title:       "Read a thread",
		Description: "Read a thread's events in order: by default its latest ones; with after, the events after that seq. Each line shows seq, event id, sender, recipient and the reply_to link.",
		Annotations: readOnly,
	}, s.readThread)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "post",
		Title:       "Post a message",
		Description: fmt.Sprintf("Post a message to a thread as %s. Returns the new event's id: pass it to wait_for_reply to wait for an answer.", s.as),
		Annotations: writes,
	}, s.post)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "invite",
		Title:       "Invite a participant",
		Description: "Invite a participant (an agent run by the bridge's coordinator) into a thread with the client and model that run it, so it can be @mentioned and answer there.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no},
	}, s.invite)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "thread_state",
		Title:       "Thread state",
		Description: "Show a thread's state: who is invited (with client and model), who is muted, and whether the thread is paused or in discussion mode.",
		Annotations: readOnly,
	}, s.threadState)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "wait_for_reply",
		Title:       "Wait for a reply",
		Description: fmt.Sprintf("Wait until someone other than %s posts a message replying to the given event (its meta.reply_to is that event), and return that reply. A reply posted before the call is found too. If none arrives within timeout_s seconds (default %d, at most %d) the result says so; call again to keep waiting.", s.as, int(defaultWait.Seconds()), int(maxWait.Seconds())),
		Annotations: readOnly,
	}, s.waitForReply)
	s.addSearchTool()
}

func (s *Server) listThreads(ctx context.Context, _ *mcp.CallToolRequest, in listThreadsIn) (*mcp.CallToolResult, listThreadsOut, error) {
	limit, err := boundLimit(in.Limit, defaultListLimit, maxListLimit)
	if err != nil {
		return nil, listThreadsOut{}, err
	}
	threads, err := s.c.Threads(ctx, in.After, limit)
	if err != nil {
		return nil, listThreadsOut{}, s.toolError(err)
	}
	out := listThreadsOut{Threads: make([]agentbridge.Thread, 0, len(threads))}
	var b strings.Builder
	if len(threads) == 0 {
		b.WriteString("No threads.")
	}
	for _, th := range threads {
		out.Threads = append(out.Threads, th)
		fmt.Fprintf(&b, "%s  %q  %d events, updated %s\n", th.ID, th.Name, th.EventCount, th.UpdatedAt)
	}
	if len(threads) == limit {
		out.NextAfter = threads[len(threads)-1].ID
		fmt.Fprintf(&b, "More threads: call again with after=%q.", out.NextAfter)
	}
	return textResult(b.String()), out, nil
}

func (s *Server) createThread(ctx context.Context, _ *mcp.CallToolRequest, in createThreadIn) (*mcp.CallToolResult, agentbridge.Thread, error) {
	if err := agentbridge.ValidateThreadName(in.Name); err != nil {
		return nil, agentbridge.Thread{}, invalidArg("name", "%s", sentence(err))
	}
	if in.ID != "" && !agentbridge.ThreadIDPattern.MatchString(in.ID) {
		return nil, agentbridge.Thread{}, invalidArg("id", "%q is not a valid thread id: use 1 to 64 letters, digits or . _ -, starting with a letter or digit", in.ID)
	}
	th, err := s.c.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: in.ID, Name: in.Name, From: s.as})
	if err != nil {
		return nil, agentbridge.Thread{}, s.toolError(err)
	}
	return textResult(fmt.Sprintf("Created thread %s (%q).", th.ID, th.Name)), th, nil
}

func (s *Server) readThread(ctx context.Context, _ *mcp.CallToolRequest, in readThreadIn) (*mcp.CallToolResult, readThreadOut, error) {
	if err := checkThreadArg(in.Thread); err != nil {
		return nil, readThreadOut{}, err
	}
	limit, err := boundLimit(in.Limit, defaultReadLimit, maxReadLimit)
	if err != nil {
		return nil, readThreadOut{}, err
	}
	q := agentbridge.ThreadEventsQuery{Thread: in.Thread, After: -1, Tail: limit}
	if in.After != nil {
		if *in.After < 0 {
			return nil, readThreadOut{}, invalidArg("after", "must be a seq of 0 or more, not %d", *in.After)
		}
		q = agentbridge.ThreadEventsQuery{Thread: in.Thread, After: *in.After, Limit: limit}
	}
	events, err := s.c.ThreadEvents(ctx, q)
	if err != nil {
		return nil, readThreadOut{}, s.toolError(err)
	}
	out := readThreadOut{Thread: in.Thread, Events: make([]eventOut, 0, len(events))}
	for _, e := range events {
		out.Events = append(out.Events, toEventOut(e))
	}
	var b strings.Builder
	switch {
	case len(events) > 0:
		out.NextAfter = events[len(events)-1].Seq
		writeEvents(&b, events)
		if in.After != nil && len(events) == limit {
			fmt.Fprintf(&b, "There may be more: call again with after=%d.\n", out.NextAfter)
		}
	case in.After != nil:
		out.NextAfter = *in.After
		fmt.Fprintf(&b, "No events after seq %d in thread %s.", *in.After, in.Thread)
	default:
		b.WriteString("The thread has no events.")
	}
	return textResult(b.String()), out, nil
}

func (s *Server) post(ctx context.Context, _ *mcp.CallToolRequest, in postIn) (*mcp.CallToolResult, postedOut, error) {
	if err := checkThreadArg(in.Thread); err != nil {
		return nil, postedOut{}, err
	}
	if strings.TrimSpace(in.Content) == "" {
		return nil, postedOut{}, invalidArg("content", "the message is empty; write what you want to say")
	}
	to := in.To
	if to == "" {
		to = agentbridge.ToAll
	}
	if !agentbridge.ParticipantIDPattern.MatchString(to) {
		return nil, postedOut{}, invalidArg("to", "%q is not a participant id: give one participant's id (letters, digits or . _ @ : -, such as 'codex') or 'all'", in.To)
	}
	content, err := json.Marshal(in.Content)
	if err != nil {
		return nil, postedOut{}, fmt.Errorf("encode content: %w", err)
	}
	ev := agentbridge.EventInput{Type: agentbridge.TypeMessage, From: s.as, To: to, Content: content}
	ev.Meta.ReplyTo = in.ReplyTo
	files, err := s.attachFiles(ctx, in.Thread, in.Attachments)
	if err != nil {
		return nil, postedOut{}, err
	}
	if ev.Meta, err = agentbridge.WithAttachments(ev.Meta, files); err != nil {
		return nil, postedOut{}, err
	}
	e, err := s.c.Append(ctx, in.Thread, ev, "")
	if err != nil {
		return nil, postedOut{}, s.toolError(err)
	}
	text := fmt.Sprintf("Posted to %s as %s: event %s, seq %d.", in.Thread, s.as, e.ID, e.Seq)
	for _, f := range files {
		text += fmt.Sprintf("\nAttached %s (%s, %d bytes): %s.", f.Name, f.Type, f.Size, f.ID)
	}
	return textResult(text), postedOut{Thread: in.Thread, ID: e.ID, Seq: e.Seq, Attachments: files}, nil
}

func (s *Server) invite(ctx context.Context, _ *mcp.CallToolRequest, in inviteIn) (*mcp.CallToolResult, postedOut, error) {
	if err := checkThreadArg(in.Thread); err != nil {
		return nil, postedOut{}, err
	}
	if !agentbridge.ParticipantIDPattern.MatchString(in.Participant) {
		return nil, postedOut{}, invalidArg("participant", "%q is not a participant id: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit", in.Participant)
	}
	if strings.TrimSpace(in.Client) == "" {
		return nil, postedOut{}, invalidArg("client", "say which client runs the participant, such as 'claude' or 'codex'")
	}
	if strings.TrimSpace(in.Model) == "" {
		return nil, postedOut{}, invalidArg("model", "say which model the participant uses")
	}
	profile := agentbridge.Profile{Client: in.Client, Model: in.Model, Nickname: in.Nickname, Roles: in.Roles}
	content, err := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": in.Participant, "profile": profile}})
	if err != nil {
		return nil, postedOut{}, fmt.Errorf("encode invite: %w", err)
	}
	e, err := s.c.Append(ctx, in.Thread, agentbridge.EventInput{Type: agentbridge.TypeControl, From: s.as, Content: content}, "")
	if err != nil {
		return nil, postedOut{}, s.toolError(err)
	}
	return textResult(fmt.Sprintf("Invited %s (client %s, model %s) to %s: event %s, seq %d.", in.Participant, in.Client, in.Model, in.Thread, e.ID, e.Seq)),
		postedOut{Thread: in.Thread, ID: e.ID, Seq: e.Seq}, nil
}

func (s *Server) threadState(ctx context.Context, _ *mcp.CallToolRequest, in threadStateIn) (*mcp.CallToolResult, stateOut, error) {
	if err := checkThreadArg(in.Thread); err != nil {
		return nil, stateOut{}, err
	}
	st, seq, err := s.c.State(ctx, in.Thread, 0)
	if err != nil {
		return nil, stateOut{}, s.toolError(err)
	}
	st = st.Normalize()
	var b strings.Builder
	_ = agentbridge.WriteStateText(&b, in.Thread, seq, st)
	return textResult(b.String()), stateOut{Thread: in.Thread, Seq: seq, State: st}, nil
}

// textResult is a result whose unstructured content is the readable text;
// the SDK adds the structured content from the tool's output value.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimRight(text, "\n")}}}
}

// boundLimit applies a limit's default and checks its bounds.
func boundLimit(limit, def, most int) (int, error) {
	switch {
	case limit == 0:
		return def, nil
	case limit < 0 || limit > most:
		return 0, invalidArg("limit", "must be between 1 and %d, not %d", most, limit)
	}
	return limit, nil
}

// checkThreadArg refuses a thread argument that cannot name a thread, so
// the model hears what a thread id looks like rather than a 404.
func checkThreadArg(thread string) error {
	if thread == "" {
		return invalidArg("thread", "give the thread's id (list_threads shows them)")
	}
	if !agentbridge.ThreadIDPattern.MatchString(thread) {
		return invalidArg("thread", "%q is not a thread id (list_threads shows them)", thread)
	}
	return nil
}

// sentence returns an agentbridge error's message, or the error's text.
func sentence(err error) string {
	var e *agentbridge.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
