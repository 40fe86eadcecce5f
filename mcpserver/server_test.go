package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testbridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
	"github.com/agent-bridge/agent-bridge/mcpserver"
)

const token = "s3cret"

// env is a real bridge on 127.0.0.1 over a temp SQLite file, a client of
// it acting as the other side of the conversation, and an MCP client
// session connected in-process to a server acting as participant "claude".
type env struct {
	t      testing.TB
	url    string
	bridge *client.Client
	cs     *mcp.ClientSession
}

func newEnv(t testing.TB) *env {
	t.Helper()
	url := testbridge.Start(t, token)
	e := &env{t: t, url: url, bridge: client.New(url, client.WithToken(token))}
	e.cs = e.connect("claude")
	return e
}

// connect starts an MCP server acting as participant as and returns an
// SDK client session speaking to it over in-memory transports.
func (e *env) connect(as string) *mcp.ClientSession {
	e.t.Helper()
	s, err := mcpserver.New(mcpserver.Options{
		Client: client.New(e.url, client.WithToken(token)),
		As:     as,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return serve(e.t, s)
}

// serve runs s with Run, as the CLI does, on an in-memory transport, and
// returns an SDK client session speaking to it; the test's cleanup hangs
// up and waits for Run to return.
func serve(t testing.TB, s *mcpserver.Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background(), st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return cs
}

// call calls a tool that must succeed and decodes its structured content
// into out (when non-nil); it returns the text content.
func (e *env) call(name string, args map[string]any, out any) string {
	e.t.Helper()
	res, err := e.cs.CallTool(e.t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	text := resultText(res)
	if res.IsError {
		e.t.Fatalf("%s: tool error: %s", name, text)
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return text
}

// callErr calls a tool that must fail with a tool error and returns the
// error's text.
func (e *env) callErr(name string, args map[string]any) string {
	e.t.Helper()
	res, err := e.cs.CallTool(e.t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		e.t.Fatalf("%s: protocol error %v, want a tool error", name, err)
	}
	if !res.IsError {
		e.t.Fatalf("%s(%v) succeeded with %q, want a tool error", name, args, resultText(res))
	}
	return resultText(res)
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// message posts a message as from through the bridge client, the way
// another agent or a person would.
func (e *env) message(thread, from, text, replyTo string) agentbridge.Event {
	e.t.Helper()
	content, _ := json.Marshal(text)
	in := agentbridge.EventInput{From: from, Content: content}
	in.Meta.ReplyTo = replyTo
	ev, err := e.bridge.Append(e.t.Context(), thread, in, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

// threadStreams reads the bridge's count of open thread streams from its
// metrics, which is how a test sees wait_for_reply's stream open and close.
func (e *env) threadStreams() int {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.t.Context(), http.MethodGet, e.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `agent_bridge_stream_subscribers{kind="thread"} `); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				e.t.Fatal(err)
			}
			return int(n)
		}
	}
	return 0
}

type thread struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	EventCount int64  `json:"event_count"`
}

type posted struct {
	Thread string `json:"thread"`
	ID     string `json:"id"`
	Seq    int64  `json:"seq"`
}

type event struct {
	ID      string `json:"id"`
	Seq     int64  `json:"seq"`
	Type    string `json:"type"`
	From    string `json:"from"`
	To      string `json:"to"`
	Text    string `json:"text"`
	ReplyTo string `json:"reply_to"`
}

type waitResult struct {
	Status string `json:"status"`
	Reply  *event `json:"reply"`
}

func TestToolsAreListedWithSchemas(t *testing.T) {
	e := newEnv(t)
	want := map[string][]string{
		"list_threads":   nil,
		"create_thread":  {"name"},
		"read_thread":    {"thread"},
		"post":           {"thread", "content"},
		"invite":         {"thread", "participant", "client", "model"},
		"thread_state":   {"thread"},
		"wait_for_reply": {"thread", "event_id"},
		"search":         {"query"},
	}
	got := map[string]bool{}
	for tool, err := range e.cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		got[tool.Name] = true
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Type       string                     `json:"type"`
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatal(err)
		}
		slices.Sort(schema.Required)
		w := slices.Clone(want[tool.Name])
		slices.Sort(w)
		if schema.Type != "object" || !slices.Equal(schema.Required, w) {
			t.Errorf("%s: input schema %s, want an object requiring %v", tool.Name, b, w)
		}
		for name, p := range schema.Properties {
			if !strings.Contains(string(p), `"description"`) {
				t.Errorf("%s: argument %s has no description", tool.Name, name)
			}
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s has no output schema", tool.Name)
		}
	}
	for name := range want {
		if !got[name] {
			t.Errorf("tool %s is missing", name)
		}
	}
}

func TestConversation(t *testing.T) {
	e := newEnv(t)

	var th thread
	text := e.call("create_thread", map[string]any{"name": "API design", "id": "design"}, &th)
	if th.ID != "design" || th.Name != "API design" || !strings.Contains(text, "design") {
		t.Fatalf("create_thread = %+v, %q", th, text)
	}
	created, err := e.bridge.ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: "design", After: 0})
	if err != nil || len(created) != 1 || created[0].From != "claude" {
		t.Fatalf("thread.created = %+v, %v; want one event from claude", created, err)
	}

	var list struct {
		Threads []thread `json:"threads"`
	}
	text = e.call("list_threads", nil, &list)
	if len(list.Threads) != 1 || list.Threads[0].ID != "design" || !strings.Contains(text, "API design") {
		t.Fatalf("list_threads = %+v, %q", list, text)
	}

	var inv posted
	e.call("invite", map[string]any{"thread": "design", "participant": "codex", "client": "codex", "model": "gpt-5", "roles": []string{"reviewer"}}, &inv)
	var state struct {
		Seq   int64                   `json:"seq"`
		State agentbridge.ThreadState `json:"state"`
	}
	text = e.call("thread_state", map[string]any{"thread": "design"}, &state)
	got, ok := state.State.Invited("codex")
	if !ok || got.Profile.Model != "gpt-5" || got.InvitedBy != "claude" || state.Seq != inv.Seq {
		t.Fatalf("thread_state = %+v; want codex invited by claude at seq %d", state, inv.Seq)
	}
	// The same text as agent-bridge state, party line included.
	for _, want := range []string{"codex  client=codex  model=gpt-5  roles=reviewer  (invited by claude)", "party:        off"} {
		if !strings.Contains(text, want) {
			t.Errorf("thread_state text lacks %q:\n%s", want, text)
		}
	}

	var p posted
	text = e.call("post", map[string]any{"thread": "design", "content": "Should ids be ULIDs?\nOr UUIDs?", "to": "codex"}, &p)
	if p.ID == "" || p.Seq != inv.Seq+1 || !strings.Contains(text, p.ID) {
		t.Fatalf("post = %+v, %q", p, text)
	}
	answer := e.message("design", "codex", "ULIDs: they sort by time.", p.ID)

	var page struct {
		Events    []event `json:"events"`
		NextAfter int64   `json:"next_after"`
	}
	text = e.call("read_thread", map[string]any{"thread": "design"}, &page)
	if len(page.Events) != 4 || page.NextAfter != answer.Seq {
		t.Fatalf("read_thread = %+v", page)
	}
	mine, theirs := page.Events[2], page.Events[3]
	if mine.From != "claude" || mine.To != "codex" || mine.Text != "Should ids be ULIDs?\nOr UUIDs?" {
		t.Errorf("posted event = %+v", mine)
	}
	if theirs.From != "codex" || theirs.ReplyTo != p.ID {
		t.Errorf("answer = %+v", theirs)
	}
	for _, want := range []string{
		"#3 id=" + p.ID,
		"claude -> codex:\n  Should ids be ULIDs?\n  Or UUIDs?",
		"codex -> all reply_to=" + p.ID + ":\n  ULIDs: they sort by time.",
		"[control]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("read_thread text lacks %q:\n%s", want, text)
		}
	}

	// after pages forward; limit caps the page.
	e.call("read_thread", map[string]any{"thread": "design", "after": 1, "limit": 2}, &page)
	if len(page.Events) != 2 || page.Events[0].Seq != 2 || page.NextAfter != 3 {
		t.Fatalf("read_thread after=1 limit=2 = %+v", page)
	}
	text = e.call("read_thread", map[string]any{"thread": "design", "after": answer.Seq}, &page)
	if len(page.Events) != 0 || page.NextAfter != answer.Seq || !strings.Contains(text, "No events after") {
		t.Fatalf("read_thread at the end = %+v, %q", page, text)
	}
}

func TestBadArguments(t *testing.T) {
	e := newEnv(t)
	var th thread
	e.call("create_thread", map[string]any{"name": "t", "id": "t1"}, &th)
	var p posted
	e.call("post", map[string]any{"thread": "t1", "content": "hello"}, &p)

	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		// The bridge's refusals carry its code and sentence.
		{"post", map[string]any{"thread": "nope", "content": "hi"}, "the bridge refused (thread_not_found)"},
		{"read_thread", map[string]any{"thread": "nope"}, "thread_not_found"},
		{"thread_state", map[string]any{"thread": "nope"}, "thread_not_found"},
		{"wait_for_reply", map[string]any{"thread": "nope", "event_id": p.ID}, "thread_not_found"},
		{"post", map[string]any{"thread": "t1", "content": "hi", "reply_to": "no-such-event"}, "unknown_reply_to"},
		{"create_thread", map[string]any{"name": "again", "id": "t1"}, "thread_exists"},
		// Arguments checked before the bridge is asked.
		{"post", map[string]any{"thread": "t1", "content": "   "}, "invalid content: the message is empty"},
		{"post", map[string]any{"thread": "t1", "content": "hi", "to": "not an id!"}, `invalid to: "not an id!" is not a participant id`},
		{"post", map[string]any{"thread": "", "content": "hi"}, "invalid thread"},
		{"post", map[string]any{"thread": "../x", "content": "hi"}, `invalid thread: "../x" is not a thread id`},
		{"post", map[string]any{"thread": "t1"}, "content"},
		{"wait_for_reply", map[string]any{"thread": "t1", "event_id": p.ID, "timeout_s": 601}, "invalid timeout_s: 601 seconds is over the maximum of 600"},
		{"wait_for_reply", map[string]any{"thread": "t1", "event_id": p.ID, "timeout_s": -1}, "invalid timeout_s"},
		{"wait_for_reply", map[string]any{"thread": "t1", "event_id": "no-such-event"}, "event_not_found"},
		{"read_thread", map[string]any{"thread": "t1", "limit": 501}, "invalid limit: must be between 1 and 500"},
		{"read_thread", map[string]any{"thread": "t1", "after": -2}, "invalid after"},
		{"list_threads", map[string]any{"limit": -1}, "invalid limit"},
		// The SDK's own argument checks name the argument, never a Go
		// field or type (mcpserver.listThreadsIn.limit).
		{"list_threads", map[string]any{"limit": 1e30}, "invalid limit: 1e+30 is not a whole number"},
		{"read_thread", map[string]any{"thread": "t1", "after": 1e30}, "invalid after: 1e+30 is not a whole number"},
		{"list_threads", map[string]any{"limit": "ten"}, "invalid limit: it must be a whole number, not ten"},
		{"list_threads", map[string]any{"bogus": 1}, `unknown argument "bogus"`},
		{"post", map[string]any{"thread": 5, "content": "x"}, "invalid thread: it must be text"},
		{"create_thread", map[string]any{"name": " "}, "invalid name"},
		{"create_thread", map[string]any{"name": "x", "id": "no spaces"}, "invalid id"},
		{"invite", map[string]any{"thread": "t1", "participant": "bad id", "client": "codex", "model": "m"}, "invalid participant"},
		{"invite", map[string]any{"thread": "t1", "participant": "codex", "client": "", "model": "m"}, "invalid client"},
		{"invite", map[string]any{"thread": "t1", "participant": "codex", "client": "codex", "model": ""}, "invalid model"},
	} {
		got := e.callErr(c.tool, c.args)
		if strings.Contains(got, "mcpserver.") || strings.Contains(got, "Go struct") || strings.Contains(got, "/properties/") {
			t.Errorf("%s(%v) = %q names Go or schema internals", c.tool, c.args, got)
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s(%v) = %q, want it to contain %q", c.tool, c.args, got, c.want)
		}
	}

	// The bridge's own sentence comes through whole.
	_, err := e.bridge.Append(t.Context(), "nope", agentbridge.EventInput{From: "x", Content: json.RawMessage(`"hi"`)}, "")
	var be *agentbridge.Error
	if !errors.As(err, &be) {
		t.Fatalf("append to a missing thread: %v", err)
	}
	if got := e.callErr("post", map[string]any{"thread": "nope", "content": "hi"}); !strings.Contains(got, be.Message) {
		t.Errorf("post to a missing thread = %q, want the bridge's sentence %q", got, be.Message)
	}

	// Nothing was stored by the refused calls.
	events, err := e.bridge.ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: "t1", After: 0})
	if err != nil || len(events) != 2 {
		t.Fatalf("t1 has %d events (%v), want 2", len(events), err)
	}
}

func TestWaitForReply(t *testing.T) {
	e := newEnv(t)
	e.call("create_thread", map[string]any{"name": "w", "id": "w"}, nil)
	var p posted
	e.call("post", map[string]any{"thread": "w", "content": "ping?", "to": "codex"}, &p)

	type outcome struct {
		res waitResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := e.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "wait_for_reply", Arguments: map[string]any{"thread": "w", "event_id": p.ID, "timeout_s": 60}})
		var o outcome
		o.err = err
		if err == nil {
			if res.IsError {
				o.err = errors.New(resultText(res))
			} else {
				b, _ := json.Marshal(res.StructuredContent)
				o.err = json.Unmarshal(b, &o.res)
			}
		}
		done <- o
	}()
	testutil.WaitFor(t, 10*time.Second, "wait_for_reply's stream to open", func() bool { return e.threadStreams() == 1 })

	// None of these is the awaited reply: the waiter's own reply, a
	// message replying to nothing, a reply to another event.
	e.message("w", "claude", "talking to myself", p.ID)
	other := e.message("w", "codex", "unrelated", "")
	e.message("w", "user", "answering something else", other.ID)
	reply := e.message("w", "codex", "pong", p.ID)

	select {
	case o := <-done:
		if o.err != nil {
			t.Fatal(o.err)
		}
		if o.res.Status != "replied" || o.res.Reply == nil || o.res.Reply.ID != reply.ID || o.res.Reply.Text != "pong" || o.res.Reply.From != "codex" {
			t.Fatalf("wait_for_reply = %+v, want codex's pong %s", o.res, reply.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("wait_for_reply did not return after the reply")
	}
	testutil.WaitFor(t, 10*time.Second, "the stream to close", func() bool { return e.threadStreams() == 0 })

	// A reply already posted before the call is found at once.
	var res waitResult
	text := e.call("wait_for_reply", map[string]any{"thread": "w", "event_id": p.ID}, &res)
	if res.Status != "replied" || res.Reply.ID != reply.ID || !strings.Contains(text, "codex replied:") || !strings.Contains(text, "pong") {
		t.Fatalf("wait_for_reply on an answered event = %+v, %q", res, text)
	}
}

func TestWaitForReplyTimesOut(t *testing.T) {
	e := newEnv(t)
	e.call("create_thread", map[string]any{"name": "w", "id": "w"}, nil)
	var p posted
	e.call("post", map[string]any{"thread": "w", "content": "anyone?"}, &p)
	var res waitResult
	text := e.call("wait_for_reply", map[string]any{"thread": "w", "event_id": p.ID, "timeout_s": 1}, &res)
	if res.Status != "timeout" || res.Reply != nil || !strings.Contains(text, "No reply to "+p.ID) {
		t.Fatalf("wait_for_reply = %+v, %q; want a timeout result", res, text)
	}
	testutil.WaitFor(t, 10*time.Second, "the stream to close", func() bool { return e.threadStreams() == 0 })
}

func TestWaitForReplyCancelled(t *testing.T) {
	// Registered first, so it runs after the session and the bridge have
	// closed: a wait that ignored cancellation would leave its stream
	// goroutines behind.
	t.Cleanup(testutil.CheckGoroutines(t))
	e := newEnv(t)
	e.call("create_thread", map[string]any{"name": "w", "id": "w"}, nil)
	var p posted
	e.call("post", map[string]any{"thread": "w", "content": "anyone?"}, &p)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := e.cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_for_reply", Arguments: map[string]any{"thread": "w", "event_id": p.ID, "timeout_s": 600}})
		done <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "wait_for_reply's stream to open", func() bool { return e.threadStreams() == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	// The server heard the cancellation and let go of its stream long
	// before its 600 s timeout.
	testutil.WaitFor(t, 10*time.Second, "the server to close its stream", func() bool { return e.threadStreams() == 0 })

	// The session still works.
	var res waitResult
	e.message("w", "codex", "here", p.ID)
	e.call("wait_for_reply", map[string]any{"thread": "w", "event_id": p.ID}, &res)
	if res.Status != "replied" {
		t.Fatalf("wait after a cancelled wait = %+v", res)
	}
}

func TestThreadResources(t *testing.T) {
	e := newEnv(t)
	e.call("create_thread", map[string]any{"name": "First", "id": "first"}, nil)
	e.call("create_thread", map[string]any{"name": "Second", "id": "second"}, nil)
	var p posted
	e.call("post", map[string]any{"thread": "first", "content": "hello there"}, &p)

	var templates []string
	for rt, err := range e.cs.ResourceTemplates(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		templates = append(templates, rt.URITemplate)
	}
	if !slices.Equal(templates, []string{"bridge://threads/{id}"}) {
		t.Fatalf("templates = %v", templates)
	}
	var uris []string
	for r, err := range e.cs.Resources(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	slices.Sort(uris)
	if !slices.Equal(uris, []string{"bridge://threads/first", "bridge://threads/second"}) {
		t.Fatalf("resources = %v", uris)
	}

	res, err := e.cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "bridge://threads/first"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("contents = %+v", res.Contents)
	}
	text := res.Contents[0].Text
	for _, want := range []string{`Thread first "First": 2 events`, "[thread.created]", "#2 id=" + p.ID, "claude -> all:\n  hello there"} {
		if !strings.Contains(text, want) {
			t.Errorf("resource lacks %q:\n%s", want, text)
		}
	}

	for _, uri := range []string{"bridge://threads/missing", "bridge://threads/bad%20id"} {
		if _, err := e.cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("reading %s succeeded", uri)
		}
	}
}

func TestNewRefusesABadParticipant(t *testing.T) {
	c := client.New("http://127.0.0.1:1")
	for _, as := range []string{"", "has space", strings.Repeat("x", 200)} {
		if _, err := mcpserver.New(mcpserver.Options{Client: c, As: as}); err == nil {
			t.Errorf("New(As: %q) succeeded", as)
		}
	}
	if _, err := mcpserver.New(mcpserver.Options{As: "claude"}); err == nil {
		t.Error("New without a client succeeded")
	}
}

func TestUnreachableBridge(t *testing.T) {
	s, err := mcpserver.New(mcpserver.Options{Client: client.New("http://127.0.0.1:1"), As: "claude",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cs := serve(t, s)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_threads"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(res); !res.IsError || !strings.Contains(got, "cannot reach the bridge at http://127.0.0.1:1") {
		t.Fatalf("list_threads against no bridge = %q (error %v)", got, res.IsError)
	}
}
