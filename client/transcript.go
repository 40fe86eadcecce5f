package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Transcript returns a thread's transcript in format "md" or "json"
// (GET /threads/{id}/transcript): its latest scene, or its messages.
func (c *Client) Transcript(ctx context.Context, thread, format string) ([]byte, error) {
	q := url.Values{}
	q.Set("format", format)
	resp, err := c.send(ctx, request{op: "read transcript", method: http.MethodGet, path: threadPath(thread, "transcript"), query: q})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	return b, nil
}
