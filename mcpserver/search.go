package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// searchIn is the search tool's arguments.
type searchIn struct {
	Query  string `json:"query" jsonschema:"what to find: words (all must match), a \"quoted phrase\", or a prefix such as decid* (finds decide, decided, decision)"`
	Thread string `json:"thread,omitempty" jsonschema:"only this thread's events (its id)"`
	From   string `json:"from,omitempty" jsonschema:"only events from this participant, such as 'user'"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many hits at most (default 20, at most 100)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"for the next page: the next_cursor of the previous answer"`
}

// searchHit is one hit as a model needs it.
type searchHit struct {
	Thread     string `json:"thread"`
	ThreadName string `json:"thread_name,omitempty"`
	EventID    string `json:"event_id"`
	Seq        int64  `json:"seq"`
	From       string `json:"from"`
	TS         string `json:"ts"`
	Snippet    string `json:"snippet"`
	Text       string `json:"text,omitempty"`
}

type searchOut struct {
	Hits []searchHit `json:"hits"`
	// NextCursor continues the search, empty when there is no more.
	NextCursor string `json:"next_cursor,omitempty"`
}

// addSearchTool offers search: the bridge's GET /search over the threads
// this participant's credential may read.
func (s *Server) addSearchTool() {
	no := false
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  "search",
		Title: "Search the threads",
		Description: "Search every thread you may read for earlier messages and decisions, newest first. " +
			"Each hit gives the thread, the event's id and seq, who wrote it and when, and the text around the match; read_thread shows the rest of its thread.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no},
	}, s.search)
}

func (s *Server) search(ctx context.Context, _ *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, searchOut, error) {
	if strings.TrimSpace(in.Query) == "" {
		return nil, searchOut{}, invalidArg("query", "say what to search for: words, a \"phrase\" or a prefix such as decid*")
	}
	limit, err := boundLimit(in.Limit, agentbridge.DefaultSearchLimit, agentbridge.MaxSearchLimit)
	if err != nil {
		return nil, searchOut{}, err
	}
	if in.Thread != "" {
		if err := checkThreadArg(in.Thread); err != nil {
			return nil, searchOut{}, err
		}
	}
	page, err := s.c.Search(ctx, client.SearchParams{Q: in.Query, Thread: in.Thread, From: in.From, Limit: limit, Cursor: in.Cursor})
	if err != nil {
		return nil, searchOut{}, s.toolError(err)
	}
	out := searchOut{Hits: make([]searchHit, 0, len(page.Results)), NextCursor: page.Next}
	var b strings.Builder
	if len(page.Results) == 0 {
		fmt.Fprintf(&b, "No event matches %q.", in.Query)
	}
	for _, r := range page.Results {
		h := searchHit{Thread: r.Thread, ThreadName: r.ThreadName, EventID: r.Event.ID, Seq: r.Event.Seq, From: r.Event.From, TS: r.Event.TS, Snippet: r.Snippet}
		if text := r.Event.Text(); len(text) <= 2000 {
			h.Text = text
		}
		out.Hits = append(out.Hits, h)
		fmt.Fprintf(&b, "thread %s (%q) seq %d, event %s, from %s at %s:\n  %s\n", r.Thread, r.ThreadName, r.Event.Seq, r.Event.ID, r.Event.From, shortTime(r.Event.TS), r.Snippet)
	}
	if page.Next != "" {
		fmt.Fprintf(&b, "More hits: call again with cursor=%q.", page.Next)
	}
	return textResult(b.String()), out, nil
}
