package fakemodel

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// Usage limits (contract 8.5): a request whose body carries a limit
// marker, LimitMarker(api, d), is answered with that vendor's real
// usage-limit error — status, headers and body as the service sends them
// (docs/failures.md says where each shape comes from) — from the first
// such request until d later; after that the marker is served as any
// request. The marker names the API it limits, so a thread whose history
// holds claude's marker does not limit codex, its fallback.

// limitMarker matches a marker: the API and the window in seconds.
var limitMarker = regexp.MustCompile(`fakemodel-limit:(anthropic|openai-chat|openai|gemini):(\d{1,6})`)

// LimitMarker is the text that makes api's server answer with its usage
// limit for d, from the first request carrying it.
func LimitMarker(api API, d time.Duration) string {
	return fmt.Sprintf("fakemodel-limit:%s:%d", api, int(d.Seconds()))
}

// EndLimits ends every usage-limit window now: the markers seen so far
// are served as any request from then on.
func (s *Server) EndLimits() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for k := range s.limits {
		s.limits[k] = now
	}
}

// limitFor returns when req's usage limit resets, or ok false when req
// carries no marker for its API or its window has passed; s.mu is held.
func (s *Server) limitFor(req Request) (reset time.Time, ok bool) {
	for _, m := range limitMarker.FindAllSubmatch(req.Body, -1) {
		api := API(m[1])
		if api != req.API {
			continue
		}
		secs, _ := strconv.Atoi(string(m[2]))
		key := string(m[0])
		if s.limits == nil {
			s.limits = map[string]time.Time{}
		}
		reset, seen := s.limits[key]
		if !seen {
			reset = req.Time.Add(time.Duration(secs) * time.Second)
			s.limits[key] = reset
		}
		if req.Time.Before(reset) {
			return reset, true
		}
	}
	return time.Time{}, false
}

// writeLimit answers req with its API's usage-limit error, resetting at
// reset.
func writeLimit(w http.ResponseWriter, req Request, reset time.Time) {
	wait := max(int(time.Until(reset).Round(time.Second).Seconds()), 1)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	var body any
	switch req.API {
	case Anthropic:
		// An API key's organization rate limit: retry-after in seconds,
		// each limit's reset as RFC 3339 (docs.claude.com, "Rate limits").
		at := reset.UTC().Format(time.RFC3339)
		h.Set("retry-after", strconv.Itoa(wait))
		h.Set("x-should-retry", "true")
		h.Set("request-id", fmt.Sprintf("req_fake%06d", req.N))
		for _, l := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
			h.Set("anthropic-ratelimit-"+l+"-limit", "50")
			h.Set("anthropic-ratelimit-"+l+"-remaining", "0")
			h.Set("anthropic-ratelimit-"+l+"-reset", at)
		}
		body = map[string]any{"type": "error", "request_id": fmt.Sprintf("req_fake%06d", req.N), "error": map[string]any{
			"type": "rate_limit_error",
			"message": "This request would exceed the rate limit for your organization (fake-org) of 50 requests per minute. " +
				"For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. " +
				"Please reduce the prompt length or the maximum tokens requested, or try again later.",
		}}
	case OpenAI:
		// A ChatGPT plan's usage limit, as the Codex backend answers it:
		// the type codex parses, the reset as Unix seconds, and the
		// x-codex-* rate-limit headers.
		h.Set("x-codex-primary-used-percent", "100")
		h.Set("x-codex-primary-window-minutes", "300")
		h.Set("x-codex-primary-reset-at", strconv.FormatInt(reset.Unix(), 10))
		body = map[string]any{"error": map[string]any{
			"type": "usage_limit_reached", "message": "The usage limit has been reached",
			"plan_type": "plus", "resets_at": reset.Unix(), "resets_in_seconds": wait,
		}}
	case OpenAIChat:
		// An API key's rate limit on the Chat Completions API: the
		// x-ratelimit-* headers (resets as durations, "6m0s"), retry-after
		// in seconds and the rate_limit_exceeded error naming the wait.
		reset := (time.Duration(wait) * time.Second).String()
		h.Set("retry-after", strconv.Itoa(wait))
		h.Set("x-request-id", fmt.Sprintf("req_fake%06d", req.N))
		for _, l := range []string{"requests", "tokens"} {
			h.Set("x-ratelimit-limit-"+l, "500")
			h.Set("x-ratelimit-remaining-"+l, "0")
			h.Set("x-ratelimit-reset-"+l, reset)
		}
		body = map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("Rate limit reached for %s in organization org-fake on requests per min (RPM): Limit 500, Used 500, Requested 1. "+
				"Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.", cmp.Or(req.Model, "gpt-fake"), reset),
			"type": "requests", "param": nil, "code": "rate_limit_exceeded",
		}}
	default:
		// Gemini: RESOURCE_EXHAUSTED with the quota that ran out and
		// when to retry (google.rpc.RetryInfo).
		body = map[string]any{"error": map[string]any{
			"code": http.StatusTooManyRequests, "status": "RESOURCE_EXHAUSTED",
			"message": "You exceeded your current quota, please check your plan and billing details. " +
				"For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
			"details": []any{
				map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{
					"quotaMetric":     "generativelanguage.googleapis.com/generate_content_free_tier_requests",
					"quotaId":         "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
					"quotaDimensions": map[string]any{"location": "global", "model": req.Model},
					"quotaValue":      "50",
				}}},
				map[string]any{"@type": "type.googleapis.com/google.rpc.Help", "links": []any{map[string]any{
					"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}}},
				map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": strconv.Itoa(wait) + "s"},
			},
		}}
	}
	w.WriteHeader(http.StatusTooManyRequests)
	_ = json.NewEncoder(w).Encode(body)
}
