package adapters

import (
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// failures collects the failures of a converted stream's records.
func failures(t *testing.T, format, stream string, now time.Time) ([]agentbridge.Failure, StreamOutcome) {
	t.Helper()
	var fs []agentbridge.Failure
	out, err := ConvertStreamWith(format, strings.NewReader(stream), func(r ProgressRecord) {
		if r.Failure != nil {
			fs = append(fs, *r.Failure)
		}
	}, StreamOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return fs, out
}

// claude says a usage limit in its first api_retry (these lines are what
// claude 2.1.328 printed for the fake's 429 with retry-after: 30): the
// failure is reported at once, with when claude would have retried.
func TestClaudeUsageLimitFromFirstRetry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	stream := `{"type":"system","subtype":"init","session_id":"38f73ccc","model":"claude-opus-5-5"}
{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":35848,"error_status":429,"error":"rate_limit","session_id":"38f73ccc"}
{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":34000,"error_status":429,"error":"rate_limit","session_id":"38f73ccc"}
`
	fs, out := failures(t, StreamClaude, stream, now)
	if len(fs) != 1 || fs[0].Class != agentbridge.FailureQuota || fs[0].RetryAt != agentbridge.FormatTime(now.Add(35848*time.Millisecond)) {
		t.Fatalf("failures %+v", fs)
	}
	if !out.Failed || !strings.Contains(out.Error, "usage limit") {
		t.Errorf("outcome %+v", out)
	}
	// claude's own backoff (no retry-after) is no reset time.
	fs, _ = failures(t, StreamClaude, strings.Replace(stream, "35848", "612", 1), now)
	if len(fs) != 1 || fs[0].RetryAt != "" {
		t.Errorf("failures with claude's backoff: %+v", fs)
	}
}

// A failed result is classified from its API status and its text; a
// result refusing a resume before any run began is no failure (the
// adapter starts afresh).
func TestClaudeFailedResultIsClassified(t *testing.T) {
	t.Parallel()
	init := `{"type":"system","subtype":"init","session_id":"s1","model":"m"}` + "\n"
	for _, tc := range []struct{ result, want string }{
		{`{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Invalid API key · Fix external API key","session_id":"s1"}`, agentbridge.FailureAuth},
		{`{"type":"result","subtype":"success","is_error":true,"result":"API Error: Request rejected (429) · This request would exceed the rate limit","session_id":"s1"}`, agentbridge.FailureQuota},
		{`{"type":"result","subtype":"success","is_error":true,"result":"API Error: Connection refused","session_id":"s1"}`, agentbridge.FailureUnreachable},
	} {
		fs, _ := failures(t, StreamClaude, init+tc.result+"\n", time.Now())
		if len(fs) != 1 || fs[0].Class != tc.want {
			t.Errorf("%s: failures %+v, want %s", tc.result, fs, tc.want)
		}
	}
	fs, _ := failures(t, StreamClaude, `{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"gone","errors":["No conversation found with session ID: gone"]}`+"\n", time.Now())
	if len(fs) != 0 {
		t.Errorf("a refused resume reported %+v", fs)
	}
}

// codex's usage limit (what codex 0.169.0 printed for the fake's
// usage_limit_reached) names when it resets, in the local time zone, to
// the minute; the failure is due at the end of that minute, once.
func TestCodexUsageLimitNamesItsReset(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 14, 28, 10, 0, time.Local)
	msg := "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 2:38 PM."
	stream := `{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"error","message":"` + msg + `"}
{"type":"turn.failed","error":{"message":"` + msg + `"}}
`
	fs, _ := failures(t, StreamCodex, stream, now)
	want := agentbridge.FormatTime(time.Date(2026, 12, 7, 14, 39, 0, 0, time.Local))
	if len(fs) != 1 || fs[0].Class != agentbridge.FailureQuota || fs[0].RetryAt != want {
		t.Fatalf("failures %+v, want one quota due %s", fs, want)
	}
	at, ok := codexRetryAt("or try again at Dec 8th, 2026 1:05 AM.", now)
	if !ok || !at.Equal(time.Date(2026, 12, 8, 1, 6, 0, 0, time.Local)) {
		t.Errorf("a reset on another day: %v %v", at, ok)
	}
	if _, ok := codexRetryAt("Quota exceeded. Check your plan and billing details.", now); ok {
		t.Error("a message without a time gave one")
	}
}

// A progress line's failure is checked: a known class, an RFC 3339 time.
func TestProgressFailure(t *testing.T) {
	t.Parallel()
	r, err := ParseProgress([]byte(`{"status":"limit","failure":{"class":"quota","retry_at":"2026-12-07T15:04:00+01:00","message":"m"}}`))
	if err != nil || r.Failure == nil || r.Failure.RetryAt != "2026-12-07T14:04:00.000000Z" {
		t.Fatalf("%+v %v", r.Failure, err)
	}
	for _, bad := range []string{
		`{"status":"x","failure":{"class":"bored"}}`,
		`{"status":"x","failure":{"class":"quota","retry_at":"soon"}}`,
	} {
		if _, err := ParseProgress([]byte(bad)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}
