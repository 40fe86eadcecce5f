package adapters

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// fixtureText is a recorded fixture (testdata/cli/README.md) as text.
func fixtureText(t *testing.T, format, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "cli", format, name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// retryDelay is the retry_delay_ms of claude's first api_retry line.
var retryDelay = regexp.MustCompile(`"retry_delay_ms":(\d+)`)

// claude says a usage limit in its first api_retry (claude 2.1.328 on the
// fake's 429 with retry-after: 20): the failure is reported at once, with
// when claude would have retried.
func TestClaudeUsageLimitFromFirstRetry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	stream := fixtureText(t, StreamClaude, "usage-limit")
	m := retryDelay.FindStringSubmatch(stream)
	if m == nil {
		t.Fatal("the fixture has no api_retry")
	}
	ms, _ := strconv.Atoi(m[1])
	// The coordinator stops the run at the failure: the adapter's stream
	// ends after that line.
	end := strings.Index(stream, m[0])
	end += strings.IndexByte(stream[end:], '\n') + 1
	fs, out := failures(t, StreamClaude, stream[:end], now)
	if len(fs) != 1 || fs[0].Class != agentbridge.FailureQuota || fs[0].RetryAt != agentbridge.FormatTime(now.Add(time.Duration(ms)*time.Millisecond)) {
		t.Fatalf("failures %+v, want one quota due in %d ms", fs, ms)
	}
	if !out.Failed || !strings.Contains(out.Error, "usage limit") {
		t.Errorf("outcome %+v", out)
	}
	// Left alone, claude waited and answered: the limit is still reported
	// at its first line, and the run's own end is a reply.
	fs, out = failures(t, StreamClaude, stream, now)
	if len(fs) != 1 || out.Failed || out.Reply != "answered after the limit" {
		t.Errorf("the whole run: failures %+v, outcome %+v", fs, out)
	}
	// claude's own backoff (no retry-after) is no reset time.
	fs, _ = failures(t, StreamClaude, strings.Replace(stream, m[0], `"retry_delay_ms":612`, 1), now)
	if len(fs) != 1 || fs[0].RetryAt != "" {
		t.Errorf("failures with claude's backoff: %+v", fs)
	}
}

// A failed result is classified from its API status and its text (what
// claude 2.1.328 printed for a refused key, a limit whose retry-after it
// would not wait for, and a dead server); a result refusing a resume
// before any run began is no failure (the adapter starts afresh).
func TestClaudeFailedResultIsClassified(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"bad-key":              agentbridge.FailureAuth,
		"usage-limit-rejected": agentbridge.FailureQuota,
		"unreachable":          agentbridge.FailureUnreachable,
	} {
		fs, _ := failures(t, StreamClaude, fixtureText(t, StreamClaude, name), time.Now())
		if len(fs) != 1 || fs[0].Class != want || fs[0].RetryAt != "" {
			t.Errorf("%s: failures %+v, want one %s", name, fs, want)
		}
	}
	if fs, _ := failures(t, StreamClaude, fixtureText(t, StreamClaude, "lost-session"), time.Now()); len(fs) != 0 {
		t.Errorf("a refused resume reported %+v", fs)
	}
}

// tryAgainAt finds the clock time of codex's usage-limit message.
var tryAgainAt = regexp.MustCompile(`try again at (\d{1,2}):(\d\d) ([AP]M)`)

// codex's usage limit (what codex 0.169.0 printed for the fake's
// usage_limit_reached) names when it resets, in the local time zone, to
// the minute; the failure is due at the end of that minute, once. An API
// key's exhausted quota names no time.
func TestCodexUsageLimitNamesItsReset(t *testing.T) {
	t.Parallel()
	stream := fixtureText(t, StreamCodex, "usage-limit")
	m := tryAgainAt.FindStringSubmatch(stream)
	if m == nil {
		t.Fatal("the fixture names no time")
	}
	h, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	if m[3] == "PM" && h != 12 {
		h += 12
	} else if m[3] == "AM" && h == 12 {
		h = 0
	}
	reset := time.Date(2026, 12, 7, h, mi, 0, 0, time.Local)
	now := reset.Add(-10 * time.Minute)
	if now.Day() != reset.Day() {
		// The reset is on the same day as the message is read.
		reset, now = reset.Add(12*time.Hour), now.Add(12*time.Hour)
	}
	fs, _ := failures(t, StreamCodex, stream, now)
	if len(fs) != 1 || fs[0].Class != agentbridge.FailureQuota || fs[0].RetryAt != agentbridge.FormatTime(reset.Add(time.Minute)) {
		t.Fatalf("failures %+v, want one quota due %s", fs, agentbridge.FormatTime(reset.Add(time.Minute)))
	}
	at, ok := codexRetryAt("or try again at Dec 8th, 2026 1:05 AM.", now)
	if !ok || !at.Equal(time.Date(2026, 12, 8, 1, 6, 0, 0, time.Local)) {
		t.Errorf("a reset on another day: %v %v", at, ok)
	}
	fs, _ = failures(t, StreamCodex, fixtureText(t, StreamCodex, "insufficient-quota"), now)
	if len(fs) != 1 || fs[0].Class != agentbridge.FailureQuota || fs[0].RetryAt != "" {
		t.Errorf("an exhausted quota: failures %+v, want one quota without a time", fs)
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
