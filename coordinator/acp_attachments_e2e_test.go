package coordinator_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// blocks lists the fake ACP agent's logged prompt blocks, in order.
func (s *acpStack) blocks() []string {
	var out []string
	for _, c := range s.calls() {
		if f := strings.Split(c, "|"); len(f) == 4 && f[1] == "prompt-block" {
			out = append(out, f[2])
		}
	}
	return out
}

// TestACPAttachmentBlocks: an ACP agent that declares
// promptCapabilities.image gets an image as an image block (its bytes
// whole) and any other file as a resource link to the run's copy; one
// that does not gets links only. A warm session's next turn gets only
// the files of what is new to it.
func TestACPAttachmentBlocks(t *testing.T) {
	t.Parallel()
	for _, images := range []bool{true, false} {
		t.Run(fmt.Sprintf("images=%v", images), func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			if images {
				env["FAKE_ACP_IMAGES"] = "1"
			}
			s := startACPStack(t, env, nil)
			png := []byte("\x89PNG\r\n\x1a\n" + strings.Repeat("p", 5000))
			shot := s.upload(s.thread, "shot.png", png)
			log := s.upload(s.thread, "app log.txt", []byte("line one\nline two\n"))
			first := s.post(s.thread, withFiles("acpy", "look at these", shot, log))
			s.reply(first)
			got := s.blocks()
			if len(got) != 2 {
				t.Fatalf("prompt blocks = %v, want two", got)
			}
			wantImage := fmt.Sprintf("image:image/png:%d", len(png))
			if !images {
				wantImage = "link:image/png:file://"
			}
			if !strings.HasPrefix(got[0], wantImage) {
				t.Errorf("the image's block = %q, want %q", got[0], wantImage)
			}
			if !strings.HasPrefix(got[1], "link:text/plain;charset=utf-8:file://") || !strings.HasSuffix(got[1], "/"+url.PathEscape("app log.txt")) {
				t.Errorf("the log's block = %q, want a link to its copy", got[1])
			}
			second := s.ask("and now?")
			s.reply(second)
			if n := len(s.blocks()); n != 2 {
				t.Errorf("a warm turn with no new file sent %d more blocks", n-2)
			}
		})
	}
}
