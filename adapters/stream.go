package adapters

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// The agent CLIs' machine-readable modes print one JSON event per line.
// ConvertStream turns such a stream into the adapter's reply and progress
// records (contract 5.3). The formats, and where they are documented, are in
// docs/adapter-protocol.md and adapters/testdata/cli/README.md.

// Stream formats ConvertStream reads.
const (
	// StreamClaude is "claude -p --output-format stream-json --verbose".
	StreamClaude = "claude"
	// StreamCodex is "codex exec --json".
	StreamCodex = "codex"
)

// Clipping of what goes into progress records: a status is one line for
// people, a detail enough to see what a tool did, and a record stays well
// under MaxProgressLine once encoded.
const (
	maxStatusRunes = 120
	maxDetailRunes = 1000
	// maxStreamLine bounds one CLI event held in memory; a longer one (a
	// tool result holding a huge file) is skipped as it is read.
	maxStreamLine = 32 << 20
)

// StreamOutcome is what a CLI's event stream amounted to.
type StreamOutcome struct {
	// Reply is the text to post: claude's result, else its last
	// assistant text; codex's last agent message.
	Reply string
	// Failed is set when the run reported an error (claude is_error,
	// codex turn.failed or error); Error says what.
	Failed bool
	Error  string
	// Started is set once the CLI reported a session (claude's init,
	// codex's thread.started): a failure without it means the CLI never
	// began the run, which is how a rejected resume looks.
	Started bool
	// Session is the CLI's session id, "" when none was seen.
	Session string
	// Usage is the run's total as last reported, nil when none was.
	Usage *Usage
	// Lines counts the lines read; Bad those that were not JSON objects
	// (or too long) and were skipped.
	Lines, Bad int
}

// ErrUnknownStream is returned for a format ConvertStream does not know.
var ErrUnknownStream = errors.New("unknown stream format")

// ConvertStream reads format's event lines from r until EOF, calls emit (if
// not nil) with a progress record for each event worth showing, and returns
// the outcome. Malformed lines are counted and skipped; unknown event types
// become records of kind "other". Only a read error is returned as error.
func ConvertStream(format string, r io.Reader, emit func(ProgressRecord)) (StreamOutcome, error) {
	var c streamConverter
	switch format {
	case StreamClaude:
		c = &claudeStream{msgUsage: map[string]claudeUsage{}}
	case StreamCodex:
		c = &codexStream{}
	default:
		return StreamOutcome{}, fmt.Errorf("%w %q: use %s or %s", ErrUnknownStream, format, StreamClaude, StreamCodex)
	}
	if emit == nil {
		emit = func(ProgressRecord) {}
	}
	var out StreamOutcome
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxStreamLine {
			tooLong, line = true, line[:0]
		} else if !tooLong {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 || tooLong {
			out.Lines++
			var ev map[string]json.RawMessage
			if tooLong || json.Unmarshal(bytes.TrimSpace(line), &ev) != nil || ev == nil {
				out.Bad++
			} else {
				for _, rec := range c.event(ev, &out) {
					emit(rec)
				}
			}
		}
		line, tooLong = line[:0], false
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("read the CLI's events: %w", err)
		}
	}
	c.finish(&out)
	return out, nil
}

// streamConverter turns one decoded event into progress records, updating
// the outcome.
type streamConverter interface {
	event(ev map[string]json.RawMessage, out *StreamOutcome) []ProgressRecord
	finish(out *StreamOutcome)
}

// str decodes a JSON string field, "" when absent or not a string.
func str(ev map[string]json.RawMessage, key string) string {
	var s string
	_ = json.Unmarshal(ev[key], &s)
	return s
}

// clipRunes cuts s to at most n runes, marking the cut with an ellipsis.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// oneLine is the first non-empty line of s, clipped to a status.
func oneLine(s string) string {
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			return clipRunes(l, maxStatusRunes)
		}
	}
	return ""
}

func detail(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// otherRecord keeps an event of a type the converter does not know, with
// its JSON as detail when that is small.
func otherRecord(typ string, ev map[string]json.RawMessage) ProgressRecord {
	rec := ProgressRecord{Status: clipRunes(typ, maxStatusRunes), Kind: "other"}
	if b, err := json.Marshal(ev); err == nil && len(b) <= maxDetailRunes {
		rec.Detail = b
	}
	return rec
}

// sessionRecord reports a (new) session id.
func sessionRecord(id, status string) ProgressRecord {
	return ProgressRecord{Status: status, Kind: "session", Session: id}
}

// toolArgument picks the argument that says most about a tool call: the
// command, the file, the pattern, the address… in that order.
func toolArgument(input json.RawMessage) string {
	var in map[string]any
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	for _, k := range []string{"command", "file_path", "path", "notebook_path", "pattern", "url", "query", "description", "prompt", "skill"} {
		if s, ok := in[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// claudeStream converts "claude -p --output-format stream-json --verbose".
type claudeStream struct {
	lastText string
	result   bool
	// msgUsage is each API message's usage: an assistant message comes
	// as several events (one per content block) repeating its usage.
	msgUsage map[string]claudeUsage
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// input counts every input token, cached or not: what the run read.
func (u claudeUsage) input() int64 {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

type claudeBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	IsError  bool            `json:"is_error"`
	Content  json.RawMessage `json:"content"`
}

type claudeMessage struct {
	ID      string        `json:"id"`
	Content []claudeBlock `json:"content"`
	Usage   *claudeUsage  `json:"usage"`
}

func (c *claudeStream) event(ev map[string]json.RawMessage, out *StreamOutcome) []ProgressRecord {
	var recs []ProgressRecord
	if id := str(ev, "session_id"); id != "" && id != out.Session {
		out.Session, out.Started = id, true
		status := "session " + id
		if m := str(ev, "model"); m != "" {
			status += " (" + m + ")"
		}
		recs = append(recs, sessionRecord(id, clipRunes(status, maxStatusRunes)))
	}
	switch typ := str(ev, "type"); typ {
	case "system":
		// init is reported as the session above; other subtypes
		// (compaction, hooks) are shown as they come.
		if sub := str(ev, "subtype"); sub != "init" {
			recs = append(recs, ProgressRecord{Status: clipRunes("system: "+sub, maxStatusRunes), Kind: "other"})
		}
	case "assistant", "user":
		var msg claudeMessage
		if json.Unmarshal(ev["message"], &msg) != nil {
			return append(recs, otherRecord(typ, ev))
		}
		for _, b := range msg.Content {
			if rec, ok := c.block(b); ok {
				recs = append(recs, rec)
			}
		}
		if typ == "assistant" && msg.Usage != nil && msg.ID != "" {
			c.msgUsage[msg.ID] = *msg.Usage
			var u Usage
			for _, mu := range c.msgUsage {
				u.InputTokens += mu.input()
				u.OutputTokens += mu.OutputTokens
			}
			if out.Usage == nil || *out.Usage != u {
				out.Usage = &u
				recs = append(recs, ProgressRecord{Status: fmt.Sprintf("%d tokens in, %d out", u.InputTokens, u.OutputTokens), Kind: "usage", Usage: &u})
			}
		}
	case "stream_event":
		// Partial deltas (--include-partial-messages): the complete
		// message follows as an assistant event.
	case "result":
		recs = append(recs, c.resultEvent(ev, out)...)
	default:
		recs = append(recs, otherRecord(typ, ev))
	}
	return recs
}

func (c *claudeStream) block(b claudeBlock) (ProgressRecord, bool) {
	switch b.Type {
	case "text":
		if strings.TrimSpace(b.Text) == "" {
			return ProgressRecord{}, false
		}
		c.lastText = b.Text
		return ProgressRecord{Status: oneLine(b.Text), Kind: "text", Detail: detail(map[string]string{"text": clipRunes(b.Text, maxDetailRunes)})}, true
	case "thinking", "redacted_thinking":
		return ProgressRecord{Status: "thinking", Kind: "thinking", Detail: detail(map[string]string{"text": clipRunes(b.Thinking, maxDetailRunes)})}, true
	case "tool_use", "server_tool_use":
		arg := toolArgument(b.Input)
		status := b.Name
		if arg != "" {
			status += ": " + oneLine(arg)
		}
		return ProgressRecord{Status: clipRunes(status, maxStatusRunes), Kind: "tool",
			Detail: detail(map[string]string{"name": b.Name, "input": clipRunes(arg, maxDetailRunes)})}, true
	case "tool_result":
		status := "tool done"
		if b.IsError {
			status = "tool failed"
		}
		text := toolResultText(b.Content)
		if b.IsError && text != "" {
			status += ": " + oneLine(text)
		}
		return ProgressRecord{Status: clipRunes(status, maxStatusRunes), Kind: "tool_result",
			Detail: detail(map[string]any{"is_error": b.IsError, "output": clipRunes(text, maxDetailRunes)})}, true
	default:
		return ProgressRecord{Status: clipRunes(b.Type, maxStatusRunes), Kind: "other"}, true
	}
}

// toolResultText is a tool result's content as text: a string, or the text
// blocks of a list.
func toolResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []claudeBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (c *claudeStream) resultEvent(ev map[string]json.RawMessage, out *StreamOutcome) []ProgressRecord {
	c.result = true
	var isError bool
	_ = json.Unmarshal(ev["is_error"], &isError)
	subtype := str(ev, "subtype")
	text := str(ev, "result")
	var u Usage
	var cu claudeUsage
	_ = json.Unmarshal(ev["usage"], &cu)
	u.InputTokens, u.OutputTokens = cu.input(), cu.OutputTokens
	// total_cost_usd is the current name; older builds said cost_usd.
	if json.Unmarshal(ev["total_cost_usd"], &u.CostUSD) != nil {
		_ = json.Unmarshal(ev["cost_usd"], &u.CostUSD)
	}
	if u.InputTokens == 0 && u.OutputTokens == 0 && out.Usage != nil {
		u.InputTokens, u.OutputTokens = out.Usage.InputTokens, out.Usage.OutputTokens
	}
	out.Usage = &u
	status := fmt.Sprintf("done: %d tokens in, %d out, $%.4f", u.InputTokens, u.OutputTokens, u.CostUSD)
	kind := "usage"
	if isError || (subtype != "" && subtype != "success") {
		out.Failed = true
		out.Error = strings.TrimSpace(text)
		if out.Error == "" {
			out.Error = "claude ended with " + subtype
		}
		status = "failed: " + oneLine(out.Error)
		kind = "error" // as codex's failures, so a timeline marks both alike
	} else {
		out.Failed, out.Error = false, ""
		out.Reply = text
		if strings.TrimSpace(text) == "" {
			out.Reply = c.lastText
		}
	}
	return []ProgressRecord{{Status: clipRunes(status, maxStatusRunes), Kind: kind, Usage: &u}}
}

func (c *claudeStream) finish(out *StreamOutcome) {
	if !c.result && !out.Failed {
		out.Failed = true
		out.Error = "claude ended without a result event"
	}
}

// codexStream converts "codex exec --json".
type codexStream struct {
	lastMessage string
	completed   bool
	usage       Usage
}

type codexItem struct {
	ID string `json:"id"`
	// Type is the item's kind; builds before the rename called it
	// item_type.
	Type             string `json:"type"`
	ItemType         string `json:"item_type"`
	Text             string `json:"text"`
	Command          string `json:"command"`
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	Status           string `json:"status"`
	Changes          []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	Server  string            `json:"server"`
	Tool    string            `json:"tool"`
	Query   string            `json:"query"`
	Items   []json.RawMessage `json:"items"`
	Message string            `json:"message"`
}

func (c *codexStream) event(ev map[string]json.RawMessage, out *StreamOutcome) []ProgressRecord {
	switch typ := str(ev, "type"); typ {
	case "thread.started":
		id := str(ev, "thread_id")
		if id == "" {
			return nil
		}
		out.Session, out.Started = id, true
		return []ProgressRecord{sessionRecord(id, clipRunes("session "+id, maxStatusRunes))}
	case "turn.started":
		return []ProgressRecord{{Status: "working", Kind: "turn"}}
	case "turn.completed":
		var body struct {
			Usage struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		_ = json.Unmarshal(ev["usage"], &body.Usage)
		// Usage is per turn; the run's total adds them up.
		c.usage.InputTokens += body.Usage.InputTokens
		c.usage.OutputTokens += body.Usage.OutputTokens
		u := c.usage
		out.Usage = &u
		c.completed = true
		out.Failed, out.Error = false, ""
		return []ProgressRecord{{Status: fmt.Sprintf("done: %d tokens in, %d out", u.InputTokens, u.OutputTokens), Kind: "usage", Usage: &u}}
	case "turn.failed":
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(ev["error"], &e)
		return c.fail(out, e.Message, "the turn failed")
	case "error":
		return c.fail(out, str(ev, "message"), "codex reported an error")
	case "item.started", "item.updated", "item.completed":
		var it codexItem
		if json.Unmarshal(ev["item"], &it) != nil {
			return []ProgressRecord{otherRecord(typ, ev)}
		}
		if rec, ok := c.item(typ, it); ok {
			return []ProgressRecord{rec}
		}
		return nil
	default:
		return []ProgressRecord{otherRecord(typ, ev)}
	}
}

func (c *codexStream) fail(out *StreamOutcome, msg, fallback string) []ProgressRecord {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = fallback
	}
	out.Failed, out.Error = true, msg
	return []ProgressRecord{{Status: clipRunes("failed: "+oneLine(msg), maxStatusRunes), Kind: "error", Detail: detail(map[string]string{"message": clipRunes(msg, maxDetailRunes)})}}
}

// item words one item event; started and completed ones are shown,
// updates only for the plan (they repeat the rest).
func (c *codexStream) item(typ string, it codexItem) (ProgressRecord, bool) {
	kind := it.Type
	if kind == "" {
		kind = it.ItemType
	}
	done := typ == "item.completed"
	if typ == "item.updated" && kind != "todo_list" {
		return ProgressRecord{}, false
	}
	switch kind {
	case "agent_message", "assistant_message":
		if !done {
			return ProgressRecord{}, false
		}
		c.lastMessage = it.Text
		return ProgressRecord{Status: oneLine(it.Text), Kind: "text", Detail: detail(map[string]string{"text": clipRunes(it.Text, maxDetailRunes)})}, true
	case "reasoning":
		if !done {
			return ProgressRecord{}, false
		}
		return ProgressRecord{Status: "thinking", Kind: "thinking", Detail: detail(map[string]string{"text": clipRunes(it.Text, maxDetailRunes)})}, true
	case "command_execution":
		if !done {
			return ProgressRecord{Status: clipRunes("$ "+oneLine(it.Command), maxStatusRunes), Kind: "tool",
				Detail: detail(map[string]string{"name": "shell", "input": clipRunes(it.Command, maxDetailRunes)})}, true
		}
		status := "$ " + oneLine(it.Command)
		if it.ExitCode != nil {
			status += fmt.Sprintf(" → exit %d", *it.ExitCode)
		}
		return ProgressRecord{Status: clipRunes(status, maxStatusRunes), Kind: "tool_result",
			Detail: detail(map[string]any{"exit_code": it.ExitCode, "output": clipRunes(it.AggregatedOutput, maxDetailRunes)})}, true
	case "file_change":
		var paths []string
		for _, ch := range it.Changes {
			paths = append(paths, ch.Kind+" "+ch.Path)
		}
		k := "tool"
		if done {
			k = "tool_result"
		}
		return ProgressRecord{Status: clipRunes("edit: "+strings.Join(paths, ", "), maxStatusRunes), Kind: k,
			Detail: detail(map[string]any{"name": "file_change", "changes": it.Changes})}, true
	case "mcp_tool_call":
		k := "tool"
		if done {
			k = "tool_result"
		}
		name := it.Server + "." + it.Tool
		return ProgressRecord{Status: clipRunes(name, maxStatusRunes), Kind: k, Detail: detail(map[string]string{"name": name, "status": it.Status})}, true
	case "web_search":
		if done {
			return ProgressRecord{}, false
		}
		return ProgressRecord{Status: clipRunes("search: "+oneLine(it.Query), maxStatusRunes), Kind: "tool",
			Detail: detail(map[string]string{"name": "web_search", "input": clipRunes(it.Query, maxDetailRunes)})}, true
	case "todo_list":
		return ProgressRecord{Status: fmt.Sprintf("plan: %d items", len(it.Items)), Kind: "plan"}, true
	case "error":
		// A non-fatal error item (the turn goes on).
		return ProgressRecord{Status: clipRunes("error: "+oneLine(it.Message), maxStatusRunes), Kind: "error"}, true
	default:
		if !done {
			return ProgressRecord{}, false
		}
		return ProgressRecord{Status: clipRunes(kind, maxStatusRunes), Kind: "other"}, true
	}
}

func (c *codexStream) finish(out *StreamOutcome) {
	out.Reply = c.lastMessage
	if !c.completed && !out.Failed {
		out.Failed = true
		out.Error = "codex ended without completing its turn"
	}
}
