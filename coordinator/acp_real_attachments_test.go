package coordinator_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestRealACPImageBlock: the real claude-agent-acp, which declares
// promptCapabilities.image, is sent a posted PNG as an image block, and
// passes it to the model: the fake model server receives the image,
// base64 of the very bytes, as an image content block of the user's
// message.
func TestRealACPImageBlock(t *testing.T) {
	ra := realAgents[0]
	if ra.name != "claude-agent-acp" {
		t.Fatalf("realAgents[0] is %s", ra.name)
	}
	s, _, m := startRealACP(t, ra, config.PermissionsAsk)
	png := pngOf(t)
	shot := s.upload(s.thread, "shot.png", png)
	trig := s.post(s.thread, withFiles("acpy", "what is in this picture?", shot))
	if r := replyWithinRun(s, trig); !strings.Contains(r.Text(), "pong from the model") {
		t.Fatalf("reply = %q", r.Text())
	}
	want := base64.StdEncoding.EncodeToString(png)
	found := false
	for _, r := range m.Calls() {
		if imageSent(r, want) {
			found = true
		}
	}
	if !found {
		t.Errorf("no model call carried the PNG as an image block (%d calls)", len(m.Calls()))
	}
}

// replyWithinRun waits for acpy's reply to trig as long as the run may
// last (its AdapterTimeout): a cold real agent, started under -race on a
// loaded machine, took longer than waitLong to answer.
func replyWithinRun(s *acpStack, trig agentbridge.Event) agentbridge.Event {
	s.t.Helper()
	var got []agentbridge.Event
	testutil.WaitFor(s.t, s.cfg.AdapterTimeout, "the reply to "+trig.ID, func() bool {
		got = s.repliesTo(s.thread, trig.ID)
		return len(got) > 0
	})
	return got[0]
}

// imageSent reports whether a Messages API request holds a user message
// with an image block of base64 data.
func imageSent(r fakemodel.Request, data string) bool {
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return false
	}
	for _, msg := range body.Messages {
		var blocks []struct {
			Type   string `json:"type"`
			Source struct {
				Type      string `json:"type"`
				MediaType string `json:"media_type"`
				Data      string `json:"data"`
			} `json:"source"`
		}
		if msg.Role != "user" || json.Unmarshal(msg.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "image" && b.Source.Type == "base64" && b.Source.MediaType == "image/png" && b.Source.Data == data {
				return true
			}
		}
	}
	return false
}

// TestRealACPPostsFileOverMCP: the real claude-agent-acp, told by the
// model to call the bridge's MCP post with a file of its working folder,
// posts a message from its participant naming the file, which the bridge
// serves byte for byte.
func TestRealACPPostsFileOverMCP(t *testing.T) {
	ra := realAgents[0]
	s, work, m := startRealACP(t, ra, config.PermissionsAllow)
	report := []byte("all 42 tests pass\n")
	if err := os.WriteFile(filepath.Join(work, "report.txt"), report, 0o600); err != nil {
		t.Fatal(err)
	}
	m.SetResponder(func(r fakemodel.Request) (fakemodel.Reply, bool) {
		post := slices.IndexFunc(r.ToolNames(), func(name string) bool {
			return strings.HasSuffix(name, "post") && strings.Contains(name, "agent-bridge")
		})
		if r.Contains("PLEASE_ATTACH") && !r.Contains("tool_result") && post >= 0 {
			return fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: r.ToolNames()[post],
				Input: map[string]any{"thread": s.thread, "content": "the report", "attachments": []string{"report.txt"}}}}, true
		}
		return fakemodel.Reply{Text: "done"}, true
	})
	trig := s.ask("PLEASE_ATTACH the report")
	// The run starts the agent and its MCP server (agent-bridge mcp, which
	// uploads) and asks the model twice: the wait is the run's own limit.
	var posted agentbridge.Event
	testutil.WaitFor(t, s.cfg.AdapterTimeout, "the post with the file over MCP", func() bool {
		for _, e := range s.events(s.thread) {
			if e.From == "acpy" && e.Text() == "the report" {
				posted = e
				return true
			}
		}
		return false
	})
	replyWithinRun(s, trig)
	var files []agentbridge.Attachment
	if err := json.Unmarshal(posted.Meta.Extra[agentbridge.MetaAttachments], &files); err != nil || len(files) != 1 || files[0].Name != "report.txt" {
		t.Fatalf("meta.attachments = %s, %v; want report.txt", posted.Meta.Extra[agentbridge.MetaAttachments], err)
	}
	body, _, err := s.cl.DownloadAttachment(t.Context(), files[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	if got, _ := io.ReadAll(body); !bytes.Equal(got, report) {
		t.Errorf("the posted file holds %q, want %q", got, report)
	}
}
