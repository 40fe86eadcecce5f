package coordinator_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/internal/fakemodel"
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
	if r := s.reply(trig); !strings.Contains(r.Text(), "pong from the model") {
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
