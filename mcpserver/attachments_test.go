package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/mcpserver"
)

// TestPostAttachments: post's attachments uploads files of the working
// folder (relative, absolute inside it, through a link that stays inside)
// and the message names them with their sniffed types, which read_thread
// lists under it; a path that goes
// up with "..", an absolute one outside, a link that leads out, a missing
// file and a folder are tool errors naming the path and why, and nothing
// is posted.
func TestPostAttachments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	work, outside := t.TempDir(), t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(work, "report.txt"), "all tests pass")
	write(filepath.Join(work, "sub", "chart.gif"), "GIF89a and some pixels")
	write(filepath.Join(outside, "secret.txt"), "not yours")
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(work, "escape.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(work, "report.txt"), filepath.Join(work, "inner.txt")); err != nil {
		t.Fatal(err)
	}
	s, err := mcpserver.New(mcpserver.Options{Client: client.New(e.url, client.WithToken(token)), As: "claude",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Dir: work})
	if err != nil {
		t.Fatal(err)
	}
	e.cs = serve(t, s)
	const th = "files"
	if _, err := e.bridge.CreateThread(t.Context(), agentbridge.CreateThreadRequest{ID: th}); err != nil {
		t.Fatal(err)
	}

	var out struct {
		ID          string                   `json:"id"`
		Attachments []agentbridge.Attachment `json:"attachments"`
	}
	text := e.call("post", map[string]any{"thread": th, "content": "the results",
		"attachments": []string{"report.txt", "sub/chart.gif", filepath.Join(work, "report.txt"), "inner.txt"}}, &out)
	if len(out.Attachments) != 4 || out.Attachments[1].Type != "image/gif" || out.Attachments[1].Name != "chart.gif" ||
		out.Attachments[0].ID != out.Attachments[2].ID || out.Attachments[3].Name != "inner.txt" || !strings.Contains(text, "Attached chart.gif (image/gif") {
		t.Fatalf("post = %+v, %q", out, text)
	}
	evs, err := e.bridge.ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: th, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	var named []agentbridge.Attachment
	if last.ID != out.ID || json.Unmarshal(last.Meta.Extra[agentbridge.MetaAttachments], &named) != nil || len(named) != 4 || last.From != "claude" {
		t.Fatalf("the posted event = %+v, want claude's message naming the 4 files", last)
	}
	body, _, err := e.bridge.DownloadAttachment(t.Context(), named[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(body)
	body.Close()
	if !bytes.Equal(got, []byte("GIF89a and some pixels")) {
		t.Errorf("the uploaded chart holds %q", got)
	}

	if read := e.call("read_thread", map[string]any{"thread": th}, nil); !strings.Contains(read, "  [file] chart.gif (image/gif, 22 bytes): agent-bridge get "+named[1].ID+"\n") {
		t.Errorf("read_thread does not list the files: %q", read)
	}
	before := len(evs)
	for _, c := range []struct{ path, why string }{
		{"../" + filepath.Base(outside) + "/secret.txt", `may not go up with ".."`},
		{"sub/../report.txt", `may not go up with ".."`},
		{filepath.Join(outside, "secret.txt"), "outside your working folder"},
		{"escape.txt", "symbolic link that leads outside your working folder"},
		{"missing.txt", "no such file"},
		{"sub", "not a regular file"},
	} {
		msg := e.callErr("post", map[string]any{"thread": th, "content": "try", "attachments": []string{"report.txt", c.path}})
		if !strings.Contains(msg, "invalid attachments") || !strings.Contains(msg, c.why) {
			t.Errorf("attach %q: %q, want it refused because %q", c.path, msg, c.why)
		}
	}
	if evs, _ := e.bridge.ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: th, After: -1}); len(evs) != before {
		t.Errorf("a refused post was stored: %d events, want %d", len(evs), before)
	}
}
