package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"image"
	"image/png"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
)

// noisyPNG is a real PNG of at least minBytes: random pixels do not
// compress.
func noisyPNG(t *testing.T, minBytes int) []byte {
	t.Helper()
	side := 8
	for {
		img := image.NewRGBA(image.Rect(0, 0, side, side))
		r := rand.New(rand.NewPCG(1, 2))
		for i := range img.Pix {
			img.Pix[i] = byte(r.Uint32())
		}
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		if b.Len() >= minBytes {
			return b.Bytes()
		}
		side *= 2
	}
}

// attachmentRows counts the attachments stored in the SQLite file db and
// their chunks' bytes, read beside the running server.
func attachmentRows(t *testing.T, db string) (files, bytes int64) {
	t.Helper()
	d, err := sql.Open("sqlite3", "file:"+db+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.QueryRow(`SELECT count(*) FROM attachments`).Scan(&files); err != nil {
		t.Fatal(err)
	}
	if err := d.QueryRow(`SELECT coalesce(sum(length(data)), 0) FROM attachment_chunks`).Scan(&bytes); err != nil {
		t.Fatal(err)
	}
	return files, bytes
}

// eventAttachments reads meta.attachments of the event post --json printed.
func eventAttachments(t *testing.T, out string) []agentbridge.Attachment {
	t.Helper()
	var ev agentbridge.Event
	if err := json.Unmarshal([]byte(out), &ev); err != nil {
		t.Fatalf("post --json printed %q: %v", out, err)
	}
	var list []agentbridge.Attachment
	if err := json.Unmarshal(ev.Meta.Extra[agentbridge.MetaAttachments], &list); err != nil {
		t.Fatalf("meta.attachments of %s: %v", out, err)
	}
	return list
}

// TestAttachThroughCLI runs a real serve: a 1 MiB PNG posted with post
// --attach is served back byte for byte as image/png (get -o, and GET);
// the same bytes attached again under another name are the same id and
// stored once; 26 MiB is refused too_large with nothing stored, and no
// message posted; get checks the bytes against the id and refuses to
// overwrite a file. Then backup, restore into a new database and a serve
// on it give the same bytes back.
func TestAttachThroughCLI(t *testing.T) {
	stack.Heavy(t)
	bin := buildServeBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "data", "bridge.db")
	p := startServe(t, bin, db)
	c := cli{t: t, env: map[string]string{"BRIDGE_URL": p.URL, "BRIDGE_TOKEN": p.Token}}
	c.ok("thread", "new", "files")
	img := noisyPNG(t, 1<<20)
	shot := filepath.Join(dir, "shot.png")
	if err := os.WriteFile(shot, img, 0o600); err != nil {
		t.Fatal(err)
	}
	list := eventAttachments(t, c.ok("post", "files", "see this", "--attach", shot, "--json"))
	if len(list) != 1 || list[0].Type != "image/png" || list[0].Size != int64(len(img)) || list[0].Name != "shot.png" {
		t.Fatalf("meta.attachments = %+v, want shot.png, image/png, %d bytes", list, len(img))
	}
	id := list[0].ID
	out := filepath.Join(dir, "back.png")
	if got := c.ok("get", id, "-o", out); !strings.Contains(got, "image/png") {
		t.Errorf("get printed %q, want the type", got)
	}
	if back, err := os.ReadFile(out); err != nil || !bytes.Equal(back, img) {
		t.Fatalf("get wrote %d bytes, %v; want the %d posted", len(back), err, len(img))
	}
	req, _ := http.NewRequest("GET", p.URL+"/attachments/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+p.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "image/png" {
		t.Errorf("GET Content-Type = %q, want image/png", ct)
	}
	if _, errOut, code := c.run("get", id, "-o", out); code != 2 || !strings.Contains(errOut, "already exists") {
		t.Errorf("get over an existing file: exit %d, %q", code, errOut)
	}

	again := filepath.Join(dir, "again.png")
	if err := os.WriteFile(again, img, 0o600); err != nil {
		t.Fatal(err)
	}
	second := eventAttachments(t, c.ok("post", "files", "--attach", again, "--json"))
	if len(second) != 1 || second[0].ID != id || second[0].Name != "again.png" {
		t.Errorf("the same bytes again = %+v, want id %s named again.png", second, id)
	}
	if files, n := attachmentRows(t, db); files != 1 || n != int64(len(img)) {
		t.Errorf("stored %d attachments, %d bytes; want 1 and %d", files, n, len(img))
	}

	big := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(big, bytes.Repeat([]byte{7}, 26<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	before := c.ok("transcript", "files")
	_, errOut, code := c.run("post", "files", "too big", "--attach", big)
	if code != 1 || !strings.Contains(errOut, "larger than this bridge takes (25 MiB") {
		t.Errorf("26 MiB: exit %d, %q; want exit 1 and the limit", code, errOut)
	}
	if files, n := attachmentRows(t, db); files != 1 || n != int64(len(img)) {
		t.Errorf("after the refused upload: %d attachments, %d bytes; want 1 and %d", files, n, len(img))
	}
	if after := c.ok("transcript", "files"); after != before {
		t.Errorf("a message was posted with the refused file: %q", after)
	}

	backup := filepath.Join(dir, "backup.db")
	c.ok("backup", "--db", db, "--to", backup)
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30 s of SIGTERM")
	}
	restored := filepath.Join(dir, "restored", "bridge.db")
	c.ok("restore", "--from", backup, "--db", restored)
	p2 := startServe(t, bin, restored)
	c2 := cli{t: t, env: map[string]string{"BRIDGE_URL": p2.URL, "BRIDGE_TOKEN": p2.Token}}
	out2 := filepath.Join(dir, "restored.png")
	c2.ok("get", id, "-o", out2)
	if back, err := os.ReadFile(out2); err != nil || !bytes.Equal(back, img) {
		t.Fatalf("after restore, get wrote %d bytes, %v; want the %d posted", len(back), err, len(img))
	}
}

// TestTailShowsAttachments: tail prints a line per file a message names,
// with the command that downloads it.
func TestTailShowsAttachments(t *testing.T) {
	t.Parallel()
	e := agentbridge.Event{Seq: 4, TS: "2026-11-21T10:00:00.000000Z", Type: agentbridge.TypeMessage, From: "user", To: "all",
		Content: json.RawMessage(`"see this"`), Meta: agentbridge.Meta{Extra: map[string]json.RawMessage{agentbridge.MetaAttachments: json.RawMessage(
			`[{"id":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","name":"shot.png","type":"image/png","size":48213}]`)}}}
	want := "[4] 2026-11-21T10:00:00.000000Z user → all: see this\n    [file] shot.png (image/png, 48213 bytes): agent-bridge get sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	if got := formatEvent(e, false); got != want {
		t.Errorf("formatEvent = %q, want %q", got, want)
	}
}
