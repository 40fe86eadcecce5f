package coordinator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// pngOf is a small real PNG image.
func pngOf(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 5)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// upload stores data in thread as name and returns it.
func (s *stack) upload(thread, name string, data []byte) agentbridge.Attachment {
	s.t.Helper()
	a, err := s.cl.UploadAttachment(context.Background(), thread, name, bytes.NewReader(data))
	if err != nil {
		s.t.Fatalf("upload %s: %v", name, err)
	}
	return a
}

// withFiles is a message to `to` naming the attachments.
func withFiles(to, text string, files ...agentbridge.Attachment) agentbridge.EventInput {
	b, _ := json.Marshal(files)
	return agentbridge.EventInput{To: to, Content: jsonString(text),
		Meta: agentbridge.Meta{Extra: map[string]json.RawMessage{agentbridge.MetaAttachments: b}}}
}

// TestAdapterReceivesAttachments: a real subprocess adapter finds each
// file of its payload's events at the payload's path, byte for byte, in
// a folder of the run's own under the coordinator's attachment folder
// (two files of one name apart); the folder is gone once the run has
// ended, and a folder a killed coordinator left is removed at start.
func TestAdapterReceivesAttachments(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	stale := filepath.Join(s.dir, "attachments", "run-999")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	s.startCoordinator()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a run's folder left from before the start is still there: %v", err)
	}
	th := s.thread("files")
	s.invite(th, "alice", agentbridge.Profile{})
	shot := s.upload(th, "shot.png", pngOf(t))
	older := s.upload(th, "notes.txt", []byte("the first notes"))
	newer := s.upload(th, "notes.txt", []byte("the second notes"))
	s.post(th, withFiles("all", "earlier notes", older))
	trigger := s.post(th, withFiles("alice", "@alice look fake:files", shot, newer))
	reply := s.waitReplies(th, trigger.ID, 1)[0]
	got := map[string][2]string{} // hash → name, path
	for _, line := range strings.Split(strings.TrimSpace(reply.Text()), "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) != 4 || f[0] != "file" {
			t.Fatalf("the adapter said %q", reply.Text())
		}
		got[f[2]] = [2]string{f[1], f[3]}
	}
	root := filepath.Join(s.dir, "attachments")
	var runDir string
	for _, a := range []agentbridge.Attachment{shot, older, newer} {
		g, ok := got[a.ID]
		if !ok {
			t.Errorf("the adapter did not find %s (%s) at its path: %q", a.Name, a.ID, reply.Text())
			continue
		}
		dir := filepath.Dir(g[1])
		if filepath.Dir(dir) != root || !strings.HasPrefix(filepath.Base(dir), "run-") {
			t.Errorf("%s was at %s, not in a run's folder under %s", a.Name, g[1], root)
		}
		runDir = dir
	}
	names := map[string]bool{}
	for _, g := range got {
		names[filepath.Base(g[1])] = true
	}
	if !names["notes.txt"] || !names["notes (2).txt"] || !names["shot.png"] {
		t.Errorf("copies named %v, want shot.png, notes.txt and notes (2).txt", names)
	}
	var p adapters.Payload
	b, err := os.ReadFile(filepath.Join(s.fakeDir, trigger.ID+"-alice.json"))
	if err != nil || json.Unmarshal(b, &p) != nil {
		t.Fatalf("the payload the adapter saved: %v", err)
	}
	for _, a := range p.Attachments {
		if a.ID == shot.ID && (a.Event != trigger.ID || a.Type != "image/png" || a.Path == "") {
			t.Errorf("payload attachment %+v, want the trigger's image/png with a path", a)
		}
	}
	testutil.WaitFor(t, waitLong, "the run's attachment folder to be removed", func() bool {
		_, err := os.Stat(runDir)
		return os.IsNotExist(err)
	})
}
