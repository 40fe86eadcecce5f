package fakemodel_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// A limit marker is answered with the vendor's usage-limit error (status,
// headers, body) for its window, on its own API only, and served after.
func TestLimitMarker(t *testing.T) {
	t.Parallel()
	s := fakemodel.Start(t, "")
	post := func(path, body string) *http.Response {
		t.Helper()
		resp, err := http.Post(s.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	marker := fakemodel.LimitMarker(fakemodel.Anthropic, 2*time.Second)
	resp := post("/v1/messages", `{"model":"m","messages":[{"role":"user","content":"hi `+marker+`"}]}`)
	var body struct {
		Type  string                `json:"type"`
		Error struct{ Type string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 429 || resp.Header.Get("retry-after") == "" || resp.Header.Get("anthropic-ratelimit-requests-reset") == "" ||
		body.Type != "error" || body.Error.Type != "rate_limit_error" {
		t.Fatalf("anthropic: %d %v %+v", resp.StatusCode, resp.Header, body)
	}
	// codex's fake is not limited by claude's marker.
	if resp := post("/v1/responses", `{"model":"m","input":"hi `+marker+`"}`); resp.StatusCode != 200 {
		t.Fatalf("openai with anthropic's marker: %d", resp.StatusCode)
	}
	om := fakemodel.LimitMarker(fakemodel.OpenAI, time.Minute)
	resp = post("/v1/responses", `{"model":"m","input":"hi `+om+`"}`)
	var oe struct {
		Error struct {
			Type     string `json:"type"`
			ResetsAt int64  `json:"resets_at"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&oe)
	if resp.StatusCode != 429 || oe.Error.Type != "usage_limit_reached" || oe.Error.ResetsAt < time.Now().Unix() {
		t.Fatalf("openai: %d %+v", resp.StatusCode, oe)
	}
	gm := fakemodel.LimitMarker(fakemodel.Gemini, time.Minute)
	resp = post("/v1beta/models/g:generateContent", `{"contents":[{"parts":[{"text":"hi `+gm+`"}]}]}`)
	var ge struct {
		Error struct {
			Status  string           `json:"status"`
			Details []map[string]any `json:"details"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&ge)
	if resp.StatusCode != 429 || ge.Error.Status != "RESOURCE_EXHAUSTED" || len(ge.Error.Details) != 3 {
		t.Fatalf("gemini: %d %+v", resp.StatusCode, ge)
	}
	cm := fakemodel.LimitMarker(fakemodel.OpenAIChat, time.Minute)
	resp = post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi `+cm+`"}]}`)
	var ce struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&ce)
	// The wait is what is left of the window, in whole seconds.
	wait := resp.Header.Get("retry-after")
	if resp.StatusCode != 429 || ce.Error.Code != "rate_limit_exceeded" || (wait != "60" && wait != "59") ||
		!strings.Contains(ce.Error.Message, "Please try again in "+map[string]string{"60": "1m0s", "59": "59s"}[wait]+".") ||
		resp.Header.Get("x-ratelimit-reset-requests") == "" {
		t.Fatalf("chat completions: %d %v %+v", resp.StatusCode, resp.Header, ce)
	}
	// The Responses API's marker does not limit Chat Completions.
	if resp := post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi `+om+`"}]}`); resp.StatusCode != 200 {
		t.Fatalf("chat completions with the responses marker: %d", resp.StatusCode)
	}
	testutil.WaitFor(t, 10*time.Second, "anthropic's limit to reset", func() bool {
		resp, err := http.Post(s.URL()+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi `+marker+`"}]}`))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	// EndLimits ends the chat marker's minute early.
	s.EndLimits()
	if resp := post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi `+cm+`"}]}`); resp.StatusCode != 200 {
		t.Fatalf("chat completions after EndLimits: %d", resp.StatusCode)
	}
}
