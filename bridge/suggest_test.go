package bridge

import (
	"encoding/json"
	"testing"
)

// TestSuggestionStatusRoute: POST /suggestions/{id}/status accepts and
// dismisses a suggestion over real HTTP, answering it as stored, and the
// status filter of GET /suggestions follows; bad input is refused with its
// code and a sentence, and so is a write from a foreign page; neither
// changes any status.
func TestSuggestionStatusRoute(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	var ids []string
	for _, body := range []string{`{"from":"codex","title":"Shorter primer"}`, `{"from":"claude","title":"Dark mode"}`} {
		var sub struct{ ID string }
		if err := json.Unmarshal(ts.must(200, "POST", "/suggest", body).body, &sub); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sub.ID)
	}
	var sg struct{ ID, From, Title, Status string }
	a := ts.must(200, "POST", "/suggestions/"+ids[0]+"/status", `{"status":"accepted","by":"user"}`)
	if err := json.Unmarshal(a.body, &sg); err != nil || sg.ID != ids[0] || sg.Status != "accepted" || sg.Title != "Shorter primer" || sg.From != "codex" {
		t.Errorf("answer = %s", a.body)
	}
	ts.must(200, "POST", "/suggestions/"+ids[1]+"/status", `{"status":"dismissed","by":"user"}`)
	statuses := func() map[string]string {
		t.Helper()
		var list struct{ Suggestions []struct{ ID, Status string } }
		if err := json.Unmarshal(ts.must(200, "GET", "/suggestions", "").body, &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range list.Suggestions {
			out[s.ID] = s.Status
		}
		return out
	}
	if got := statuses(); got[ids[0]] != "accepted" || got[ids[1]] != "dismissed" {
		t.Errorf("statuses = %v", got)
	}
	if n := ts.must(200, "GET", "/suggestions?status=pending", "").obj()["count"]; n != float64(0) {
		t.Errorf("pending count = %v, want 0", n)
	}

	for _, c := range []struct {
		name, path, body string
		status           int
		code, field      string
	}{
		{"bad status", "/suggestions/" + ids[0] + "/status", `{"status":"done","by":"user"}`, 400, "invalid_field", "status"},
		{"missing status", "/suggestions/" + ids[0] + "/status", `{"by":"user"}`, 400, "missing_field", "status"},
		{"missing by", "/suggestions/" + ids[0] + "/status", `{"status":"pending"}`, 400, "missing_field", "by"},
		{"unknown field", "/suggestions/" + ids[0] + "/status", `{"status":"pending","by":"user","note":"x"}`, 400, "unknown_field", "note"},
		{"invalid json", "/suggestions/" + ids[0] + "/status", `{"status":`, 400, "invalid_json", ""},
		{"unknown id", "/suggestions/01JD3Q6Y7M8K9N0P1Q2R3S4T5V/status", `{"status":"pending","by":"user"}`, 404, "suggestion_not_found", ""},
	} {
		a := ts.do("POST", c.path, c.body)
		if a.status != c.status || a.errCode() != c.code {
			t.Errorf("%s: got %d %s, want %d %s: %s", c.name, a.status, a.errCode(), c.status, c.code, a.body)
			continue
		}
		if c.field != "" && a.errField("field") != c.field {
			t.Errorf("%s: field = %v, want %q", c.name, a.errField("field"), c.field)
		}
		if msg, _ := a.errField("message").(string); len(msg) < 10 {
			t.Errorf("%s: message %q is not a sentence", c.name, msg)
		}
	}
	// The route is behind the same gate as every write.
	for _, c := range []struct {
		header string
		status int
		code   string
	}{
		{"Origin: http://evil.example", 403, "forbidden_origin"},
		{"Content-Type: text/plain", 415, "unsupported_media_type"},
	} {
		a := ts.do("POST", "/suggestions/"+ids[0]+"/status", `{"status":"pending","by":"user"}`, c.header)
		if a.status != c.status || a.errCode() != c.code {
			t.Errorf("with %s: got %d %s, want %d %s", c.header, a.status, a.errCode(), c.status, c.code)
		}
	}
	if got := statuses(); got[ids[0]] != "accepted" || got[ids[1]] != "dismissed" {
		t.Errorf("after refusals statuses = %v", got)
	}
}
