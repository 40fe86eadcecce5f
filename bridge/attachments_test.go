package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
)

// pngBytes is a real PNG image of w×h pixels.
func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// idOf is the attachment id of data.
func idOf(data []byte) string { return storetest.NewAttachment(data, "", "").ID }

// send sends body as it is with the content type (none when ""), of
// length n (-1: chunked), with ts's token.
func (ts *testServer) send(method, path string, body io.Reader, contentType string, n int64) answer {
	ts.t.Helper()
	req, err := http.NewRequest(method, ts.url+path, body)
	if err != nil {
		ts.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if n >= 0 {
		req.ContentLength = n
	} else {
		req.ContentLength = -1
	}
	if ts.token != "" {
		req.Header.Set("Authorization", "Bearer "+ts.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// multipartBody is a multipart/form-data body with data in the field
// "file", named name and labelled partType.
func multipartBody(t testing.TB, name, partType string, data []byte) (*bytes.Buffer, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("note", "ignored")
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="file"; filename="`+name+`"`)
	h.Set("Content-Type", partType)
	pw, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = pw.Write(data)
	_ = mw.Close()
	return &b, mw.FormDataContentType()
}

// uploaded decodes an upload's answer.
func uploaded(t testing.TB, a answer) agentbridge.Attachment {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("upload: %d %s", a.status, a.body)
	}
	var out struct{ Attachment agentbridge.Attachment }
	if err := json.Unmarshal(a.body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Attachment
}

// countRows counts an attachment table's rows in ts's store.
func (ts *testServer) stored(id string) bool {
	ts.t.Helper()
	_, found, err := ts.store.Attachment(context.Background(), id)
	if err != nil {
		ts.t.Fatal(err)
	}
	return found
}

// TestAttachmentUploadAndServe: a PNG uploaded raw and as multipart is
// served back byte for byte as image/png, inline, with nosniff, the CSP
// and an ETag that answers 304; the same bytes twice are one id; an HTML
// file labelled image/png (by the part and by its name) is stored and
// served as text/html, as a download; a diff is text/x-diff.
func TestAttachmentUploadAndServe(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	ts.newThread("t")
	img := pngBytes(t, 64, 64)
	a := uploaded(t, ts.send("POST", "/threads/t/attachments?name=shot.png", bytes.NewReader(img), "application/octet-stream", int64(len(img))))
	want := agentbridge.Attachment{ID: idOf(img), Name: "shot.png", Type: "image/png", Size: int64(len(img))}
	if a != want {
		t.Fatalf("upload = %+v, want %+v", a, want)
	}
	body, ct := multipartBody(t, "again.png", "image/png", img)
	if b := uploaded(t, ts.send("POST", "/threads/t/attachments", body, ct, int64(body.Len()))); b.ID != a.ID || b.Name != "again.png" {
		t.Errorf("the same bytes again = %+v, want id %s named again.png", b, a.ID)
	}
	got := ts.must(200, "GET", "/attachments/"+a.ID, "")
	if !bytes.Equal(got.body, img) {
		t.Fatalf("served %d bytes, not the %d uploaded", len(got.body), len(img))
	}
	h := got.header
	for k, v := range map[string]string{
		"Content-Type": "image/png", "X-Content-Type-Options": "nosniff", "Content-Security-Policy": attachmentCSP,
		"Content-Disposition": `inline; filename=shot.png`, "ETag": `"` + a.ID + `"`,
	} {
		if h.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, h.Get(k), v)
		}
	}
	if esc := ts.must(200, "GET", "/attachments/"+strings.Replace(a.ID, ":", "%3A", 1), ""); !bytes.Equal(esc.body, img) {
		t.Errorf("GET with the colon escaped served %d bytes, want the %d uploaded", len(esc.body), len(img))
	}
	if a := ts.do("GET", "/attachments/"+a.ID, "", `If-None-Match: "`+a.ID+`"`); a.status != http.StatusNotModified || len(a.body) != 0 {
		t.Errorf("GET with the ETag: %d, %d bytes; want 304 and none", a.status, len(a.body))
	}

	html := []byte("<!DOCTYPE html><html><script>alert(document.cookie)</script></html>")
	body, ct = multipartBody(t, "innocent.png", "image/png", html)
	h1 := uploaded(t, ts.send("POST", "/threads/t/attachments", body, ct, -1))
	if h1.Type != "text/html; charset=utf-8" || h1.Name != "innocent.png" {
		t.Errorf("HTML labelled image/png = %+v, want text/html", h1)
	}
	got = ts.must(200, "GET", "/attachments/"+h1.ID, "")
	if ct := got.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("served as %q, want text/html", ct)
	}
	if cd := got.header.Get("Content-Disposition"); cd != "attachment; filename=innocent.png" {
		t.Errorf("Content-Disposition = %q, want a download", cd)
	}
	if got.header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(got.header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("HTML served without nosniff or the sandbox: %v", got.header)
	}

	diff := []byte("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
	d := uploaded(t, ts.send("POST", "/threads/t/attachments?name=run.diff", bytes.NewReader(diff), "text/x-diff", -1))
	if d.Type != "text/x-diff; charset=utf-8" {
		t.Errorf("a diff is %q, want text/x-diff", d.Type)
	}
	txt := uploaded(t, ts.send("POST", "/threads/t/attachments?name="+`%E2%80%AEgnp.exe%20notes.txt`, strings.NewReader("just notes"), "application/octet-stream", -1))
	if txt.Name != "gnp.exe notes.txt" {
		t.Errorf("name = %q, want the bidi override dropped", txt.Name)
	}
	if cd := ts.must(200, "GET", "/attachments/"+txt.ID, "").header.Get("Content-Disposition"); !strings.HasPrefix(cd, "inline") {
		t.Errorf("plain text disposition = %q, want inline", cd)
	}
}

// TestAttachmentTooLarge: a file over the limit is 413 too_large and
// nothing is stored, whether its length is declared (refused before it
// is read), unknown (chunked) or inside a multipart body.
func TestAttachmentTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	ts := closedServer(t, Options{AttachmentMaxBytes: limit})
	ts.newThread("t")
	big := bytes.Repeat([]byte("x"), limit+1)
	mp, ct := multipartBody(t, "big.txt", "text/plain", big)
	for _, c := range []struct {
		name string
		send func() answer
	}{
		{"declared", func() answer {
			return ts.send("POST", "/threads/t/attachments?name=big", bytes.NewReader(big), "application/octet-stream", int64(len(big)))
		}},
		{"chunked", func() answer {
			return ts.send("POST", "/threads/t/attachments?name=big", io.MultiReader(bytes.NewReader(big)), "application/octet-stream", -1)
		}},
		{"multipart", func() answer { return ts.send("POST", "/threads/t/attachments", mp, ct, -1) }},
	} {
		a := c.send()
		if a.status != http.StatusRequestEntityTooLarge || a.errCode() != agentbridge.ECodeTooLarge {
			t.Errorf("%s: %d %s, want 413 too_large", c.name, a.status, a.body)
		}
	}
	if ts.stored(idOf(big)) {
		t.Error("a file over the limit was stored")
	}
	ok := big[:limit]
	if a := uploaded(t, ts.send("POST", "/threads/t/attachments?name=ok", bytes.NewReader(ok), "application/octet-stream", -1)); a.Size != limit {
		t.Errorf("a file at the limit = %+v", a)
	}
}

// TestAttachmentRefusals: a text/plain or untyped raw body is 415, a raw
// body without ?name= 400, a multipart body without "file" 400, an
// upload to a missing thread 404, an unknown id 404; an event naming an
// attachment that is not stored is 400 unknown_attachment and stores
// nothing.
func TestAttachmentRefusals(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	ts.newThread("t")
	for _, c := range []struct {
		name, path, ct string
		body           io.Reader
		status         int
		code           string
	}{
		{"text/plain", "/threads/t/attachments?name=a", "text/plain", strings.NewReader("x"), 415, agentbridge.ECodeUnsupportedMediaType},
		{"form", "/threads/t/attachments?name=a", "application/x-www-form-urlencoded", strings.NewReader("x"), 415, agentbridge.ECodeUnsupportedMediaType},
		{"no type", "/threads/t/attachments?name=a", "", strings.NewReader("x"), 415, agentbridge.ECodeUnsupportedMediaType},
		{"no name", "/threads/t/attachments", "application/octet-stream", strings.NewReader("x"), 400, agentbridge.ECodeMissingField},
		{"no thread", "/threads/nope/attachments?name=a", "application/octet-stream", strings.NewReader("x"), 404, agentbridge.ECodeThreadNotFound},
		{"unknown parameter", "/threads/t/attachments?file=a", "application/octet-stream", strings.NewReader("x"), 400, agentbridge.ECodeInvalidField},
	} {
		if a := ts.send("POST", c.path, c.body, c.ct, -1); a.status != c.status || a.errCode() != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, a.status, a.body, c.status, c.code)
		}
	}
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("other", "x")
	_ = mw.Close()
	if a := ts.send("POST", "/threads/t/attachments", &b, mw.FormDataContentType(), -1); a.status != 400 || a.errCode() != agentbridge.ECodeMissingField {
		t.Errorf("multipart without file: %d %s", a.status, a.body)
	}
	missing := idOf([]byte("never uploaded"))
	if a := ts.do("GET", "/attachments/"+missing, ""); a.status != 404 || a.errCode() != agentbridge.ECodeAttachmentNotFound {
		t.Errorf("GET unknown: %d %s", a.status, a.body)
	}
	before := ts.eventCount("t")
	a := ts.do("POST", "/threads/t/events", `{"from":"user","content":"see","meta":{"attachments":[{"id":"`+missing+`","name":"x.png"}]}}`)
	if a.status != 400 || a.errCode() != agentbridge.ECodeUnknownAttachment {
		t.Errorf("event naming an unknown attachment: %d %s, want 400 unknown_attachment", a.status, a.body)
	}
	if n := ts.eventCount("t"); n != before {
		t.Errorf("the refused event was stored: %d events, want %d", n, before)
	}
}

// TestAttachmentScopes: an agent token uploads to its own thread only,
// and downloads only what its thread holds (uploaded to it or named by
// one of its events), another thread's answered as unknown; a read token
// downloads but may not upload; a coordinator token uploads anywhere.
func TestAttachmentScopes(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	ts.newThread("mine")
	ts.newThread("other")
	_, agent := ts.mint(`{"scope":"agent","name":"run","thread":"mine","participant":"claude"}`)
	_, reader := ts.mint(`{"scope":"read","name":"watcher"}`)
	_, coord := ts.mint(`{"scope":"coordinator","name":"laptop"}`)
	up := func(who *testServer, thread, data string) answer {
		return who.send("POST", "/threads/"+thread+"/attachments?name=f.txt", strings.NewReader(data), "application/octet-stream", -1)
	}
	own := uploaded(t, up(ts.as(agent), "mine", "the agent's"))
	if a := up(ts.as(agent), "other", "elsewhere"); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenSender {
		t.Errorf("agent uploads to another thread: %d %s", a.status, a.body)
	}
	if a := up(ts.as(reader), "mine", "read"); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenScope {
		t.Errorf("read token uploads: %d %s", a.status, a.body)
	}
	uploaded(t, up(ts.as(coord), "other", "the coordinator's"))
	theirs := uploaded(t, up(ts, "other", "the person's, elsewhere"))
	named := uploaded(t, up(ts, "other", "named later in mine"))
	ts.must(200, "POST", "/threads/mine/events", `{"from":"user","content":"see","meta":{"attachments":[{"id":"`+named.ID+`"}]}}`)
	for _, c := range []struct {
		who    string
		as     *testServer
		id     string
		status int
	}{
		{"agent, own upload", ts.as(agent), own.ID, 200},
		{"agent, named in its thread", ts.as(agent), named.ID, 200},
		{"agent, another thread's", ts.as(agent), theirs.ID, 404},
		{"read token", ts.as(reader), theirs.ID, 200},
		{"coordinator", ts.as(coord), own.ID, 200},
		{"no token", ts.as(""), own.ID, 401},
	} {
		if a := c.as.do("GET", "/attachments/"+c.id, ""); a.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.who, a.status, a.body, c.status)
		}
	}
}

// TestAttachmentFromAnotherSite: an upload from a page of another origin
// is refused before its body is read, even as multipart, which any page
// can send without a preflight.
func TestAttachmentFromAnotherSite(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	body, ct := multipartBody(t, "x.png", "image/png", []byte("x"))
	req, _ := http.NewRequest("POST", ts.url+"/threads/t/attachments", body)
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("cross-site upload: %d, want 403", resp.StatusCode)
	}
	if ts.stored(idOf([]byte("x"))) {
		t.Error("the cross-site upload was stored")
	}
}

// TestSniffType: the type comes from the first bytes only, and a file is
// shown inline only as a raster image or plain text (an HTML page, an
// SVG with its XML declaration, a PDF or a diff is a download).
func TestSniffType(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		head, want string
		inline     bool
	}{
		{"\x89PNG\r\n\x1a\n\x00\x00", "image/png", true},
		{"GIF89a....", "image/gif", true},
		{"\xff\xd8\xff\xe0", "image/jpeg", true},
		{"<!DOCTYPE html><p>x", "text/html; charset=utf-8", false},
		// An SVG is text to the sniffer: served as text/plain with
		// nosniff, it is shown as its source, never drawn nor run.
		{"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>x</script></svg>", "text/plain; charset=utf-8", true},
		{"<?xml version=\"1.0\"?><svg/>", "text/xml; charset=utf-8", false},
		{"%PDF-1.7", "application/pdf", false},
		{"plain words", "text/plain; charset=utf-8", true},
		{"diff --git a/x b/x\nindex 1..2\n", "text/x-diff; charset=utf-8", false},
		{"--- a/x\n+++ b/x\n@@ -1 +1 @@\n", "text/x-diff; charset=utf-8", false},
		{"--- a list\n- of things", "text/plain; charset=utf-8", true},
		{"\x00\x01\x02binary", "application/octet-stream", false},
	} {
		got := SniffType([]byte(c.head))
		if got != c.want || ShownInline(got) != c.inline {
			t.Errorf("SniffType(%q) = %q (inline %v), want %q (inline %v)", c.head, got, ShownInline(got), c.want, c.inline)
		}
	}
}
