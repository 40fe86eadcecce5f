package fakemodel

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	return postWith(t, url, "x-api-key", key, body)
}

// postWith posts body to url with the key in the header named header.
func postWith(t *testing.T, url, header, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(header, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMessagesStreamTextAndTool(t *testing.T) {
	t.Parallel()
	s := Start(t, "")
	s.Push(Reply{Text: "hello there"}, Reply{Tool: &ToolCall{Name: "Bash", Input: map[string]string{"command": "echo hi"}}, Usage: Usage{InputTokens: 7, OutputTokens: 3}})
	code, body := post(t, s.URL()+"/v1/messages", "k", `{"model":"claude-x","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"question one"}]}`)
	if code != 200 || !strings.Contains(body, "event: message_start") || !strings.Contains(body, `"text":"hello there"`) || !strings.Contains(body, `"stop_reason":"end_turn"`) {
		t.Fatalf("text turn: %d %s", code, body)
	}
	code, body = post(t, s.URL()+"/v1/messages", "k", `{"model":"claude-x","stream":true,"messages":[]}`)
	if code != 200 || !strings.Contains(body, `"name":"Bash"`) || !strings.Contains(body, `"partial_json":"{\"command\":\"echo hi\"}"`) || !strings.Contains(body, `"stop_reason":"tool_use"`) {
		t.Fatalf("tool turn: %d %s", code, body)
	}
	calls := s.Calls()
	if len(calls) != 2 || !calls[0].Contains("question one") || calls[0].Model != "claude-x" || !calls[0].Stream || calls[1].Tool != "Bash" {
		t.Fatalf("log: %+v", calls)
	}
	if got := calls[0].ToolNames(); len(got) != 1 || got[0] != "Bash" {
		t.Fatalf("tool names %v", got)
	}
	if want := DefaultUsage.Add(Usage{InputTokens: 7, OutputTokens: 3}); s.Served() != want || s.ServedSince(1) != (Usage{InputTokens: 7, OutputTokens: 3}) {
		t.Fatalf("served %+v, want %+v", s.Served(), want)
	}
}

func TestResponsesNamespaceToolAndErrors(t *testing.T) {
	t.Parallel()
	s := Start(t, "good")
	s.Push(Reply{Tool: &ToolCall{Name: "mcp__bridge__post", Input: map[string]string{"content": "hi"}}}, Reply{Status: 500, Error: "upstream exploded"})
	tools := `"tools":[{"type":"namespace","name":"mcp__bridge","tools":[{"type":"function","name":"post"}]}]`
	code, body := post(t, s.URL()+"/v1/responses", "bad", `{"model":"gpt-x","stream":true,`+tools+`}`)
	if code != 401 || !strings.Contains(body, "invalid x-api-key") {
		t.Fatalf("bad key: %d %s", code, body)
	}
	code, body = post(t, s.URL()+"/v1/responses", "good", `{"model":"gpt-x","stream":true,`+tools+`}`)
	if code != 200 || !strings.Contains(body, `"namespace":"mcp__bridge"`) || !strings.Contains(body, `"name":"post"`) || !strings.Contains(body, "event: response.completed") {
		t.Fatalf("namespace call: %d %s", code, body)
	}
	code, body = post(t, s.URL()+"/v1/responses", "good", `{"stream":true}`)
	if code != 500 || !strings.Contains(body, "upstream exploded") {
		t.Fatalf("500: %d %s", code, body)
	}
	code, _ = post(t, s.URL()+"/v1/models", "good", ``)
	if code != 404 {
		t.Fatalf("other path: %d", code)
	}
	reqs := s.Requests()
	if len(reqs) != 4 || reqs[0].Status != 401 || reqs[1].Usage != DefaultUsage || reqs[2].Usage != (Usage{}) || reqs[3].API != Other {
		t.Fatalf("log: %+v", reqs)
	}
	if got := reqs[1].ToolNames(); len(got) != 1 || got[0] != "mcp__bridge__post" {
		t.Fatalf("tool names %v", got)
	}
}

// A test marks the log with len(Requests()) before a turn; a request to
// another path before the mark must not hide the turn's call.
func TestCallsSinceCountsRequestsNotCalls(t *testing.T) {
	t.Parallel()
	s := Start(t, "")
	if code, _ := post(t, s.URL()+"/v1/models", "k", ``); code != 404 {
		t.Fatalf("other path: %d", code)
	}
	mark := len(s.Requests())
	post(t, s.URL()+"/v1/messages", "k", `{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"after the mark"}]}`)
	if got := s.CallsSince(mark); len(got) != 1 || !got[0].Contains("after the mark") {
		t.Fatalf("calls since %d: %+v", mark, got)
	}
	if got := s.CallsSince(len(s.Requests())); len(got) != 0 {
		t.Fatalf("calls since the end: %+v", got)
	}
}

func TestSlowReplyEndsWhenClientLeaves(t *testing.T) {
	t.Parallel()
	s := Start(t, "")
	s.SetDefault(Reply{Text: "late", Delay: time.Minute})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(`{}`))
	start := time.Now()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a one-minute reply answered within 200 ms")
	}
	// Close waits for the handler, which must notice the client left.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("the slow reply held the server for %v", time.Since(start))
	}
}

func TestResponder(t *testing.T) {
	t.Parallel()
	s := Start(t, "")
	s.SetResponder(func(r Request) (Reply, bool) {
		if r.Contains("ping") {
			return Reply{Text: "pong"}, true
		}
		return Reply{}, false
	})
	s.Push(Reply{Text: "queued"})
	if _, body := post(t, s.URL()+"/v1/messages", "", `{"messages":"ping"}`); !strings.Contains(body, "pong") {
		t.Fatal(body)
	}
	if _, body := post(t, s.URL()+"/v1/messages", "", `{"messages":"x"}`); !strings.Contains(body, "queued") {
		t.Fatal(body)
	}
	if _, body := post(t, s.URL()+"/v1/messages", "", `{"messages":"x"}`); !strings.Contains(body, `"text":"ok"`) {
		t.Fatal(body)
	}
}

func TestThinking(t *testing.T) {
	t.Parallel()
	s := Start(t, "")
	s.SetDefault(Reply{Thinking: "hmm", Text: "done"})
	if _, body := post(t, s.URL()+"/v1/messages", "", `{"stream":true}`); !strings.Contains(body, `"thinking":"hmm","type":"thinking_delta"`) || !strings.Contains(body, `"text":"done"`) {
		t.Errorf("messages: %s", body)
	}
	if _, body := post(t, s.URL()+"/v1/responses", "", `{"stream":true}`); !strings.Contains(body, `"type":"reasoning"`) || !strings.Contains(body, `"text":"hmm","type":"summary_text"`) {
		t.Errorf("responses: %s", body)
	}
}

// TestGenerativeLanguage: Gemini CLI's endpoints, the key it sends
// (x-goog-api-key), the model from the path, SSE data lines with the usage
// in the last, a functionCall part, and countTokens outside the script.
func TestGenerativeLanguage(t *testing.T) {
	t.Parallel()
	s := Start(t, "good")
	s.Push(Reply{Thinking: "hmm", Text: "hello gemini", Usage: Usage{InputTokens: 11, OutputTokens: 4}},
		Reply{Tool: &ToolCall{Name: "run_shell_command", Input: map[string]string{"command": "echo hi"}}}, Reply{Status: 429})
	goog := func(path, key, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-goog-api-key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const stream = "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
	if code, body := goog(stream, "bad", `{}`); code != 401 || !strings.Contains(body, `"status":"UNAUTHENTICATED"`) {
		t.Fatalf("bad key: %d %s", code, body)
	}
	code, body := goog(stream, "good", `{"contents":[{"role":"user","parts":[{"text":"question one"}]}],"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`)
	if code != 200 || !strings.HasPrefix(body, "data: ") || !strings.Contains(body, `"thought":true`) || !strings.Contains(body, `"text":"hello gemini"`) ||
		!strings.Contains(body, `"finishReason":"STOP"`) || !strings.Contains(body, `"promptTokenCount":11`) || !strings.Contains(body, `"candidatesTokenCount":4`) {
		t.Fatalf("stream: %d %s", code, body)
	}
	if code, body := goog("/v1beta/models/gemini-x:countTokens", "good", `{"contents":[]}`); code != 200 || !strings.Contains(body, `"totalTokens"`) {
		t.Fatalf("countTokens: %d %s", code, body)
	}
	code, body = goog("/v1beta/models/gemini-lite:generateContent", "good", `{}`)
	if code != 200 || !strings.Contains(body, `"functionCall":{"args":{"command":"echo hi"},"name":"run_shell_command"}`) {
		t.Fatalf("generateContent: %d %s", code, body)
	}
	if code, body := goog(stream, "good", `{}`); code != 429 || !strings.Contains(body, `"status":"RESOURCE_EXHAUSTED"`) {
		t.Fatalf("429: %d %s", code, body)
	}
	calls := s.Calls() // the refused one, the three answered; not countTokens
	if len(calls) != 4 || calls[1].API != Gemini || calls[1].Model != "gemini-x" || !calls[1].Stream || calls[1].Key != "good" ||
		calls[2].Model != "gemini-lite" || calls[2].Stream || calls[2].Tool != "run_shell_command" || calls[3].Status != 429 {
		t.Fatalf("calls: %+v", calls)
	}
	if got := calls[1].ToolNames(); len(got) != 1 || got[0] != "run_shell_command" {
		t.Fatalf("tool names %v", got)
	}
}

// TestChatCompletions: OpenCode's API for an OpenAI-compatible provider.
// A stream is data lines of chat.completion.chunk ending in [DONE], the
// usage in a chunk of its own when asked for; a tool call comes as its name,
// then its arguments; errors are in OpenAI's shape.
func TestChatCompletions(t *testing.T) {
	t.Parallel()
	s := Start(t, "good")
	s.Push(Reply{Thinking: "hmm", Text: "hello chat", Usage: Usage{InputTokens: 11, OutputTokens: 4, CacheReadInputTokens: 2}},
		Reply{Tool: &ToolCall{Name: "bash", Input: map[string]string{"command": "echo hi"}}}, Reply{Text: "plain"})
	chat := func(key, body string) (int, string) {
		t.Helper()
		return postWith(t, s.URL()+"/v1/chat/completions", "Authorization", "Bearer "+key, body)
	}
	if code, body := chat("bad", `{}`); code != 401 || !strings.Contains(body, `"param":null`) || !strings.Contains(body, `"type":"authentication_error"`) {
		t.Fatalf("bad key: %d %s", code, body)
	}
	code, body := chat("good", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"tools":[{"type":"function","function":{"name":"bash"}}],"messages":[{"role":"user","content":"question one"}]}`)
	if code != 200 || !strings.HasPrefix(body, "data: ") || !strings.Contains(body, `"object":"chat.completion.chunk"`) ||
		!strings.Contains(body, `"reasoning_content":"hmm"`) || !strings.Contains(body, `"content":"hello chat"`) || !strings.Contains(body, `"finish_reason":"stop"`) ||
		!strings.Contains(body, `"prompt_tokens":13`) || !strings.Contains(body, `"cached_tokens":2`) || !strings.Contains(body, `"completion_tokens":4`) ||
		!strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream: %d %s", code, body)
	}
	code, body = chat("good", `{"model":"m","stream":true,"messages":[]}`)
	if code != 200 || !strings.Contains(body, `"tool_calls":[{"function":{"arguments":"","name":"bash"},"id":"call_fake000003","index":0,"type":"function"}]`) ||
		!strings.Contains(body, `"tool_calls":[{"function":{"arguments":"{\"command\":\"echo hi\"}"},"index":0}]`) ||
		!strings.Contains(body, `"finish_reason":"tool_calls"`) || strings.Contains(body, `"usage"`) {
		t.Fatalf("tool call without usage asked for: %d %s", code, body)
	}
	code, body = chat("good", `{"model":"m","messages":[]}`)
	if code != 200 || !strings.Contains(body, `"object":"chat.completion"`) || !strings.Contains(body, `"content":"plain"`) || !strings.Contains(body, `"total_tokens":1234`) {
		t.Fatalf("not streamed: %d %s", code, body)
	}
	calls := s.Calls()
	if len(calls) != 4 || calls[1].API != OpenAIChat || calls[1].Model != "m" || !calls[1].Stream || calls[1].Key != "good" || calls[2].Tool != "bash" {
		t.Fatalf("calls: %+v", calls)
	}
	if got := calls[1].ToolNames(); len(got) != 1 || got[0] != "bash" {
		t.Fatalf("tool names %v", got)
	}
}
