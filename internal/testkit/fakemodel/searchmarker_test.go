package fakemodel

import (
	"strings"
	"testing"
)

// TestSearchResponder: a prompt with the marker gets a call of the MCP
// search tool with the query after it, and, once the tool's result is in
// the conversation, a reply quoting that result; other prompts go to the
// queue.
func TestSearchResponder(t *testing.T) {
	t.Parallel()
	s := Start(t, "")
	s.SetResponder(SearchResponder("bridge"))
	s.Push(Reply{Text: "queued"})
	ask := `{"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"what did we decide?\n` + SearchMarker + ` parser decision\nthanks"}]}]}`
	if _, body := post(t, s.URL()+"/v1/messages", "", ask); !strings.Contains(body, `"name":"mcp__bridge__search"`) || !strings.Contains(body, `{\"query\":\"parser decision\"}`) {
		t.Fatalf("first turn: %s", body)
	}
	back := `{"stream":true,"messages":[{"role":"user","content":"` + SearchMarker + ` parser decision"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"mcp__bridge__search","input":{"query":"parser decision"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"thread plan: Decision: ship Friday."}]}]}]}`
	if _, body := post(t, s.URL()+"/v1/messages", "", back); !strings.Contains(body, SearchQuoted+"thread plan: Decision: ship Friday.") {
		t.Fatalf("second turn: %s", body)
	}
	// claude hands the model the structured content, and notes of its
	// own after it: the hits are quoted, the question left out.
	hits := `{\"hits\":[{\"thread\":\"c\",\"from\":\"user\",\"text\":\"` + SearchMarker + ` parser decision\"},{\"thread\":\"p\",\"thread_name\":\"plan\",\"from\":\"user\",\"text\":\"Decision: ship Friday.\"}]}\n<note>`
	structured := strings.Replace(back, "thread plan: Decision: ship Friday.", hits, 1)
	if _, body := post(t, s.URL()+"/v1/messages", "", structured); !strings.Contains(body, SearchQuoted+`\"Decision: ship Friday.\" (thread plan, from user)"`) {
		t.Fatalf("structured hits: %s", body)
	}
	if _, body := post(t, s.URL()+"/v1/messages", "", `{"messages":[{"role":"user","content":"hello"}]}`); !strings.Contains(body, "queued") {
		t.Fatalf("a prompt without the marker: %s", body)
	}
}
