package bridge

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTranscriptEndpoint: a plain thread's transcript in both formats,
// private events left out, and the errors of a bad format and an unknown
// thread.
func TestTranscriptEndpoint(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	ts.post("t", "user", "hello")
	ts.must(200, "POST", "/threads/t/events", `{"type":"thinking","from":"codex","to":"codex","content":"SECRET","meta":{"private":true}}`)
	ts.post("t", "codex", "hi there")
	md := ts.must(200, "GET", "/threads/t/transcript", "")
	if ct := md.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/markdown") {
		t.Errorf("Content-Type = %q", ct)
	}
	if s := string(md.body); !strings.Contains(s, "**USER:** hello") || !strings.Contains(s, "**CODEX:** hi there") || strings.Contains(s, "SECRET") {
		t.Errorf("md transcript:\n%s", s)
	}
	js := ts.must(200, "GET", "/threads/t/transcript?format=json", "")
	var entries []map[string]any
	if err := json.Unmarshal(js.body, &entries); err != nil || len(entries) != 2 || entries[1]["type"] != "speak" {
		t.Errorf("json transcript (%v):\n%s", err, js.body)
	}
	if a := ts.do("GET", "/threads/t/transcript?format=html", ""); a.status != 400 || a.errCode() != "invalid_field" || a.errField("field") != "format" {
		t.Errorf("bad format: %d %s", a.status, a.body)
	}
	if a := ts.do("GET", "/threads/nope/transcript", ""); a.status != 404 || a.errCode() != "thread_not_found" {
		t.Errorf("unknown thread: %d %s", a.status, a.body)
	}
}
