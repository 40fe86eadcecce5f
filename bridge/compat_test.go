package bridge

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestOriginalClientCompat checks what the original's clients rely on:
// the default thread name, presence details that survive a report without
// them, the suggestion box and the JSON index at /.
func TestOriginalClientCompat(t *testing.T) {
	t.Parallel()
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ui")) })
	ts := newTestServer(t, Options{UI: ui, Version: "test"})

	var th struct{ ID, Name string }
	if err := json.Unmarshal(ts.must(200, "POST", "/threads", `{}`).body, &th); err != nil || th.Name != "Untitled" {
		t.Fatalf("POST /threads {}: name %q (%v), want Untitled", th.Name, err)
	}
	ts.must(200, "POST", "/threads", ``) // no body at all, no Content-Type: also fine
	ts.must(200, "POST", "/threads", `{"name":"x"}`, "Content-Type: application/json; charset=UTF-8")

	p := "/threads/" + th.ID + "/presence"
	ts.must(200, "POST", p, `{"from":"codex","state":"thinking","details":{"client":"codex","model":"gpt-5"}}`)
	ts.must(200, "POST", p, `{"from":"codex","state":"typing"}`)
	details := func() string {
		var out struct {
			Participants []struct {
				State   string
				Details json.RawMessage
			}
		}
		if err := json.Unmarshal(ts.must(200, "GET", p, "").body, &out); err != nil || len(out.Participants) != 1 {
			t.Fatalf("presence: %+v %v", out, err)
		}
		return out.Participants[0].State + " " + string(out.Participants[0].Details)
	}
	if got := details(); got != `typing {"client":"codex","model":"gpt-5"}` {
		t.Errorf("after a report without details: %s, want the earlier details kept", got)
	}
	ts.must(200, "POST", p, `{"from":"codex","state":"idle","details":null}`)
	if got := details(); got != "idle null" {
		t.Errorf("after details null: %s, want them cleared", got)
	}

	var sub struct {
		Submitted bool
		ID        string
		Timestamp string
	}
	a := ts.must(200, "POST", "/suggest", `{"from":"codex","title":"Shorter primer","description":"It repeats itself."}`)
	if err := json.Unmarshal(a.body, &sub); err != nil || !sub.Submitted || len(sub.ID) != 26 || len(sub.Timestamp) != 27 {
		t.Fatalf("POST /suggest: %s", a.body)
	}
	ts.must(200, "POST", "/suggest", `{"from":"user","title":"Dark mode"}`)
	var list struct {
		Suggestions []struct{ ID, From, Title, Description, Status, Timestamp string }
		Count       int
	}
	if err := json.Unmarshal(ts.must(200, "GET", "/suggestions?status=pending", "").body, &list); err != nil || list.Count != 2 {
		t.Fatalf("GET /suggestions: %+v %v", list, err)
	}
	if s := list.Suggestions[0]; s.ID != sub.ID || s.From != "codex" || s.Description != "It repeats itself." || s.Status != "pending" || s.Timestamp != sub.Timestamp {
		t.Errorf("first suggestion = %+v", s)
	}
	if err := json.Unmarshal(ts.must(200, "GET", "/suggestions?status=done", "").body, &list); err != nil || list.Count != 0 || list.Suggestions == nil {
		t.Errorf("GET /suggestions?status=done: %+v %v, want an empty list", list, err)
	}

	var idx struct {
		Server    string
		UI        string
		Endpoints []struct{ Method, Path, Doc string }
	}
	if err := json.Unmarshal(ts.must(200, "GET", "/", "", "Accept: application/json").body, &idx); err != nil || idx.Server != "agent-bridge" || idx.UI != "/ui" {
		t.Fatalf("GET / (JSON): %+v %v", idx, err)
	}
	var paths []string
	for _, e := range idx.Endpoints {
		paths = append(paths, e.Method+" "+e.Path)
	}
	for _, want := range []string{"POST /threads/{id}/events", "POST /suggest", "GET /suggestions", "GET /metrics"} {
		if !strings.Contains(strings.Join(paths, "\n"), want) {
			t.Errorf("index lacks %s: %v", want, paths)
		}
	}
	req, _ := http.NewRequest("GET", ts.url+"/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui" {
		t.Errorf("a browser at /: %d to %q, want 302 to /ui", resp.StatusCode, resp.Header.Get("Location"))
	}
}
