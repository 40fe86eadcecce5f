// Command fakeacp is the project's fake Agent Client Protocol agent, for the
// coordinator's tests of ACP agents (docs/acp.md). It speaks ACP on stdio
// and answers each prompt by the words in the message to answer:
//
//   - CRASH: sends a partial message chunk, writes to stderr, exits 3.
//   - HANG: never answers, not even session/cancel.
//   - SLOW: answers only when cancelled (stop reason cancelled).
//   - FIRSTSLOW: like SLOW the first time (a marker file next to
//     FAKE_ACP_LOG remembers it), then an ordinary reply.
//   - PERMISSION: asks permission for a tool call and replies with the
//     option it got ("permission: <id>" or "permission: cancelled").
//   - ELICIT: asks the client a form (elicitation/create) with a required
//     string field "branch" and an enum field "size" (s, m, l), and
//     replies with what came back: "elicitation: accept " and the content
//     as JSON, "elicitation: decline", "elicitation: cancel", or
//     "elicitation: not offered" when the client offers no forms.
//   - MAXTOKENS, REFUSAL: ends the turn with that stop reason.
//   - FS: reads notes.txt in its session folder and a file outside it
//     through the client's fs capability ("fs: A | B", "refused" for each
//     read the client refuses).
//   - TOOL: reports a tool call, its update, a plan and usage.
//   - QUOTA: replies "quota" with its tokens in _meta.quota.token_count
//     instead of usage, as Gemini CLI does.
//   - anything else: replies "fake-acp pid=P session=S turn=N MODE: TEXT", MODE
//     being fresh (the whole context), resumed (what is new) or bare (only
//     the message), plus "+roster" when the prompt lists who is invited.
//
// A scene actor's prompt (it holds "<speech>") gets a thought chunk and a
// <speech> reply. FAKE_ACP_LOG names a file that gets one line per call
// ("pid method session unix-nanos"); FAKE_ACP_NO_LOAD=1 offers no session/load and
// FAKE_ACP_REFUSE_LOAD=1 offers it but refuses every load;
// FAKE_ACP_INIT_DELAY (a Go duration) holds initialize back, a slow start.
// A load replays a history (a user message, an answer, a tool call) before
// its answer, or with FAKE_ACP_REPLAY=after after it, as Gemini CLI does.
// FAKE_ACP_MODELS=1 offers models in its session answers and takes
// session/set_model (logged with the model as the session).
// FAKE_ACP_IMAGES=1 declares promptCapabilities.image; each block of a
// prompt that is not text is logged as a call "prompt-block" whose session
// is "image:<mime type>:<bytes>" or "link:<mime type>:<uri>".
// FAKE_ACP_ENV names a file that each session/new and session/load
// replaces with what the agent was given: its environment (one KEY=VALUE a
// line), then a line "mcp NAME COMMAND ARGS…" and lines "mcp-env KEY=VALUE"
// for each MCP server of the session.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

type agent struct {
	conn  *acp.AgentSideConnection
	mu    sync.Mutex
	turns map[string]int
	next  int
	cost  float64
	cwd   string
	// forms is whether the client offers form elicitation.
	forms bool
	// replayed is closed when a replay after a load's answer has ended;
	// a prompt answers only after it, as a model call outlasts it.
	replayed chan struct{}
	// stale is set by a prompt that failed: the next one ends at once.
	stale bool
}

func (a *agent) log(method, session string) {
	path := os.Getenv("FAKE_ACP_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%d %s %s %d\n", os.Getpid(), method, session, time.Now().UnixNano())
}

func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) Initialize(_ context.Context, req acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.log("initialize", fmt.Sprintf("fs=%v", req.ClientCapabilities.Fs.ReadTextFile))
	if e := req.ClientCapabilities.Elicitation; e != nil && e.Form != nil {
		a.mu.Lock()
		a.forms = true
		a.mu.Unlock()
	}
	if d, err := time.ParseDuration(os.Getenv("FAKE_ACP_INIT_DELAY")); err == nil {
		time.Sleep(d)
	}
	return acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{LoadSession: os.Getenv("FAKE_ACP_NO_LOAD") != "1",
			PromptCapabilities: acp.PromptCapabilities{Image: os.Getenv("FAKE_ACP_IMAGES") == "1"}},
		AuthMethods: []acp.AuthMethod{}}, nil
}

func (a *agent) Cancel(_ context.Context, n acp.CancelNotification) error {
	a.log("cancel", string(n.SessionId))
	return nil
}

func (a *agent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, nil
}

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, nil
}

func (a *agent) NewSession(_ context.Context, req acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	a.mu.Lock()
	a.next++
	id := fmt.Sprintf("s-%d-%d", os.Getpid(), a.next)
	a.turns[id] = 0
	a.mu.Unlock()
	a.log("session/new", id)
	saveEnv(req.McpServers)
	a.mu.Lock()
	a.cwd = req.Cwd
	a.mu.Unlock()
	return acp.NewSessionResponse{SessionId: acp.SessionId(id), Models: a.models()}, nil
}

func (a *agent) LoadSession(ctx context.Context, req acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	a.log("session/load", string(req.SessionId))
	saveEnv(req.McpServers)
	if os.Getenv("FAKE_ACP_REFUSE_LOAD") == "1" {
		return acp.LoadSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": "unknown session"})
	}
	a.mu.Lock()
	a.turns[string(req.SessionId)] = 0
	a.cwd = req.Cwd
	a.mu.Unlock()
	// A load replays the history; the client must not take it for a reply.
	if os.Getenv("FAKE_ACP_REPLAY") == "after" {
		done := make(chan struct{})
		a.mu.Lock()
		a.replayed = done
		a.mu.Unlock()
		go func() {
			defer close(done)
			// After the answer has been written, in steps, as an agent
			// streaming its history does.
			time.Sleep(50 * time.Millisecond)
			a.replay(context.Background(), req.SessionId, 10*time.Millisecond)
		}()
	} else {
		a.replay(ctx, req.SessionId, 0)
	}
	return acp.LoadSessionResponse{Models: a.models()}, nil
}

// replay sends a session's history: a user message, the answer and its
// tool call, gap apart.
func (a *agent) replay(ctx context.Context, s acp.SessionId, gap time.Duration) {
	for _, u := range []acp.SessionUpdate{
		acp.UpdateUserMessageText("an earlier question"),
		acp.UpdateAgentThoughtText("(replayed thought)"),
		acp.UpdateAgentMessageText("(replayed history)"),
		acp.StartToolCall("replayed-1", "Replayed tool", acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusCompleted)),
	} {
		time.Sleep(gap)
		a.say(ctx, s, u)
	}
}

// models is the model state offered with FAKE_ACP_MODELS=1, else nil.
func (a *agent) models() *acp.SessionModelState {
	if os.Getenv("FAKE_ACP_MODELS") != "1" {
		return nil
	}
	return &acp.SessionModelState{CurrentModelId: "fake-default",
		AvailableModels: []acp.ModelInfo{{ModelId: "fake-default", Name: "Default"}, {ModelId: "fake-large", Name: "Large"}}}
}

// UnstableSetSessionModel takes session/set_model, logging the model.
func (a *agent) UnstableSetSessionModel(_ context.Context, req acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error) {
	a.log("session/set_model", string(req.ModelId))
	return acp.UnstableSetSessionModelResponse{}, nil
}

func (a *agent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, errors.New("not supported")
}

func (a *agent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, nil
}

func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}

// message is the text after the prompt's "## The message to answer" line.
func message(prompt string) string {
	_, after, ok := strings.Cut(prompt, "## The message to answer\n\n")
	if !ok {
		return prompt
	}
	line, _, _ := strings.Cut(after, "\n\n")
	return line
}

func (a *agent) say(ctx context.Context, s acp.SessionId, u acp.SessionUpdate) {
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s, Update: u})
}

func (a *agent) Prompt(ctx context.Context, req acp.PromptRequest) (acp.PromptResponse, error) {
	var prompt strings.Builder
	for _, b := range req.Prompt {
		if b.Text != nil {
			prompt.WriteString(b.Text.Text)
		}
	}
	text := prompt.String()
	msg := message(text)
	s := req.SessionId
	a.mu.Lock()
	a.turns[string(s)]++
	turn := a.turns[string(s)]
	replayed := a.replayed
	stale := a.stale
	a.stale = false
	a.mu.Unlock()
	if replayed != nil {
		<-replayed
	}
	a.log("session/prompt", string(s))
	a.logBlocks(req.Prompt)
	end := acp.PromptResponse{StopReason: acp.StopReasonEndTurn}
	if stale || strings.Contains(msg, "NOTHING") {
		// As claude-agent-acp 0.23 after a failed turn: end_turn at once,
		// no update, no tokens.
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn, Usage: &acp.Usage{}}, nil
	}
	switch {
	case strings.Contains(text, "<speech>"):
		a.say(ctx, s, acp.UpdateAgentThoughtText("a private thought"))
		a.say(ctx, s, acp.UpdateAgentMessageText("<speech>A line from the fake.</speech>"))
		return end, nil
	case strings.Contains(msg, "CRASH"):
		a.say(ctx, s, acp.UpdateAgentMessageText("partial"))
		fmt.Fprintln(os.Stderr, "fake-acp: crashing on purpose")
		os.Exit(3)
	case strings.Contains(msg, "HANG"):
		select {}
	case strings.Contains(msg, "FIRSTSLOW") && firstTime(os.Getenv("FAKE_ACP_LOG")+".slow"):
		// Slow the first time only (across processes): a restarted
		// coordinator's re-run gets an answer.
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case strings.Contains(msg, "SLOW") && !strings.Contains(msg, "FIRSTSLOW"):
		a.say(ctx, s, acp.StartToolCall("slow-1", "Waiting for a cancel", acp.WithStartKind(acp.ToolKindOther)))
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case strings.Contains(msg, "MAXTOKENS"):
		a.say(ctx, s, acp.UpdateAgentMessageText("cut"))
		return acp.PromptResponse{StopReason: acp.StopReasonMaxTokens}, nil
	case strings.Contains(msg, "REFUSAL"):
		return acp.PromptResponse{StopReason: acp.StopReasonRefusal}, nil
	case strings.Contains(msg, "PERMISSION"):
		return a.askPermission(ctx, s)
	case strings.Contains(msg, "ELICIT"):
		return a.elicit(ctx, s)
	case strings.Contains(msg, "FS"):
		return a.readFiles(ctx, s)
	case strings.Contains(msg, "TOOL"):
		return a.useTools(ctx, s)
	case strings.Contains(msg, "LIMITLOG") && firstTime(os.Getenv("FAKE_ACP_LOG")+".limit"):
		// OpenCode's log line for a usage limit it waits to retry, the
		// first time only; then nothing until a cancel.
		fmt.Fprintln(os.Stderr, `timestamp=2026-12-07T15:33:43.448Z level=ERROR run=789b7af2 message="stream error" providerID=fake modelID=fake-model small=false `+
			`error.error="AI_APICallError: Rate limit reached for fake-model in organization org-fake on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 2s. Visit https://platform.openai.com/account/rate-limits to learn more."`)
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case strings.Contains(msg, "RPCERROR"):
		// claude-agent-acp's answer when claude gives up on a 429; the
		// next prompt then ends at once with nothing (see below).
		a.mu.Lock()
		a.stale = true
		a.mu.Unlock()
		return acp.PromptResponse{}, acp.NewInternalError(map[string]any{"error": `API Error: 429 {"error":{"message":"This request would exceed the rate limit for your organization","type":"rate_limit_error"},"type":"error"}`})
	case strings.Contains(msg, "QUOTA"):
		a.say(ctx, s, acp.UpdateAgentMessageText("quota"))
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn, Meta: map[string]any{
			"quota": map[string]any{"token_count": map[string]any{"input_tokens": 70, "output_tokens": 9}}}}, nil
	}
	return a.echo(ctx, s, text, msg, turn)
}

// askPermission asks the client's permission for a tool call and says
// which option came back.
func (a *agent) askPermission(ctx context.Context, s acp.SessionId) (acp.PromptResponse, error) {
	a.say(ctx, s, acp.StartToolCall("perm-1", "mkdir demo", acp.WithStartKind(acp.ToolKindExecute), acp.WithStartStatus(acp.ToolCallStatusPending)))
	resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{SessionId: s,
		ToolCall: acp.ToolCallUpdate{ToolCallId: "perm-1", Title: acp.Ptr("mkdir demo"), Kind: acp.Ptr(acp.ToolKindExecute)},
		Options: []acp.PermissionOption{
			{OptionId: "allow_always", Name: "Always allow", Kind: acp.PermissionOptionKindAllowAlways},
			{OptionId: "allow", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
			{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
		}})
	if ctx.Err() != nil {
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	got := "cancelled"
	if err != nil {
		got = "error " + err.Error()
	} else if resp.Outcome.Selected != nil {
		got = string(resp.Outcome.Selected.OptionId)
	}
	a.say(ctx, s, acp.UpdateToolCall("perm-1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted)))
	a.say(ctx, s, acp.UpdateAgentMessageText("permission: "+got))
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// elicit asks the client a form and says what came back.
func (a *agent) elicit(ctx context.Context, s acp.SessionId) (acp.PromptResponse, error) {
	a.mu.Lock()
	forms := a.forms
	a.mu.Unlock()
	got := "not offered"
	if forms {
		title := "Deploy"
		resp, err := a.conn.UnstableCreateElicitation(ctx, acp.UnstableCreateElicitationRequest{Form: &acp.UnstableCreateElicitationForm{
			Message: "Which branch should I deploy, and how big?",
			RequestedSchema: acp.UnstableElicitationSchema{Title: &title, Required: []string{"branch"}, Properties: map[string]any{
				"branch": map[string]any{"type": "string", "title": "Branch", "description": "the git branch"},
				"size":   map[string]any{"type": "string", "title": "Size", "enum": []string{"s", "m", "l"}},
			}},
		}})
		switch {
		case ctx.Err() != nil:
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		case err != nil:
			got = "error " + err.Error()
		case resp.Accept != nil:
			b, _ := json.Marshal(resp.Accept.Content)
			got = "accept " + string(b)
		case resp.Decline != nil:
			got = "decline"
		case resp.Cancel != nil:
			got = "cancel"
		}
	}
	a.say(ctx, s, acp.UpdateAgentMessageText("elicitation: "+got))
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// readFiles reads a file in its folder and one outside it through the
// client's fs capability.
func (a *agent) readFiles(ctx context.Context, s acp.SessionId) (acp.PromptResponse, error) {
	var out []string
	for _, path := range []string{filepath.Join(a.cwd, "notes.txt"), "/etc/hostname"} {
		r, err := a.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: s, Path: path})
		if err != nil {
			out = append(out, "refused")
		} else {
			out = append(out, strings.TrimSpace(r.Content))
		}
	}
	a.say(ctx, s, acp.UpdateAgentMessageText("fs: "+strings.Join(out, " | ")))
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// useTools reports a tool call, a plan, its running cost and its usage.
func (a *agent) useTools(ctx context.Context, s acp.SessionId) (acp.PromptResponse, error) {
	a.say(ctx, s, acp.StartToolCall("t-1", "Read notes.txt", acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusInProgress)))
	a.say(ctx, s, acp.UpdateToolCall("t-1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted)))
	a.say(ctx, s, acp.UpdatePlan(acp.PlanEntry{Content: "Write the answer", Status: acp.PlanEntryStatusInProgress, Priority: acp.PlanEntryPriorityHigh}))
	a.mu.Lock()
	a.cost += 0.25
	cost := a.cost
	a.mu.Unlock()
	a.say(ctx, s, acp.SessionUpdate{UsageUpdate: &acp.SessionUsageUpdate{Cost: &acp.Cost{Amount: cost, Currency: "USD"}, Size: 1000, Used: 10}})
	a.say(ctx, s, acp.UpdateAgentMessageText("tools done"))
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn, Usage: &acp.Usage{InputTokens: 100, OutputTokens: 20, TotalTokens: 120}}, nil
}

// echo answers with what it knows of the session and the prompt's
// message, naming which sections the prompt had.
func (a *agent) echo(ctx context.Context, s acp.SessionId, text, msg string, turn int) (acp.PromptResponse, error) {
	mode := "bare" // only the trigger
	switch {
	case strings.Contains(text, "## Conversation so far"):
		mode = "fresh"
	case strings.Contains(text, "## New in thread"):
		mode = "resumed"
	}
	if strings.Contains(text, "## Who is in this thread") {
		mode += "+roster"
	}
	a.say(ctx, s, acp.UpdateAgentMessageText(fmt.Sprintf("fake-acp pid=%d session=%s turn=%d %s: ", os.Getpid(), s, turn, mode)))
	a.say(ctx, s, acp.UpdateAgentMessageText(msg))
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// saveEnv writes what the agent was given to $FAKE_ACP_ENV, when set.
func saveEnv(servers []acp.McpServer) {
	path := os.Getenv("FAKE_ACP_ENV")
	if path == "" {
		return
	}
	lines := os.Environ()
	for _, m := range servers {
		if m.Stdio == nil {
			continue
		}
		lines = append(lines, "mcp "+m.Stdio.Name+" "+m.Stdio.Command+" "+strings.Join(m.Stdio.Args, " "))
		for _, e := range m.Stdio.Env {
			lines = append(lines, "mcp-env "+e.Name+"="+e.Value)
		}
	}
	// Write then rename, so a test that sees the file sees all of it.
	if err := os.WriteFile(path+".tmp", []byte(strings.Join(lines, "\n")+"\n"), 0o600); err == nil {
		_ = os.Rename(path+".tmp", path)
	}
}

// firstTime reports whether marker did not exist yet, creating it.
func firstTime(marker string) bool {
	f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

func main() {
	a := &agent{turns: map[string]int{}}
	a.conn = acp.NewAgentSideConnection(a, os.Stdout, os.Stdin)
	<-a.conn.Done()
}

// logBlocks logs each block of a prompt that is not text (see the
// package doc).
func (a *agent) logBlocks(blocks []acp.ContentBlock) {
	for _, b := range blocks {
		switch {
		case b.Image != nil:
			data, _ := base64.StdEncoding.DecodeString(b.Image.Data)
			a.log("prompt-block", fmt.Sprintf("image:%s:%d", strings.ReplaceAll(b.Image.MimeType, " ", ""), len(data)))
		case b.ResourceLink != nil:
			mime := ""
			if b.ResourceLink.MimeType != nil {
				mime = *b.ResourceLink.MimeType
			}
			a.log("prompt-block", fmt.Sprintf("link:%s:%s", strings.ReplaceAll(mime, " ", ""), b.ResourceLink.Uri))
		}
	}
}
