package acp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// turn collects one session/prompt's updates: the reply from message
// chunks, the thinking from thought chunks, progress records from tool
// calls and plans, and the running cost.
type turn struct {
	pool     *Pool
	run      Run
	progress func(adapters.ProgressRecord)
	// stopped is closed when the turn is being cancelled: a permission
	// request still waiting is answered cancelled.
	stopped  chan struct{}
	stopOnce sync.Once
	// started is when the turn began: the invocation's started_at.
	started time.Time

	// open is set (under the agent's mu) as the prompt is written: only
	// updates handled from then on are the turn's.
	open bool
	// clock is the turn's adapter timeout, stopped while a permission
	// request waits for a person.
	clock *turnClock

	mu      sync.Mutex
	reply   strings.Builder
	thought strings.Builder
	tools   map[sdk.ToolCallId]toolInfo
	// costStart is the running total when the turn began; costLast the
	// latest one reported during it.
	costStart, costLast float64
	hasCost             bool
	// refused counts the permission requests answered with a refusal.
	refused int
	// updates counts the session/updates handled; failed is set once the
	// agent's stderr said the turn failed (watchStderr).
	updates int
	failed  bool
	// questions counts the turn's questions with fields, for their keys.
	questions int
	// asks counts the requests to a person (permission, question) still
	// being handled, which post a closing notice when the turn stops; once
	// settled is set, no new one begins.
	asks    sync.WaitGroup
	settled bool
}

type toolInfo struct{ title, kind string }

// beginTurn attaches a new turn to a; endTurn detaches it. Updates that
// arrive between turns, or before the turn's prompt is written (a
// session/load replaying history), are dropped.
func (a *agent) beginTurn(cfg *config.Config, run Run, progress func(adapters.ProgressRecord)) *turn {
	t := &turn{pool: a.pool, run: run, progress: progress, stopped: make(chan struct{}),
		tools: make(map[sdk.ToolCallId]toolInfo), costStart: a.costSeen, clock: newTurnClock(cfg.AdapterTimeout)}
	a.mu.Lock()
	a.turn = t
	a.mu.Unlock()
	return t
}

func (a *agent) endTurn() {
	a.mu.Lock()
	t := a.turn
	a.turn = nil
	a.mu.Unlock()
	if t != nil {
		t.mu.Lock()
		if t.hasCost {
			a.costSeen = t.costLast
		}
		t.mu.Unlock()
	}
}

// openTurn marks the attached turn as collecting: its prompt is about to
// be written.
func (a *agent) openTurn() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.turn != nil {
		a.turn.open = true
	}
}

// collecting is the running turn of session once its prompt is being
// written, or nil.
func (a *agent) collecting(session sdk.SessionId) *turn {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.turn == nil || !a.turn.open || string(session) != a.session {
		return nil
	}
	return a.turn
}

// current is the running turn of session, or nil.
func (a *agent) current(session sdk.SessionId) *turn {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.turn == nil || string(session) != a.session {
		return nil
	}
	return a.turn
}

// stop marks the turn as being cancelled.
func (t *turn) stop() { t.stopOnce.Do(func() { close(t.stopped) }) }

// beginAsk registers a request to a person; false once the turn has
// settled, when the request is answered cancelled at once.
func (t *turn) beginAsk() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.settled {
		return false
	}
	t.asks.Add(1)
	return true
}

// settle waits, at most d, for the requests to a person to finish: a
// stopped turn's requests post their withdrawal notices, and they must do
// so while the run still holds its claim, or the bridge refuses them. The
// agent may answer session/cancel before it has our answers to them.
func (t *turn) settle(d time.Duration) {
	t.mu.Lock()
	t.settled = true
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t.asks.Wait()
		close(done)
	}()
	wait := time.NewTimer(d)
	defer wait.Stop()
	select {
	case <-done:
	case <-wait.C:
	}
}

// result is the turn's reply and thinking text.
func (t *turn) result() (reply, thought string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reply.String(), t.thought.String()
}

// noteAnswer counts a refusal among the turn's permission answers.
func (t *turn) noteAnswer(r sdk.RequestPermissionResponse, opts []PermissionOption) sdk.RequestPermissionResponse {
	refused := r.Outcome.Cancelled != nil
	if s := r.Outcome.Selected; s != nil {
		for _, o := range opts {
			if o.ID == string(s.OptionId) && strings.HasPrefix(o.Kind, "reject") {
				refused = true
			}
		}
	}
	if refused {
		t.mu.Lock()
		t.refused++
		t.mu.Unlock()
	}
	return r
}

// nextQuestion numbers the turn's next question with fields.
func (t *turn) nextQuestion() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.questions++
	return t.questions
}

// refusals is how many permission requests of the turn were refused.
func (t *turn) refusals() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused
}

// costDelta is the cost of this turn from the running totals.
func (t *turn) costDelta() (float64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.hasCost {
		return 0, false
	}
	return max(t.costLast-t.costStart, 0), true
}

// update handles one session/update of the turn.
func (t *turn) update(u sdk.SessionUpdate) {
	t.mu.Lock()
	t.updates++
	t.mu.Unlock()
	switch {
	case u.AgentMessageChunk != nil:
		if !t.warning(u.AgentMessageChunk.Content) {
			t.appendText(&t.reply, u.AgentMessageChunk.Content)
		}
	case u.AgentThoughtChunk != nil:
		t.appendText(&t.thought, u.AgentThoughtChunk.Content)
	case u.ToolCall != nil:
		tc := u.ToolCall
		t.mu.Lock()
		t.tools[tc.ToolCallId] = toolInfo{title: tc.Title, kind: string(tc.Kind)}
		t.mu.Unlock()
		t.progress(adapters.ProgressRecord{Status: oneLineStatus(tc.Title), Kind: string(tc.Kind),
			Detail: jsonOf(map[string]any{"tool_call_id": tc.ToolCallId, "status": tc.Status, "update": "tool_call"})})
	case u.ToolCallUpdate != nil:
		tc := u.ToolCallUpdate
		t.mu.Lock()
		info := t.tools[tc.ToolCallId]
		if tc.Title != nil {
			info.title = *tc.Title
		}
		if tc.Kind != nil {
			info.kind = string(*tc.Kind)
		}
		t.tools[tc.ToolCallId] = info
		t.mu.Unlock()
		detail := map[string]any{"tool_call_id": tc.ToolCallId, "update": "tool_call_update"}
		if tc.Status != nil {
			detail["status"] = *tc.Status
		}
		t.progress(adapters.ProgressRecord{Status: oneLineStatus(info.title), Kind: info.kind, Detail: jsonOf(detail)})
	case u.Plan != nil:
		status := fmt.Sprintf("plan: %d steps", len(u.Plan.Entries))
		for _, e := range u.Plan.Entries {
			if e.Status == sdk.PlanEntryStatusInProgress {
				status = e.Content
				break
			}
		}
		t.progress(adapters.ProgressRecord{Status: oneLineStatus(status), Kind: "plan", Detail: jsonOf(u.Plan.Entries)})
	case u.UsageUpdate != nil && u.UsageUpdate.Cost != nil:
		t.mu.Lock()
		t.costLast, t.hasCost = u.UsageUpdate.Cost.Amount, true
		t.mu.Unlock()
	}
}

// appendText adds a text chunk to b, up to maxReply bytes.
func (t *turn) appendText(b *strings.Builder, c sdk.ContentBlock) {
	if c.Text == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := maxReply - b.Len(); room > 0 {
		s := c.Text.Text
		if len(s) > room {
			s = s[:room]
		}
		b.WriteString(s)
	}
}

// oneLineStatus is s on one line, bounded, for a progress status.
func oneLineStatus(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return agentbridge.Clip(s, maxStatusChars)
}

// agentClient is the client side of one agent's connection: what the agent
// may ask of the coordinator.
type agentClient struct{ a *agent }

var _ sdk.Client = (*agentClient)(nil)

// SessionUpdate feeds the running turn. It must not block: the SDK
// handles notifications one at a time.
func (cl *agentClient) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	cl.a.lastUpdate.Store(time.Now().UnixNano())
	if t := cl.a.collecting(n.SessionId); t != nil {
		t.update(n.Update)
	}
	return nil
}

// RequestPermission answers per the entry's "permissions": allow picks
// allow_once, deny refuses, ask asks the human who started the chain
// (permission.go).
func (cl *agentClient) RequestPermission(ctx context.Context, req sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	t := cl.a.current(req.SessionId)
	if t == nil || !t.beginAsk() {
		return permissionCancelled(), nil
	}
	defer t.asks.Done()
	return t.pool.askPermission(ctx, t, req), nil
}

// ReadTextFile serves fs/read_text_file inside the session folder (only
// offered with "acp_fs": true).
func (cl *agentClient) ReadTextFile(_ context.Context, req sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	path, err := cl.inside(req.Path)
	if err != nil {
		return sdk.ReadTextFileResponse{}, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return sdk.ReadTextFileResponse{}, sdk.NewInternalError(map[string]any{"error": err.Error()})
	}
	text := string(b)
	if req.Line != nil || req.Limit != nil {
		lines := strings.SplitAfter(text, "\n")
		from := 0
		if req.Line != nil && *req.Line > 1 {
			from = min(*req.Line-1, len(lines))
		}
		to := len(lines)
		if req.Limit != nil && *req.Limit >= 0 {
			to = min(from+*req.Limit, len(lines))
		}
		text = strings.Join(lines[from:to], "")
	}
	return sdk.ReadTextFileResponse{Content: text}, nil
}

// WriteTextFile serves fs/write_text_file inside the session folder.
func (cl *agentClient) WriteTextFile(_ context.Context, req sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	path, err := cl.inside(req.Path)
	if err != nil {
		return sdk.WriteTextFileResponse{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return sdk.WriteTextFileResponse{}, sdk.NewInternalError(map[string]any{"error": err.Error()})
	}
	if err := os.WriteFile(path, []byte(req.Content), 0o644); err != nil {
		return sdk.WriteTextFileResponse{}, sdk.NewInternalError(map[string]any{"error": err.Error()})
	}
	return sdk.WriteTextFileResponse{}, nil
}

// errOutside refuses a file request outside the session folder.
var errOutside = errors.New("outside the session folder")

// inside checks that path (absolute, as ACP requires) lies in the session
// folder, symbolic links resolved, and that fs was offered at all.
func (cl *agentClient) inside(path string) (string, error) {
	a := cl.a
	if !a.cfg.ACPFS {
		return "", sdk.NewMethodNotFound("fs")
	}
	if !filepath.IsAbs(path) {
		return "", sdk.NewInvalidParams(map[string]any{"error": "the path must be absolute", "path": path})
	}
	root, err := filepath.EvalSymlinks(a.cwd)
	if err != nil {
		root = a.cwd
	}
	clean := filepath.Clean(path)
	// Resolve the longest existing prefix, so a link inside the folder
	// cannot point out of it.
	resolved := clean
	for dir, rest := clean, ""; ; {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			resolved = filepath.Join(r, rest)
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
	if rel, err := filepath.Rel(root, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", sdk.NewInvalidParams(map[string]any{"error": errOutside.Error(), "path": path})
	}
	return resolved, nil
}

// The terminal capability is never offered; these answer an agent that
// asks all the same.

// CreateTerminal refuses: no terminal capability.
func (cl *agentClient) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalCreate)
}

// KillTerminal refuses: no terminal capability.
func (cl *agentClient) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalKill)
}

// TerminalOutput refuses: no terminal capability.
func (cl *agentClient) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalOutput)
}

// ReleaseTerminal refuses: no terminal capability.
func (cl *agentClient) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalRelease)
}

// WaitForTerminalExit refuses: no terminal capability.
func (cl *agentClient) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalWaitForExit)
}
