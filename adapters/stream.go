package adapters

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// The agent CLIs' machine-readable modes print one JSON event per line.
// ConvertStreamWith turns such a stream into the adapter's reply and progress
// records (contract 5.3). The formats, and where they are documented, are in
// docs/adapter-protocol.md and adapters/testdata/cli/README.md.

// Stream formats ConvertStreamWith reads.
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
	// Usage is the run's own total as last reported, nil when none was.
	Usage *Usage
	// SessionTotal is the session's running total as the CLI last
	// reported it (codex counts a resumed thread's earlier turns in), nil
	// when the format has none. Keep it as the Baseline of the session's
	// next run.
	SessionTotal *Usage
	// Lines counts the lines read; Bad those that were not JSON objects
	// (or too long) and were skipped.
	Lines, Bad int
}

// ErrUnknownStream is returned for a format ConvertStreamWith does not know.
var ErrUnknownStream = errors.New("unknown stream format")

// StreamOptions adjusts ConvertStreamWith (the zero value: no baseline).
type StreamOptions struct {
	// Baseline returns a session's running total at the end of its
	// previous run (a StreamOutcome.SessionTotal kept from then), zero
	// when unknown. codex reports a resumed thread's usage from the
	// thread's start; the run's own is the difference.
	Baseline func(session string) Usage
	// Now is the clock a failure's retry time is counted from (time.Now
	// when nil): claude says how long it will wait, not until when.
	Now func() time.Time
}

// clock is Now, or time.Now.
func (o StreamOptions) clock() func() time.Time {
	if o.Now != nil {
		return o.Now
	}
	return time.Now
}

// ConvertStreamWith reads format's event lines from r until EOF, calls emit
// (if not nil) with a progress record for each event worth showing, and
// returns the outcome. Malformed lines are counted and skipped; unknown
// event types become records of kind "other". Only a read error is
// returned as error.
func ConvertStreamWith(format string, r io.Reader, emit func(ProgressRecord), opts StreamOptions) (StreamOutcome, error) {
	var c streamConverter
	switch format {
	case StreamClaude:
		c = &claudeStream{msgUsage: map[string]claudeUsage{}, now: opts.clock()}
	case StreamCodex:
		c = &codexStream{baseline: opts.Baseline, now: opts.clock()}
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

// oneLine is the first non-empty line of s, clipped to a status.
func oneLine(s string) string {
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" {
			return agentbridge.Clip(l, maxStatusRunes)
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
	rec := ProgressRecord{Status: agentbridge.Clip(typ, maxStatusRunes), Kind: "other"}
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
	for _, k := range []string{"command", "cmd", "file_path", "path", "notebook_path", "pattern", "url", "query", "description", "prompt", "skill", "content", "text", "message", "thread", "name"} {
		if s, ok := in[k].(string); ok && s != "" {
			return s
		}
	}
	if len(in) == 0 {
		return ""
	}
	// A tool with other arguments (an MCP tool's, say): show them all.
	b, _ := json.Marshal(in)
	return string(b)
}

// toolName words claude's name of an MCP tool, mcp__<server>__<tool>, as
// codex's progress does, <server>.<tool>; other names stay as they are.
func toolName(name string) string {
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		return name
	}
	if server, tool, ok := strings.Cut(rest, "__"); ok && server != "" && tool != "" {
		return server + "." + tool
	}
	return name
}

// retryRecord is the progress record of a CLI retrying a failed model
// call: "retrying after 401 (attempt 2 of 3)", counting the first try as
// attempt 1. status is the HTTP status, or a short reason when there is
// none; max is the number of retries allowed (0 when unknown).
func retryRecord(status string, retry, max int, detailv map[string]any) ProgressRecord {
	s := fmt.Sprintf("retrying after %s (attempt %d", status, retry+1)
	if max > 0 {
		s += fmt.Sprintf(" of %d", max+1)
	}
	s += ")"
	return ProgressRecord{Status: agentbridge.Clip(s, maxStatusRunes), Kind: "retry", Detail: detail(detailv)}
}

// claudeRetry words claude's system/api_retry event: attempt n of
// max_retries failed with error_status (and error, its kind).
func claudeRetry(ev map[string]json.RawMessage) ProgressRecord {
	var attempt, max, status int
	_ = json.Unmarshal(ev["attempt"], &attempt)
	_ = json.Unmarshal(ev["max_retries"], &max)
	_ = json.Unmarshal(ev["error_status"], &status)
	why := str(ev, "error")
	reason := strconv.Itoa(status)
	if status == 0 {
		reason = why
		if reason == "" {
			reason = "an error"
		}
	}
	return retryRecord(reason, attempt, max, map[string]any{"attempt": attempt, "max_retries": max, "status": status, "error": why})
}

// claudeStream converts "claude -p --output-format stream-json --verbose".
type claudeStream struct {
	lastText string
	result   bool
	// limited is set once a usage limit was reported: the run has failed
	// then, whatever claude prints while it waits to retry; limitMsg says
	// it. now is the clock the limit's retry time is read on.
	limited  bool
	limitMsg string
	now      func() time.Time
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
	typ := str(ev, "type")
	// A run has begun once claude prints its init (or, were init missing,
	// a message of the conversation). A result alone does not count: a
	// resume of a session claude no longer has prints only a failed
	// result carrying that dead id (then exit 3 lets the adapter start a
	// fresh session).
	begins := (typ == "system" && str(ev, "subtype") == "init") || typ == "assistant" || typ == "user"
	if id := str(ev, "session_id"); id != "" && id != out.Session && begins {
		out.Session, out.Started = id, true
		// The status is what a person reads while the agent thinks: the
		// session's id stays in the record, out of it.
		status := "started"
		if m := str(ev, "model"); m != "" {
			status += " (" + m + ")"
		}
		recs = append(recs, sessionRecord(id, agentbridge.Clip(status, maxStatusRunes)))
	}
	switch typ {
	case "system":
		// init is reported as the session above; api_retry as a retry;
		// other subtypes (compaction, hooks) are shown as they come.
		switch sub := str(ev, "subtype"); sub {
		case "init":
		case "api_retry":
			recs = append(recs, claudeRetry(ev))
			if rec, ok := c.limit(ev, out); ok {
				recs = append(recs, rec)
			}
		default:
			recs = append(recs, ProgressRecord{Status: agentbridge.Clip("system: "+sub, maxStatusRunes), Kind: "other"})
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
			// An assistant event is printed before its message ends,
			// with a placeholder output_tokens (1): only the input is
			// known until the result, which has the real figures.
			for _, mu := range c.msgUsage {
				u.InputTokens += mu.input()
			}
			if out.Usage == nil || *out.Usage != u {
				out.Usage = &u
				recs = append(recs, ProgressRecord{Status: fmt.Sprintf("%d tokens in", u.InputTokens), Kind: "usage", Usage: &u})
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
		return ProgressRecord{Status: oneLine(b.Text), Kind: "text", Detail: detail(map[string]string{"text": agentbridge.Clip(b.Text, maxDetailRunes)})}, true
	case "thinking", "redacted_thinking":
		return ProgressRecord{Status: "thinking", Kind: "thinking", Detail: detail(map[string]string{"text": agentbridge.Clip(b.Thinking, maxDetailRunes)})}, true
	case "tool_use", "server_tool_use", "mcp_tool_use":
		arg := toolArgument(b.Input)
		status := toolName(b.Name)
		if arg != "" {
			status += ": " + oneLine(arg)
		}
		return ProgressRecord{Status: agentbridge.Clip(status, maxStatusRunes), Kind: "tool",
			Detail: detail(map[string]string{"name": b.Name, "input": agentbridge.Clip(arg, maxDetailRunes)})}, true
	case "tool_result":
		status := "tool done"
		if b.IsError {
			status = "tool failed"
		}
		text := toolResultText(b.Content)
		if b.IsError && text != "" {
			status += ": " + oneLine(text)
		}
		return ProgressRecord{Status: agentbridge.Clip(status, maxStatusRunes), Kind: "tool_result",
			Detail: detail(map[string]any{"is_error": b.IsError, "output": agentbridge.Clip(text, maxDetailRunes)})}, true
	default:
		return ProgressRecord{Status: agentbridge.Clip(b.Type, maxStatusRunes), Kind: "other"}, true
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
	// usage is this run's own; so is model_usage_since_last_result (per
	// model, with costUSD), while total_cost_usd and modelUsage are the
	// session's running totals once a session is resumed.
	var u Usage
	var cu claudeUsage
	_ = json.Unmarshal(ev["usage"], &cu)
	u.InputTokens, u.OutputTokens = cu.input(), cu.OutputTokens
	var since map[string]struct {
		CostUSD float64 `json:"costUSD"`
	}
	if json.Unmarshal(ev["model_usage_since_last_result"], &since) == nil && since != nil {
		for _, m := range since {
			u.CostUSD += m.CostUSD
		}
	} else if json.Unmarshal(ev["total_cost_usd"], &u.CostUSD) != nil {
		// Builds without the per-run figures: the total is the run's
		// own on a new session only. Older builds said cost_usd.
		_ = json.Unmarshal(ev["cost_usd"], &u.CostUSD)
	}
	if u.InputTokens == 0 && u.OutputTokens == 0 && out.Usage != nil {
		u.InputTokens = out.Usage.InputTokens
	}
	out.Usage = &u
	status := fmt.Sprintf("done: %d tokens in, %d out, $%.4f", u.InputTokens, u.OutputTokens, u.CostUSD)
	kind := "usage"
	if isError || (subtype != "" && subtype != "success") {
		out.Failed = true
		out.Error = strings.TrimSpace(text)
		if out.Error == "" {
			// error_during_execution has no result: its reasons are
			// in errors[].
			var errs []string
			_ = json.Unmarshal(ev["errors"], &errs)
			out.Error = strings.TrimSpace(strings.Join(errs, "; "))
		}
		if out.Error == "" {
			out.Error = "claude ended with " + subtype
		}
		status = "failed: " + oneLine(out.Error)
		kind = "error" // as codex's failures, so a timeline marks both alike
		var apiStatus int
		_ = json.Unmarshal(ev["api_error_status"], &apiStatus)
		rec := ProgressRecord{Status: agentbridge.Clip(status, maxStatusRunes), Kind: kind, Usage: &u}
		// A failed result before any run began is a resume claude
		// refused: the adapter starts afresh, so the run has not failed.
		if out.Started && !c.limited {
			rec.Failure = &agentbridge.Failure{Class: agentbridge.Classify(apiStatus, out.Error), Message: oneLine(out.Error)}
		}
		if c.limited {
			out.Error = c.limitMsg
		}
		return []ProgressRecord{rec}
	} else {
		out.Failed, out.Error = false, ""
		out.Reply = text
		if strings.TrimSpace(text) == "" {
			out.Reply = c.lastText
		}
	}
	return []ProgressRecord{{Status: agentbridge.Clip(status, maxStatusRunes), Kind: kind, Usage: &u}}
}

// minLimitDelay is the shortest wait of claude's that is taken for the
// time its usage limit resets (see limit).
const minLimitDelay = 5 * time.Second

// limit reports a usage limit from claude's first api_retry that names
// one (error_status 429, or the error "rate_limit"): claude would go on
// retrying, waiting retry_delay_ms each time (minutes, up to ten times),
// but the run has failed, and the record's failure says so at once, with
// when claude would have tried again.
func (c *claudeStream) limit(ev map[string]json.RawMessage, out *StreamOutcome) (ProgressRecord, bool) {
	var status int
	var delay int64
	_ = json.Unmarshal(ev["error_status"], &status)
	_ = json.Unmarshal(ev["retry_delay_ms"], &delay)
	why := str(ev, "error")
	if c.limited || (status != 429 && why != "rate_limit") {
		return ProgressRecord{}, false
	}
	c.limited = true
	f := agentbridge.Failure{Class: agentbridge.FailureQuota,
		Message: agentbridge.Clip(fmt.Sprintf("claude hit a usage limit (HTTP %d %s)", status, why), maxStatusRunes)}
	msg := f.Message
	// claude waits retry-after when the service sends one, else its own
	// backoff (half a second, doubling): only the first is when the limit
	// resets, and a run due again in a second would meet the limit again.
	if time.Duration(delay)*time.Millisecond >= minLimitDelay {
		at := c.now().Add(time.Duration(delay) * time.Millisecond)
		f.RetryAt = agentbridge.FormatTime(at)
		msg += fmt.Sprintf("; it would retry in %s", time.Duration(delay)*time.Millisecond/time.Second*time.Second)
	}
	c.limitMsg = msg
	out.Failed, out.Error = true, msg
	return ProgressRecord{Status: agentbridge.Clip("usage limit: "+msg, maxStatusRunes), Kind: "error", Failure: &f,
		Detail: detail(map[string]any{"status": status, "error": why, "retry_delay_ms": delay})}, true
}

func (c *claudeStream) finish(out *StreamOutcome) {
	if !c.result && !out.Failed {
		out.Failed = true
		out.Error = "claude ended without a result event"
	}
}

// codexReconnect matches codex's error event for a retry: attempt, of how
// many, and why; codexStatus the HTTP status in the why.
var (
	codexReconnect = regexp.MustCompile(`^Reconnecting\.\.\. (\d+)/(\d+)(?: \((.*)\))?$`)
	codexStatus    = regexp.MustCompile(`unexpected status (\d{3})`)
)

// codexStream converts "codex exec --json".
type codexStream struct {
	lastMessage string
	completed   bool
	baseline    func(string) Usage
	// before is the thread's running total when this run began.
	before Usage
	// failed is set once a failure was reported; now is the clock a
	// usage limit's reset is read against.
	failed bool
	now    func() time.Time
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
	Server    string            `json:"server"`
	Tool      string            `json:"tool"`
	Arguments json.RawMessage   `json:"arguments"`
	Query     string            `json:"query"`
	Items     []json.RawMessage `json:"items"`
	Message   string            `json:"message"`
}

func (c *codexStream) event(ev map[string]json.RawMessage, out *StreamOutcome) []ProgressRecord {
	switch typ := str(ev, "type"); typ {
	case "thread.started":
		id := str(ev, "thread_id")
		if id == "" {
			return nil
		}
		out.Session, out.Started = id, true
		if c.baseline != nil {
			c.before = c.baseline(id)
		}
		return []ProgressRecord{sessionRecord(id, "started")}
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
		// The usage is the thread's running total (after exec resume
		// it counts the earlier runs too): the run's own is what was
		// added since the thread's total at the run's start.
		total := Usage{InputTokens: body.Usage.InputTokens, OutputTokens: body.Usage.OutputTokens}
		out.SessionTotal = &total
		u := total
		if b := c.before; b.InputTokens <= total.InputTokens && b.OutputTokens <= total.OutputTokens {
			u.InputTokens -= b.InputTokens
			u.OutputTokens -= b.OutputTokens
		}
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
		msg := str(ev, "message")
		// "Reconnecting... 1/5 (unexpected status 401 Unauthorized: …)"
		// is a retry in progress, not the end of the run.
		if m := codexReconnect.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			max, _ := strconv.Atoi(m[2])
			reason := m[3]
			if st := codexStatus.FindStringSubmatch(reason); st != nil {
				reason = st[1]
			} else {
				reason = agentbridge.Clip(oneLine(reason), 60)
			}
			return []ProgressRecord{retryRecord(reason, n, max, map[string]any{"attempt": n, "max_retries": max, "error": m[3]})}
		}
		// "Reconnecting... waiting for network (Connection failed: …)":
		// codex waits for the model's address to answer again.
		if rest, ok := strings.CutPrefix(msg, "Reconnecting... "); ok {
			return []ProgressRecord{{Status: agentbridge.Clip("retrying: "+oneLine(rest), maxStatusRunes), Kind: "retry",
				Detail: detail(map[string]string{"error": agentbridge.Clip(msg, maxDetailRunes)})}}
		}
		return c.fail(out, msg, "codex reported an error")
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
	rec := ProgressRecord{Status: agentbridge.Clip("failed: "+oneLine(msg), maxStatusRunes), Kind: "error", Detail: detail(map[string]string{"message": agentbridge.Clip(msg, maxDetailRunes)})}
	// codex says a failure twice (error, then turn.failed): the first
	// one carries it.
	if !c.failed {
		c.failed = true
		rec.Failure = &agentbridge.Failure{Class: agentbridge.Classify(0, msg), Message: oneLine(msg)}
		if t, ok := codexRetryAt(msg, c.now()); ok {
			rec.Failure.RetryAt = agentbridge.FormatTime(t)
		}
	}
	return []ProgressRecord{rec}
}

// codexTryAgain is codex's "try again at 2:38 PM." (a reset later today,
// in the local time zone) or "try again at Dec 8th, 2026 2:38 PM." of a
// usage limit.
var codexTryAgain = regexp.MustCompile(`(?i)try again at (?:([A-Z][a-z]{2}) (\d{1,2})(?:st|nd|rd|th), (\d{4}) )?(\d{1,2}):(\d{2}) ([AP]M)`)

// codexRetryAt reads when codex says a usage limit resets, from its
// message and the local clock (codex prints the time in the local zone,
// to the minute): the end of that minute, when the limit has surely
// reset. ok is false when the message names no time.
func codexRetryAt(msg string, now time.Time) (time.Time, bool) {
	m := codexTryAgain.FindStringSubmatch(msg)
	if m == nil {
		return time.Time{}, false
	}
	now = now.Local()
	y, mo, d := now.Date()
	if m[1] != "" {
		month, err := time.Parse("Jan", m[1])
		if err != nil {
			return time.Time{}, false
		}
		mo = month.Month()
		d, _ = strconv.Atoi(m[2])
		y, _ = strconv.Atoi(m[3])
	}
	h, _ := strconv.Atoi(m[4])
	mi, _ := strconv.Atoi(m[5])
	if h < 1 || h > 12 || mi > 59 {
		return time.Time{}, false
	}
	h %= 12
	if strings.EqualFold(m[6], "PM") {
		h += 12
	}
	return time.Date(y, mo, d, h, mi, 0, 0, time.Local).Add(time.Minute), true
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
		return ProgressRecord{Status: oneLine(it.Text), Kind: "text", Detail: detail(map[string]string{"text": agentbridge.Clip(it.Text, maxDetailRunes)})}, true
	case "reasoning":
		if !done {
			return ProgressRecord{}, false
		}
		return ProgressRecord{Status: "thinking", Kind: "thinking", Detail: detail(map[string]string{"text": agentbridge.Clip(it.Text, maxDetailRunes)})}, true
	case "command_execution":
		if !done {
			return ProgressRecord{Status: agentbridge.Clip("$ "+oneLine(it.Command), maxStatusRunes), Kind: "tool",
				Detail: detail(map[string]string{"name": "shell", "input": agentbridge.Clip(it.Command, maxDetailRunes)})}, true
		}
		status := "$ " + oneLine(it.Command)
		if it.ExitCode != nil {
			status += fmt.Sprintf(" → exit %d", *it.ExitCode)
		}
		return ProgressRecord{Status: agentbridge.Clip(status, maxStatusRunes), Kind: "tool_result",
			Detail: detail(map[string]any{"exit_code": it.ExitCode, "output": agentbridge.Clip(it.AggregatedOutput, maxDetailRunes)})}, true
	case "file_change":
		var paths []string
		for _, ch := range it.Changes {
			paths = append(paths, ch.Kind+" "+ch.Path)
		}
		k := "tool"
		if done {
			k = "tool_result"
		}
		return ProgressRecord{Status: agentbridge.Clip("edit: "+strings.Join(paths, ", "), maxStatusRunes), Kind: k,
			Detail: detail(map[string]any{"name": "file_change", "changes": it.Changes})}, true
	case "mcp_tool_call":
		k := "tool"
		if done {
			k = "tool_result"
		}
		name := it.Server + "." + it.Tool
		status, arg := name, toolArgument(it.Arguments)
		if arg != "" {
			status += ": " + oneLine(arg)
		}
		return ProgressRecord{Status: agentbridge.Clip(status, maxStatusRunes), Kind: k,
			Detail: detail(map[string]string{"name": name, "input": agentbridge.Clip(arg, maxDetailRunes), "status": it.Status})}, true
	case "web_search":
		if done {
			return ProgressRecord{}, false
		}
		return ProgressRecord{Status: agentbridge.Clip("search: "+oneLine(it.Query), maxStatusRunes), Kind: "tool",
			Detail: detail(map[string]string{"name": "web_search", "input": agentbridge.Clip(it.Query, maxDetailRunes)})}, true
	case "todo_list":
		return ProgressRecord{Status: fmt.Sprintf("plan: %d items", len(it.Items)), Kind: "plan"}, true
	case "error":
		// A non-fatal error item: the turn goes on (codex says so of a
		// model it has no metadata for, and still answers).
		return ProgressRecord{Status: agentbridge.Clip("warning: "+oneLine(it.Message), maxStatusRunes), Kind: "warning",
			Detail: detail(map[string]string{"message": agentbridge.Clip(it.Message, maxDetailRunes)})}, true
	default:
		if !done {
			return ProgressRecord{}, false
		}
		return ProgressRecord{Status: agentbridge.Clip(kind, maxStatusRunes), Kind: "other"}, true
	}
}

func (c *codexStream) finish(out *StreamOutcome) {
	out.Reply = c.lastMessage
	if !c.completed && !out.Failed {
		out.Failed = true
		out.Error = "codex ended without completing its turn"
	}
}

// SessionTotals keeps, per CLI session, the running total the CLI last
// reported (StreamOutcome.SessionTotal), one small JSON file per session
// in Dir, so the session's next run can book only its own usage
// (StreamOptions.Baseline). The shipped codex.sh keeps them beside codex's
// own sessions, in $CODEX_HOME/agent-bridge-usage (about 60 bytes a
// session; nothing prunes them). Runs of one session never overlap (the
// coordinator runs one trigger at a time per participant and thread), so
// there is no locking. A run that fails before codex reports its usage
// saves nothing, so the session's next run books what both used: the sum
// still equals what the model served.
type SessionTotals struct{ Dir string }

// file is the session's file, "" for an id unfit for a file name.
func (s SessionTotals) file(session string) string {
	if s.Dir == "" || session == "" || strings.ContainsAny(session, `/\`) || strings.HasPrefix(session, ".") {
		return ""
	}
	return filepath.Join(s.Dir, session+".json")
}

// Load returns the session's kept total, zero when none is kept or it
// cannot be read (the run then books the CLI's figures as they are).
func (s SessionTotals) Load(session string) Usage {
	var u Usage
	if f := s.file(session); f != "" {
		if b, err := os.ReadFile(f); err == nil {
			_ = json.Unmarshal(b, &u)
		}
	}
	return u
}

// Save keeps the session's total for its next run.
func (s SessionTotals) Save(session string, total Usage) error {
	f := s.file(session)
	if f == "" {
		return nil
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("keep the session's usage: %w", err)
	}
	b, err := json.Marshal(total)
	if err != nil {
		return fmt.Errorf("keep the session's usage: %w", err)
	}
	tmp := f + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("keep the session's usage: %w", err)
	}
	if err := os.Rename(tmp, f); err != nil {
		return fmt.Errorf("keep the session's usage: %w", err)
	}
	return nil
}
