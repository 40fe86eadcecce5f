package client_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestAttachments: a file uploaded from disk comes back byte for byte
// with its name, sniffed type and size; an event may name it; a missing
// id is attachment_not_found; a body over the limit read from a pipe
// (its size unknown ahead) is too_large.
func TestAttachments(t *testing.T) {
	t.Parallel()
	c := startBridge(t, "tok")
	ctx := t.Context()
	if _, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	data := []byte("GIF89a" + strings.Repeat("\x00", 100))
	path := filepath.Join(t.TempDir(), "anim.gif")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := c.UploadAttachment(ctx, "t", "anim.gif", f)
	if err != nil || a.Type != "image/gif" || a.Size != int64(len(data)) || a.Name != "anim.gif" || !agentbridge.AttachmentIDPattern.MatchString(a.ID) {
		t.Fatalf("UploadAttachment = %+v, %v", a, err)
	}
	rc, got, err := c.DownloadAttachment(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(b, data) || got != a {
		t.Fatalf("DownloadAttachment = %+v, %d bytes, %v; want %+v and the bytes", got, len(b), err, a)
	}
	in := msg("user", "see")
	ref, _ := json.Marshal([]agentbridge.Attachment{a})
	in.Meta.Extra = map[string]json.RawMessage{agentbridge.MetaAttachments: ref}
	if _, err := c.Append(ctx, "t", in, ""); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.DownloadAttachment(ctx, "sha256:"+strings.Repeat("0", 64))
	wantCode(t, err, agentbridge.ECodeAttachmentNotFound)
	pr, pw := io.Pipe()
	go func() {
		chunk := make([]byte, 1<<20)
		for range 26 {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	_, err = c.UploadAttachment(ctx, "t", "big.bin", pr)
	pr.CloseWithError(io.ErrClosedPipe)
	wantCode(t, err, agentbridge.ECodeTooLarge)
}
