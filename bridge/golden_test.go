package bridge

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var (
	ulidRE = regexp.MustCompile(`"[0-9A-HJKMNP-TV-Z]{26}"`)
	tsRE   = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"`)
	// epochRE is the log epoch's random id on GET /ping.
	epochRE = regexp.MustCompile(`"epoch":\{"id":[0-9]+`)
)

// normalize replaces server-assigned ULIDs and timestamps and indents, so
// golden files compare shapes and values, not clocks.
func normalize(t *testing.T, b []byte) []byte {
	t.Helper()
	b = ulidRE.ReplaceAll(b, []byte(`"<ulid>"`))
	b = tsRE.ReplaceAll(b, []byte(`"<ts>"`))
	b = epochRE.ReplaceAll(b, []byte(`"epoch":{"id":"<epoch>"`))
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("indent %s: %v", b, err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// TestV0Golden pins the response shapes of the original v0 API (plus the
// v1 fields they now carry) with golden JSON under testdata/v0/. Run
// `go test ./bridge -run TestV0Golden -update` after an intended change.
func TestV0Golden(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Version: "test"})
	steps := []struct {
		file, method, path, body string
		status                   int
	}{
		{"ping", "GET", "/ping", "", 200},
		{"threads_post", "POST", "/threads", `{"id":"t1","name":"design review","from":"user"}`, 200},
		{"events_post_message", "POST", "/threads/t1/events", `{"from":"user","to":"codex","content":"hello @codex","meta":{"tags":["x"],"custom":{"k":1}}}`, 200},
		{"events_post_control", "POST", "/threads/t1/events", `{"type":"control","from":"user","content":{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"gpt-5","roles":["reviewer"],"nickname":"cody"}}}}`, 200},
		{"events_get", "GET", "/threads/t1/events", "", 200},
		{"threads_get", "GET", "/threads", "", 200},
		{"thread_get", "GET", "/threads/t1", "", 200},
		{"state_get", "GET", "/threads/t1/state", "", 200},
		{"presence_post", "POST", "/threads/t1/presence", `{"from":"codex","state":"thinking","details":{"note":"reading"}}`, 200},
		{"presence_get", "GET", "/threads/t1/presence", "", 200},
		{"poll", "GET", "/events?after=1", "", 200},
		{"suggest_post", "POST", "/suggest", `{"from":"codex","title":"Shorter primer","description":"It repeats itself."}`, 200},
		{"suggestions_get", "GET", "/suggestions", "", 200},
		{"error_missing_field", "POST", "/threads/t1/events", `{"content":"no sender"}`, 400},
		{"error_not_found", "GET", "/threads/t1/nothing", "", 404},
	}
	for _, s := range steps {
		a := ts.do(s.method, s.path, s.body)
		if a.status != s.status {
			t.Fatalf("%s %s: status %d, want %d: %s", s.method, s.path, a.status, s.status, a.body)
		}
		got := normalize(t, a.body)
		path := filepath.Join("testdata", "v0", s.file+".json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read golden (run with -update to create): %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s %s: answer differs from %s:\n got: %s\nwant: %s", s.method, s.path, path, got, want)
		}
	}
}
