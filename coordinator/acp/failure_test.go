package acp

import (
	"slices"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// OpenCode's log line for a usage limit (what opencode 1.18.33 printed
// with --print-logs for the fake's rate_limit_exceeded) is quota, due when
// it says; its line for a dead server, and other lines, are not.
func TestStderrFailure(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 15, 33, 43, 0, time.UTC)
	limit := `timestamp=2026-12-07T15:33:43.448Z level=ERROR run=789b7af2 message="stream error" providerID=fake modelID=fake-model session.id=ses_daedc6be7ffexUTOYydaVY1r76 small=false agent=build mode=primary error.error="AI_APICallError: Rate limit reached for fake-model in organization org-fake on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 1m39s. Visit https://platform.openai.com/account/rate-limits to learn more."`
	f := stderrFailure(limit, now)
	if f == nil || f.Class != agentbridge.FailureQuota || f.RetryAt != agentbridge.FormatTime(now.Add(99*time.Second)) || f.Message == "" {
		t.Fatalf("limit line: %+v", f)
	}
	for _, line := range []string{
		`timestamp=2026-12-07T15:31:36.319Z level=ERROR run=f46f262e message="stream error" providerID=fake error.error="AI_APICallError: Cannot connect to API: Unable to connect. Is the computer able to access the url? (cause: Error: Unable to connect. Is the computer able to access the url?)"`,
		`timestamp=2026-12-07T15:33:34.880Z level=WARN run=789b7af2 message="background dependency install failed" error="rate limit"`,
		"a 429 somewhere else",
	} {
		if f := stderrFailure(line, now); f != nil {
			t.Errorf("%q gave %+v", line, f)
		}
	}
	// An escaped quote inside the message, and no wait named.
	if f := stderrFailure(`message="stream error" error.error="AI_APICallError: \"rate limit\" reached"`, now); f == nil || f.RetryAt != "" || f.Message != `AI_APICallError: "rate limit" reached` {
		t.Errorf("escaped line: %+v", f)
	}
}

// The watcher gets whole lines, split however they are written, only
// while it is set; of a line begun before, what follows.
func TestStderrLines(t *testing.T) {
	t.Parallel()
	var s stderrTail
	var got []string
	_, _ = s.Write([]byte("before the turn, unfinished"))
	s.watchLines(func(l string) { got = append(got, l) })
	for _, chunk := range []string{" end\nfirst li", "ne\n", "second\nthird", " line\n"} {
		_, _ = s.Write([]byte(chunk))
	}
	s.watchLines(nil)
	_, _ = s.Write([]byte("after\n"))
	if want := []string{" end", "first line", "second", "third line"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
	if string(s.since(0)) != "before the turn, unfinished end\nfirst line\nsecond\nthird line\nafter\n" {
		t.Errorf("tail %q", s.since(0))
	}
}
