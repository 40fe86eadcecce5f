package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// writeChat answers a Chat Completions call (OpenAI's older API, which
// OpenAI-compatible servers speak and OpenCode calls for a custom
// provider), streamed or not. A stream is SSE data lines of
// chat.completion.chunk objects: the role, the thinking as
// reasoning_content (how OpenAI-compatible servers send it), the text, a
// tool call (its name first, then its arguments), the finish reason, the
// usage in a chunk of its own when the request asked for it
// (stream_options.include_usage), and [DONE].
func writeChat(w http.ResponseWriter, req Request, rep Reply) {
	id := fmt.Sprintf("chatcmpl-fake%06d", req.N)
	model := req.Model
	if model == "" {
		model = "gpt-fake"
	}
	finish := "stop"
	var calls []map[string]any
	if rep.Tool != nil {
		finish = "tool_calls"
		calls = []map[string]any{{"id": fmt.Sprintf("call_fake%06d", req.N), "type": "function",
			"function": map[string]any{"name": rep.Tool.Name, "arguments": input(rep.Tool)}}}
	}
	u := rep.Usage
	usage := map[string]any{"prompt_tokens": u.InputTokens + u.CacheReadInputTokens, "completion_tokens": u.OutputTokens,
		"total_tokens":              u.InputTokens + u.CacheReadInputTokens + u.OutputTokens,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.CacheReadInputTokens},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0}}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": rep.Text}
		if rep.Thinking != "" {
			msg["reasoning_content"] = rep.Thinking
		}
		if calls != nil {
			msg["tool_calls"] = calls
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": req.Time.Unix(), "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	s := newSSE(w)
	chunk := func(delta map[string]any, finish any) {
		s.data(map[string]any{"id": id, "object": "chat.completion.chunk", "created": req.Time.Unix(), "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	if rep.Thinking != "" {
		chunk(map[string]any{"reasoning_content": rep.Thinking}, nil)
	}
	if rep.Text != "" {
		chunk(map[string]any{"content": rep.Text}, nil)
	}
	for i, c := range calls {
		fn := c["function"].(map[string]any)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c["id"], "type": "function",
			"function": map[string]any{"name": fn["name"], "arguments": ""}}}}, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": fn["arguments"]}}}}, nil)
	}
	chunk(map[string]any{}, finish)
	var opts struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(req.Body, &opts)
	if opts.StreamOptions.IncludeUsage {
		s.data(map[string]any{"id": id, "object": "chat.completion.chunk", "created": req.Time.Unix(), "model": model,
			"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(s.w, "data: [DONE]\n\n")
	s.flush()
}
