package agentbridge

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Why a run failed (contract 8.5): every failed run carries a Failure, on
// its invocation, its receipt and the coordinator's /metrics. The class
// decides what happens next: quota, auth and unreachable hand the trigger
// to the agent's fallback (Failure.HandsOver), and a quota failure with a
// RetryAt waits for the limit when there is none.

// Failure classes.
const (
	// FailureQuota is a usage or rate limit of the agent's model service.
	FailureQuota = "quota"
	// FailureAuth is a refused credential: a bad or expired key, no login.
	FailureAuth = "auth"
	// FailureUnreachable is a model service that cannot be reached or is
	// down: connection refused, DNS, a 5xx or overloaded answer.
	FailureUnreachable = "unreachable"
	// FailureCrash is any other failure: the agent exited non-zero,
	// could not start, or said something the coordinator cannot place.
	FailureCrash = "crash"
	// FailureTimeout is a run stopped at adapter_timeout_s.
	FailureTimeout = "timeout"
	// FailureCancelled is a run a person stopped.
	FailureCancelled = "cancelled"
)

// FailureClasses lists every class, in the contract's order.
var FailureClasses = []string{FailureQuota, FailureAuth, FailureUnreachable, FailureCrash, FailureTimeout, FailureCancelled}

// ValidFailureClass reports whether s is a failure class.
func ValidFailureClass(s string) bool {
	for _, c := range FailureClasses {
		if c == s {
			return true
		}
	}
	return false
}

// Failure is why a run failed.
type Failure struct {
	// Class is one of the Failure* classes.
	Class string `json:"class"`
	// RetryAt is when the agent's service said it would take requests
	// again (TimeLayout), "" when it did not say.
	RetryAt string `json:"retry_at,omitempty"`
	// Message is the agent's own words for it, one line.
	Message string `json:"message,omitempty"`
}

// HandsOver reports whether a run that failed so goes to the agent's
// fallback: another vendor's agent can answer when this one's service
// refuses (limit, credential) or is gone, not when the agent itself broke.
func (f Failure) HandsOver() bool {
	switch f.Class {
	case FailureQuota, FailureAuth, FailureUnreachable:
		return true
	}
	return false
}

// Retry returns RetryAt as a time; ok is false when it is empty or not a
// time.
func (f Failure) Retry() (t time.Time, ok bool) {
	if f.RetryAt == "" {
		return time.Time{}, false
	}
	t, err := ParseTime(f.RetryAt)
	return t, err == nil
}

// Summary is the failure in a few words for a receipt or a list: "quota
// until 15:04", "auth". The time is shown in loc (the coordinator's local
// time), with the date when it is not today there.
func (f Failure) Summary(now time.Time, loc *time.Location) string {
	s := f.Class
	if t, ok := f.Retry(); ok {
		s += " until " + ClockTime(t, now, loc)
	}
	return s
}

// ClockTime words t for a person who reads it at now: "15:04" on the same
// day in loc, "Jan 2 15:04" otherwise.
func ClockTime(t, now time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.Local
	}
	t, now = t.In(loc), now.In(loc)
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04")
	}
	return t.Format("Jan 2 15:04")
}

// HandedReason is the receipt reason of a run handed to the fallback to
// (contract 8.5): "handed to codex: quota until 15:04".
func HandedReason(to string, f Failure, now time.Time, loc *time.Location) string {
	return "handed to " + to + ": " + f.Summary(now, loc)
}

// LimitWaitReason is the receipt reason of a trigger that waits for
// participant's usage limit: "waiting for claude's limit, until 15:04".
func LimitWaitReason(participant string, until, now time.Time, loc *time.Location) string {
	return fmt.Sprintf("waiting for %s's limit, until %s", participant, ClockTime(until, now, loc))
}

// What the agents say, by class. The patterns are the wording of the
// pinned CLIs and agents and of the services' error bodies they pass on
// (docs/failures.md lists where each was seen); they are matched
// case-insensitively.
var (
	quotaWords = regexp.MustCompile(`(?i)rate[ _-]?limit|quota|usage limit|usage_limit|resource_exhausted|too many requests|hit your limit|credit balance|insufficient_quota|\b429\b`)
	authWords  = regexp.MustCompile(`(?i)authenticat|unauthori[sz]ed|invalid api key|invalid x-api-key|api key not valid|api_key_invalid|incorrect api key|permission_denied|please run /login|not logged in|\b401\b|\b403\b`)
	downWords  = regexp.MustCompile(`(?i)connection refused|econnrefused|connection failed|error sending request|enotfound|getaddrinfo|could not resolve|unable to connect|network is unreachable|connection reset|econnreset|socket hang up|fetch failed|overloaded|high demand|service unavailable|bad gateway|internal server error|\b50[0-4]\b|\b529\b`)
)

// ClassifyStatus is the class of a model service's HTTP error status, ""
// for a status that says nothing (0, a 4xx that is the request's fault).
func ClassifyStatus(status int) string {
	switch {
	case status == 429:
		return FailureQuota
	case status == 401 || status == 403:
		return FailureAuth
	case status >= 500 && status <= 599:
		return FailureUnreachable
	}
	return ""
}

// ClassifyText is the class an agent's error message names, "" when it
// names none of quota, auth or unreachable. Quota is looked for first: a
// limit's message often says "retry", never the reverse.
func ClassifyText(msg string) string {
	switch {
	case strings.TrimSpace(msg) == "":
		return ""
	case quotaWords.MatchString(msg):
		return FailureQuota
	case authWords.MatchString(msg):
		return FailureAuth
	case downWords.MatchString(msg):
		return FailureUnreachable
	}
	return ""
}

// Classify is the class of a failure with HTTP status (0 for none) and
// message: the status when it says, else the message, else crash.
func Classify(status int, msg string) string {
	if c := ClassifyStatus(status); c != "" {
		return c
	}
	if c := ClassifyText(msg); c != "" {
		return c
	}
	return FailureCrash
}
