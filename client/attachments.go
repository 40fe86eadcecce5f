package client

import (
	"context"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// UploadAttachment stores the bytes of body as an attachment of thread
// named name (POST /threads/{id}/attachments, the raw body with ?name=)
// and returns it as stored: its id, the type the bridge sniffed, its
// size. A file over the bridge's limit is too_large. An *os.File's size
// is sent ahead, so that the bridge refuses one over its limit before
// reading it; any other reader is sent as it comes.
func (c *Client) UploadAttachment(ctx context.Context, thread, name string, body io.Reader) (agentbridge.Attachment, error) {
	q := url.Values{}
	q.Set("name", name)
	var out struct {
		Attachment agentbridge.Attachment `json:"attachment"`
	}
	err := c.do(ctx, request{op: "upload attachment", method: http.MethodPost, path: threadPath(thread, "attachments"),
		query: q, raw: body, rawType: "application/octet-stream", rawLen: readerLen(body), wantOut: &out})
	return out.Attachment, err
}

// readerLen is how many bytes a regular file has left from its offset,
// -1 for any other reader (or a file it cannot tell).
func readerLen(r io.Reader) int64 {
	f, ok := r.(*os.File)
	if !ok {
		return -1
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return -1
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return -1
	}
	return st.Size() - off
}

// DownloadAttachment opens attachment id (GET /attachments/{id}): its
// bytes, which the caller must close, and what it is, read from the
// answer's headers (the name from Content-Disposition, the sniffed type,
// the size). An id this credential cannot see is attachment_not_found.
func (c *Client) DownloadAttachment(ctx context.Context, id string) (io.ReadCloser, agentbridge.Attachment, error) {
	resp, err := c.send(ctx, request{op: "download attachment", method: http.MethodGet, path: "/attachments/" + url.PathEscape(id)})
	if err != nil {
		return nil, agentbridge.Attachment{}, err
	}
	a := agentbridge.Attachment{ID: id, Type: resp.Header.Get("Content-Type"), Size: resp.ContentLength}
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		a.Name = params["filename"]
	}
	if a.Size < 0 {
		if n, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); err == nil {
			a.Size = n
		}
	}
	return resp.Body, a, nil
}
