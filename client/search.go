package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// SearchParams are the parameters of GET /search: Q is the query as a
// person types it; the rest are optional ("" or 0 for none).
type SearchParams struct {
	Q, Thread, From, Type, Before, After, Cursor string
	Limit                                        int
}

// Search asks the bridge to search every thread this client's credential
// may read (GET /search); a query the bridge cannot parse is a bad_query
// error carrying its sentence.
func (c *Client) Search(ctx context.Context, p SearchParams) (agentbridge.SearchPage, error) {
	q := url.Values{"q": {p.Q}}
	for k, v := range map[string]string{"thread": p.Thread, "from": p.From, "type": p.Type, "before": p.Before, "after": p.After, "cursor": p.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	var out agentbridge.SearchPage
	err := c.do(ctx, request{op: "search", method: http.MethodGet, path: "/search", query: q, wantOut: &out})
	return out, err
}

// Schedules lists the schedules of thread ("" for every thread), each with
// its next due time (GET /schedules).
func (c *Client) Schedules(ctx context.Context, thread string) ([]agentbridge.Schedule, error) {
	var q url.Values
	if thread != "" {
		q = url.Values{"thread": {thread}}
	}
	var out struct {
		Schedules []agentbridge.Schedule `json:"schedules"`
	}
	err := c.do(ctx, request{op: "list schedules", method: http.MethodGet, path: "/schedules", query: q, wantOut: &out})
	return out.Schedules, err
}
