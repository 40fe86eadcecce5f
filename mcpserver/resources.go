package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// threadURIPrefix starts every thread resource's URI.
const threadURIPrefix = "bridge://threads/"

// resourceEvents is how many of a thread's latest events its resource
// shows: enough to catch up on a conversation, bounded so that attaching a
// long thread does not flood the model's context (read_thread pages on).
const resourceEvents = 100

// resourcePage is how many threads one resources/list page holds.
const resourcePage = 100

// methodListResources is the MCP method the resource list middleware
// answers.
const methodListResources = "resources/list"

func (s *Server) addResources() {
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: threadURIPrefix + "{id}",
		Name:        "thread",
		Title:       "agent-bridge thread",
		Description: fmt.Sprintf("A thread's latest %d events as readable text: seq, event id, sender, recipient, reply links and content.", resourceEvents),
		MIMEType:    "text/plain",
	}, s.readThreadResource)
	// The SDK lists only resources registered in advance, but threads come
	// and go on the bridge; the list is answered from the bridge instead.
	s.mcp.AddReceivingMiddleware(s.listThreadResources)
}

// listThreadResources answers resources/list with the bridge's threads,
// most recently updated first, a page at a time (the cursor is the last
// thread id of the previous page, as the bridge's own paging).
func (s *Server) listThreadResources(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != methodListResources {
			return next(ctx, method, req)
		}
		var cursor string
		if r, ok := req.(*mcp.ListResourcesRequest); ok && r.Params != nil {
			cursor = r.Params.Cursor
		}
		threads, err := s.c.Threads(ctx, cursor, resourcePage)
		if err != nil {
			return nil, s.toolError(err)
		}
		res := &mcp.ListResourcesResult{Resources: make([]*mcp.Resource, 0, len(threads))}
		for _, th := range threads {
			res.Resources = append(res.Resources, threadResource(th))
		}
		if len(threads) == resourcePage {
			res.NextCursor = threads[len(threads)-1].ID
		}
		return res, nil
	}
}

func threadResource(th agentbridge.Thread) *mcp.Resource {
	return &mcp.Resource{
		URI:         threadURIPrefix + th.ID,
		Name:        th.ID,
		Title:       th.Name,
		Description: fmt.Sprintf("Thread %q: %d events, updated %s.", th.Name, th.EventCount, th.UpdatedAt),
		MIMEType:    "text/plain",
	}
}

// readThreadResource renders bridge://threads/{id}: a header naming the
// thread, then its latest events.
func (s *Server) readThreadResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, threadURIPrefix)
	if !ok || !agentbridge.ThreadIDPattern.MatchString(id) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	th, err := s.c.Thread(ctx, id)
	if err != nil {
		var e *agentbridge.Error
		if errors.As(err, &e) && e.Code == agentbridge.ECodeThreadNotFound {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, s.toolError(err)
	}
	events, err := s.c.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: id, After: -1, Tail: resourceEvents})
	if err != nil {
		return nil, s.toolError(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Thread %s %q: %d events, last seq %d, updated %s.\n", th.ID, th.Name, th.EventCount, th.LastSeq, th.UpdatedAt)
	if n := len(events); n > 0 && events[0].Seq > 1 {
		fmt.Fprintf(&b, "Showing the last %d events; read_thread with after reads earlier ones.\n", n)
	}
	b.WriteString("\n")
	writeEvents(&b, events)
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: b.String()}}}, nil
}
