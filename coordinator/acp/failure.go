package acp

import (
	"regexp"
	"strconv"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
)

// When an ACP agent's model service refuses it (contract 8.5,
// docs/failures.md). An agent that meets a usage limit may retry it for
// minutes without a word over ACP: OpenCode 1.18 retries a 429 five times,
// waiting the service's retry-after each time, and only its log says so.
// The lines of its stderr written during a turn are read as they come; a
// line that is one of stderrLimits and names a usage limit ends the turn
// at once as quota, as the claude adapter does at claude's first
// api_retry.

// stderrLimits match the log lines in which ACP agents say that a model
// call failed; the first group is the service's error message.
var stderrLimits = []*regexp.Regexp{
	// OpenCode 1.18 with --print-logs: level=ERROR … message="stream
	// error" … error.error="AI_APICallError: Rate limit reached for … Please
	// try again in 39s. …" (logfmt, quotes escaped).
	regexp.MustCompile(`\bmessage="stream error".*\berror\.error="((?:[^"\\]|\\.)*)"`),
}

// retryIn finds the wait the service names in a limit's message ("Please
// try again in 39s.", "in 6m0s", "in 120ms": OpenAI's wording).
var retryIn = regexp.MustCompile(`(?i)try again in ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)\b`)

// stderrFailure is the failure a line of an agent's stderr says its turn
// met, nil when it says none: only a usage limit counts, since the agent
// retries it for as long as the service asks, while it gives up on a
// refused key at once and answers the prompt with the error.
func stderrFailure(line string, now time.Time) *agentbridge.Failure {
	for _, re := range stderrLimits {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		msg := m[1]
		if s, err := strconv.Unquote(`"` + msg + `"`); err == nil {
			msg = s
		}
		if agentbridge.ClassifyText(msg) != agentbridge.FailureQuota {
			return nil
		}
		f := &agentbridge.Failure{Class: agentbridge.FailureQuota, Message: agentbridge.Clip(msg, maxStatusChars)}
		if w := retryIn.FindStringSubmatch(msg); w != nil {
			if d, err := time.ParseDuration(w[1]); err == nil {
				f.RetryAt = agentbridge.FormatTime(now.Add(d))
			}
		}
		return f
	}
	return nil
}

// watchStderr has the agent's stderr lines read for a failure while the
// turn runs (see stderrFailure); the first one found is reported in the
// turn's progress, which makes the coordinator end the turn.
func (a *agent) watchStderr(t *turn) {
	a.stderr.watchLines(func(line string) {
		f := stderrFailure(line, time.Now())
		if f == nil {
			return
		}
		t.mu.Lock()
		first := !t.failed
		t.failed = true
		t.mu.Unlock()
		if first {
			t.progress(adapters.ProgressRecord{Status: oneLineStatus("usage limit: " + f.Message), Kind: "failure", Failure: f})
		}
	})
}

// unanswered reports whether a turn that ended with end_turn answered
// nothing at all: no update during it, and usage reported as zero tokens.
// claude-agent-acp 0.23 answers so the prompt after one that failed (it
// reads the previous turn's leftover idle state as this turn's end, and
// runs this prompt behind the client's back); a model call always uses
// tokens.
func unanswered(t *turn, resp sdk.PromptResponse) bool {
	t.mu.Lock()
	quiet := t.updates == 0
	t.mu.Unlock()
	u := resp.Usage
	return quiet && u != nil && u.TotalTokens == 0 && u.InputTokens == 0 && u.OutputTokens == 0
}
