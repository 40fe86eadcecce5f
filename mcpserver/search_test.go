package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestSearchTool: the search tool finds a decision in another thread, with
// its thread, id and snippet; a query the bridge cannot parse comes back as
// a tool error carrying the bridge's sentence.
func TestSearchTool(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"plan", "chat"} {
		if _, err := e.bridge.CreateThread(t.Context(), agentbridge.CreateThreadRequest{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
	}
	dec, err := e.bridge.Append(t.Context(), "plan", agentbridge.EventInput{From: "user", Content: json.RawMessage(`"Decision: we ship the parser on Friday."`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Hits []struct {
			Thread  string `json:"thread"`
			EventID string `json:"event_id"`
			Snippet string `json:"snippet"`
		} `json:"hits"`
	}
	text := e.call("search", map[string]any{"query": "parser decision"}, &out)
	if len(out.Hits) != 1 || out.Hits[0].Thread != "plan" || out.Hits[0].EventID != dec.ID || !strings.Contains(out.Hits[0].Snippet, "ship the parser") ||
		!strings.Contains(text, "Decision: we ship the parser on Friday.") {
		t.Fatalf("search = %+v, %q", out, text)
	}
	if msg := e.callErr("search", map[string]any{"query": `"unbalanced`}); !strings.Contains(msg, "not closed") {
		t.Fatalf("a bad query: %q", msg)
	}
}
