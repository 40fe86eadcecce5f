package mcpserver_test

import (
	"testing"
)

// BenchmarkPostTool measures one post tool call end to end: the SDK client
// over an in-memory transport, the server's checks, the bridge's append
// over HTTP on 127.0.0.1 and its commit to SQLite. Compare with the
// client package's BenchmarkAppend for the MCP layer's share.
func BenchmarkPostTool(b *testing.B) {
	e := newEnv(b)
	e.call("create_thread", map[string]any{"name": "bench", "id": "bench"}, nil)
	args := map[string]any{"thread": "bench", "content": "hello", "to": "codex"}
	for b.Loop() {
		e.call("post", args, nil)
	}
}

// BenchmarkWaitForAnsweredReply measures wait_for_reply when the reply is
// already there: finding the awaited event, opening the thread's stream
// from it and reading up to the reply.
func BenchmarkWaitForAnsweredReply(b *testing.B) {
	e := newEnv(b)
	e.call("create_thread", map[string]any{"name": "bench", "id": "bench"}, nil)
	var p posted
	e.call("post", map[string]any{"thread": "bench", "content": "ping?"}, &p)
	e.message("bench", "codex", "pong", p.ID)
	args := map[string]any{"thread": "bench", "event_id": p.ID}
	for b.Loop() {
		var res waitResult
		e.call("wait_for_reply", args, &res)
		if res.Status != "replied" {
			b.Fatalf("wait_for_reply = %+v", res)
		}
	}
}
