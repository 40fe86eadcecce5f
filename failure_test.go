package agentbridge

import (
	"testing"
	"time"
)

// The classes the pinned CLIs' and agents' own words fall into (contract
// 8.5); docs/failures.md lists where each wording was seen.
func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		msg    string
		want   string
	}{
		{429, "", FailureQuota},
		{401, "", FailureAuth},
		{403, "", FailureAuth},
		{503, "", FailureUnreachable},
		{0, "claude hit a usage limit (HTTP 429 rate_limit)", FailureQuota},
		{0, "API Error: Request rejected (429) · This request would exceed the rate limit for your organization", FailureQuota},
		{0, "Quota exceeded. Check your plan and billing details.", FailureQuota},
		{0, "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro) or try again at 2:38 PM.", FailureQuota},
		{0, "You exceeded your current quota, please check your plan and billing details. RESOURCE_EXHAUSTED", FailureQuota},
		{0, "Invalid API key · Fix external API key", FailureAuth},
		{0, "unexpected status 401 Unauthorized: invalid x-api-key", FailureAuth},
		{0, "Authentication required", FailureAuth},
		{0, "API key not valid. Please pass a valid API key.", FailureAuth},
		{0, "API Error: Connection refused", FailureUnreachable},
		{0, "Connection failed: error sending request for url", FailureUnreachable},
		{0, "We’re currently experiencing high demand, which may cause temporary errors.", FailureUnreachable},
		{0, "API Error: 500 upstream exploded", FailureUnreachable},
		{0, "The adapter exited with code 2.", FailureCrash},
		{0, "", FailureCrash},
		{400, "the request was malformed", FailureCrash},
	} {
		if got := Classify(tc.status, tc.msg); got != tc.want {
			t.Errorf("Classify(%d, %q) = %s, want %s", tc.status, tc.msg, got, tc.want)
		}
	}
}

// A failure reads "quota until 15:04" on the day, with the date after.
func TestFailureSummary(t *testing.T) {
	t.Parallel()
	loc := time.FixedZone("X", 3600)
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, loc)
	f := Failure{Class: FailureQuota, RetryAt: FormatTime(now.Add(5*time.Hour + 4*time.Minute))}
	if got := f.Summary(now, loc); got != "quota until 15:04" {
		t.Errorf("Summary = %q", got)
	}
	f.RetryAt = FormatTime(now.Add(24 * time.Hour))
	if got := f.Summary(now, loc); got != "quota until Dec 8 10:00" {
		t.Errorf("Summary a day later = %q", got)
	}
	if got := (Failure{Class: FailureAuth}).Summary(now, loc); got != "auth" {
		t.Errorf("Summary without a time = %q", got)
	}
	if got := HandedReason("codex", Failure{Class: FailureQuota, RetryAt: FormatTime(now.Add(time.Hour))}, now, loc); got != "handed to codex: quota until 11:00" {
		t.Errorf("HandedReason = %q", got)
	}
	if got := LimitWaitReason("claude", now.Add(time.Hour), now, loc); got != "waiting for claude's limit, until 11:00" {
		t.Errorf("LimitWaitReason = %q", got)
	}
	for _, c := range []string{FailureQuota, FailureAuth, FailureUnreachable} {
		if !(Failure{Class: c}).HandsOver() {
			t.Errorf("%s does not hand over", c)
		}
	}
	for _, c := range []string{FailureCrash, FailureTimeout, FailureCancelled} {
		if (Failure{Class: c}).HandsOver() {
			t.Errorf("%s hands over", c)
		}
	}
}

// A wait request names its holder, fence and an RFC 3339 due time.
func TestClaimWaitRequestValidate(t *testing.T) {
	t.Parallel()
	ok := ClaimWaitRequest{ID: 1, Coordinator: "c1", Instance: "i", Fence: 1, RetryAt: "2026-12-07T15:04:00Z"}
	if due, err := ok.Validate(); err != nil || due.Hour() != 15 || ok.PendingTTLMillis != DefaultPendingTTL.Milliseconds() {
		t.Fatalf("Validate = %v, %v (ttl %d)", due, err, ok.PendingTTLMillis)
	}
	for field, req := range map[string]ClaimWaitRequest{
		"fence":    {Coordinator: "c1", Instance: "i", RetryAt: "2026-12-07T15:04:00Z"},
		"retry_at": {Coordinator: "c1", Instance: "i", Fence: 1, RetryAt: "at three"},
		"instance": {Coordinator: "c1", Fence: 1, RetryAt: "2026-12-07T15:04:00Z"},
	} {
		_, err := req.Validate()
		if e, ok := err.(*Error); !ok || e.Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
}
