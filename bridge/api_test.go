package bridge

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestValidation checks every validation rule and error code through real
// HTTP, and that a refused request stores nothing.
func TestValidation(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{MaxBody: 4096})
	ts.newThread("t1")
	first := ts.post("t1", "user", "first")
	big := `{"from":"user","content":"` + strings.Repeat("x", 5000) + `"}`
	cases := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		code, field              string
	}{
		{"invalid json", "POST", "/threads/t1/events", `{"from":`, nil, 400, "invalid_json", ""},
		{"not an object", "POST", "/threads/t1/events", `[1,2]`, nil, 400, "invalid_json", ""},
		{"empty body", "POST", "/threads/t1/events", ``, nil, 400, "invalid_json", ""},
		{"missing from", "POST", "/threads/t1/events", `{"content":"hi"}`, nil, 400, "missing_field", "from"},
		{"bad from", "POST", "/threads/t1/events", `{"from":"-x","content":"hi"}`, nil, 400, "invalid_field", "from"},
		{"bad to", "POST", "/threads/t1/events", `{"from":"user","to":"a b","content":"hi"}`, nil, 400, "invalid_field", "to"},
		{"from not string", "POST", "/threads/t1/events", `{"from":7,"content":"hi"}`, nil, 400, "invalid_field", "from"},
		{"server field", "POST", "/threads/t1/events", `{"from":"user","content":"hi","seq":3}`, nil, 400, "field_not_allowed", "seq"},
		{"server id", "POST", "/threads/t1/events", `{"id":"x","from":"user","content":"hi"}`, nil, 400, "field_not_allowed", "id"},
		{"unknown field", "POST", "/threads/t1/events", `{"from":"user","content":"hi","colour":"red"}`, nil, 400, "unknown_field", "colour"},
		{"message without content", "POST", "/threads/t1/events", `{"from":"user"}`, nil, 400, "missing_field", "content"},
		{"blank message", "POST", "/threads/t1/events", `{"from":"user","content":"  "}`, nil, 400, "invalid_field", "content"},
		{"message content object", "POST", "/threads/t1/events", `{"from":"user","content":{"a":1}}`, nil, 400, "invalid_field", "content"},
		{"control not object", "POST", "/threads/t1/events", `{"type":"control","from":"user","content":"nope"}`, nil, 400, "invalid_control", "content"},
		{"invite without client", "POST", "/threads/t1/events", `{"type":"control","from":"user","content":{"invite":{"participant_id":"codex","profile":{"model":"m"}}}}`, nil, 400, "invalid_control", "content.invite"},
		{"bad type", "POST", "/threads/t1/events", `{"type":"Bad Type","from":"user","content":"x"}`, nil, 400, "invalid_field", "type"},
		{"meta not object", "POST", "/threads/t1/events", `{"from":"user","content":"x","meta":[1]}`, nil, 400, "invalid_field", "meta"},
		{"tags not strings", "POST", "/threads/t1/events", `{"from":"user","content":"x","meta":{"tags":[1]}}`, nil, 400, "invalid_field", "meta.tags"},
		{"rename without name", "POST", "/threads/t1/events", `{"type":"thread.renamed","from":"user"}`, nil, 400, "missing_field", "content"},
		{"body too large", "POST", "/threads/t1/events", big, nil, 413, "body_too_large", ""},
		{"unknown thread", "POST", "/threads/nope/events", `{"from":"user","content":"hi"}`, nil, 404, "thread_not_found", ""},
		{"unknown reply_to", "POST", "/threads/t1/events", `{"from":"user","content":"hi","meta":{"reply_to":"01JD3Q6Y7M8K9N0P1Q2R3S4T5V"}}`, nil, 422, "unknown_reply_to", ""},
		{"idempotency key too long", "POST", "/threads/t1/events", `{"from":"user","content":"hi"}`, []string{"Idempotency-Key: " + strings.Repeat("k", 300)}, 400, "invalid_field", "Idempotency-Key"},
		{"thread unknown field", "POST", "/threads", `{"name":"x","owner":"me"}`, nil, 400, "unknown_field", "owner"},
		{"thread bad id", "POST", "/threads", `{"id":"../etc"}`, nil, 400, "invalid_field", "id"},
		{"thread name type", "POST", "/threads", `{"name":5}`, nil, 400, "invalid_field", "name"},
		{"thread bad from", "POST", "/threads", `{"from":"a b"}`, nil, 400, "invalid_field", "from"},
		{"thread invalid json", "POST", "/threads", `{`, nil, 400, "invalid_json", ""},
		{"thread exists", "POST", "/threads", `{"id":"t1"}`, nil, 409, "thread_exists", ""},
		{"thread body too large", "POST", "/threads", `{"name":"` + strings.Repeat("x", 5000) + `"}`, nil, 413, "body_too_large", ""},
		{"events bad after", "GET", "/threads/t1/events?after=x", "", nil, 400, "invalid_field", "after"},
		{"events negative after", "GET", "/threads/t1/events?after=-1", "", nil, 400, "invalid_field", "after"},
		{"events limit too big", "GET", "/threads/t1/events?limit=10001", "", nil, 400, "invalid_field", "limit"},
		{"events bad tail", "GET", "/threads/t1/events?tail=0", "", nil, 400, "invalid_field", "tail"},
		{"events bad until", "GET", "/threads/t1/events?until=abc", "", nil, 400, "invalid_field", "until"},
		{"events unknown thread", "GET", "/threads/nope/events", "", nil, 404, "thread_not_found", ""},
		{"thread get unknown", "GET", "/threads/nope", "", nil, 404, "thread_not_found", ""},
		{"threads bad limit", "GET", "/threads?limit=0", "", nil, 400, "invalid_field", "limit"},
		{"state bad at", "GET", "/threads/t1/state?at=-2", "", nil, 400, "invalid_field", "at"},
		{"state unknown thread", "GET", "/threads/nope/state", "", nil, 404, "thread_not_found", ""},
		{"presence missing from", "POST", "/threads/t1/presence", `{"state":"idle"}`, nil, 400, "missing_field", "from"},
		{"presence bad from", "POST", "/threads/t1/presence", `{"from":"?","state":"idle"}`, nil, 400, "invalid_field", "from"},
		{"presence missing state", "POST", "/threads/t1/presence", `{"from":"codex"}`, nil, 400, "missing_field", "state"},
		{"presence bad state", "POST", "/threads/t1/presence", `{"from":"codex","state":"asleep"}`, nil, 400, "invalid_field", "state"},
		{"presence unknown field", "POST", "/threads/t1/presence", `{"from":"codex","state":"idle","mood":"ok"}`, nil, 400, "unknown_field", "mood"},
		{"presence unknown thread", "POST", "/threads/nope/presence", `{"from":"codex","state":"idle"}`, nil, 404, "thread_not_found", ""},
		{"presence get unknown thread", "GET", "/threads/nope/presence", "", nil, 404, "thread_not_found", ""},
		{"poll wait too long", "GET", "/events?wait=61", "", nil, 400, "invalid_field", "wait"},
		{"poll limit too big", "GET", "/events?limit=10001", "", nil, 400, "invalid_field", "limit"},
		{"stream bad last-event-id", "GET", "/events/stream", "", []string{"Last-Event-ID: abc"}, 400, "invalid_field", "Last-Event-ID"},
		{"thread stream unknown thread", "GET", "/threads/nope/events/stream", "", nil, 404, "thread_not_found", ""},
		{"unknown route", "GET", "/nowhere", "", nil, 404, "not_found", ""},
		{"wrong method", "DELETE", "/threads", "", nil, 405, "method_not_allowed", ""},
		{"login unknown field", "POST", "/auth/login", `{"tok":"x"}`, nil, 400, "unknown_field", "tok"},
		// A body must be declared as JSON: curl -d without -H sends a form,
		// and a form or text/plain is what any web page can post here.
		{"event as a form", "POST", "/threads/t1/events", `{"from":"user","content":"hi"}`, []string{"Content-Type: application/x-www-form-urlencoded"}, 415, "unsupported_media_type", ""},
		{"event as text", "POST", "/threads/t1/events", `{"from":"user","content":"hi"}`, []string{"Content-Type: text/plain"}, 415, "unsupported_media_type", ""},
		{"event without a type", "POST", "/threads/t1/events", `{"from":"user","content":"hi"}`, []string{"Content-Type:"}, 415, "unsupported_media_type", ""},
		{"event in latin-1", "POST", "/threads/t1/events", `{"from":"user","content":"hi"}`, []string{"Content-Type: application/json; charset=iso-8859-1"}, 415, "unsupported_media_type", ""},
		{"thread as a form", "POST", "/threads", `{"name":"x"}`, []string{"Content-Type: application/x-www-form-urlencoded"}, 415, "unsupported_media_type", ""},
		{"presence as text", "POST", "/threads/t1/presence", `{"from":"codex","state":"idle"}`, []string{"Content-Type: text/plain"}, 415, "unsupported_media_type", ""},
		{"login as a form", "POST", "/auth/login", `{"token":"x"}`, []string{"Content-Type: multipart/form-data; boundary=x"}, 415, "unsupported_media_type", ""},
		{"suggest as text", "POST", "/suggest", `{"from":"codex","title":"t"}`, []string{"Content-Type: text/plain"}, 415, "unsupported_media_type", ""},
		// Invalid UTF-8 is refused, naming the field, rather than stored as U+FFFD.
		{"content not utf-8", "POST", "/threads/t1/events", "{\"from\":\"user\",\"content\":\"caf\xe9\"}", nil, 400, "invalid_field", "content"},
		{"meta not utf-8", "POST", "/threads/t1/events", "{\"from\":\"user\",\"content\":\"x\",\"meta\":{\"via\":\"\xff\"}}", nil, 400, "invalid_field", "meta.via"},
		{"lone surrogate", "POST", "/threads/t1/events", `{"from":"user","content":"\ud800"}`, nil, 400, "invalid_field", "content"},
		{"thread name not utf-8", "POST", "/threads", "{\"name\":\"\xfe\"}", nil, 400, "invalid_field", "name"},
		{"presence details not utf-8", "POST", "/threads/t1/presence", "{\"from\":\"codex\",\"state\":\"idle\",\"details\":{\"model\":\"\xff\"}}", nil, 400, "invalid_field", "details.model"},
		// An empty string is not the default.
		{"empty to", "POST", "/threads/t1/events", `{"from":"user","to":"","content":"hi"}`, nil, 400, "invalid_field", "to"},
		{"empty type", "POST", "/threads/t1/events", `{"type":"","from":"user","content":"hi"}`, nil, 400, "invalid_field", "type"},
		{"client hop", "POST", "/threads/t1/events", `{"from":"codex","content":"hi","meta":{"hop":0}}`, nil, 400, "field_not_allowed", "meta.hop"},
		{"thread empty name", "POST", "/threads", `{"name":""}`, nil, 400, "invalid_field", "name"},
		{"thread empty id", "POST", "/threads", `{"id":""}`, nil, 400, "invalid_field", "id"},
		{"thread empty from", "POST", "/threads", `{"from":""}`, nil, 400, "invalid_field", "from"},
		{"presence empty from", "POST", "/threads/t1/presence", `{"from":"","state":"idle"}`, nil, 400, "invalid_field", "from"},
		{"presence empty state", "POST", "/threads/t1/presence", `{"from":"codex","state":""}`, nil, 400, "invalid_field", "state"},
		{"presence details a string", "POST", "/threads/t1/presence", `{"from":"codex","state":"idle","details":"gpt-5"}`, nil, 400, "invalid_field", "details"},
		{"presence details a list", "POST", "/threads/t1/presence", `{"from":"codex","state":"idle","details":[1]}`, nil, 400, "invalid_field", "details"},
		{"suggest missing from", "POST", "/suggest", `{"title":"t","description":"d"}`, nil, 400, "missing_field", "from"},
		{"suggest missing title", "POST", "/suggest", `{"from":"codex","description":"d"}`, nil, 400, "missing_field", "title"},
		{"suggest title too long", "POST", "/suggest", `{"from":"codex","title":"` + strings.Repeat("t", 201) + `"}`, nil, 400, "invalid_field", "title"},
		{"suggest unknown field", "POST", "/suggest", `{"from":"codex","title":"t","priority":1}`, nil, 400, "unknown_field", "priority"},
		{"suggestions bad status", "GET", "/suggestions?status=Not%20One", "", nil, 400, "invalid_field", "status"},
		// A key twice, at any depth and on every body, is refused rather
		// than resolved (encoding/json keeps the last).
		{"event from twice", "POST", "/threads/t1/events", `{"from":"user","from":"evil","content":"hi"}`, nil, 400, "duplicate_key", "from"},
		{"event type twice", "POST", "/threads/t1/events", `{"type":"message","type":"control","from":"user","content":{"pause":{"on":true}}}`, nil, 400, "duplicate_key", "type"},
		{"control key twice", "POST", "/threads/t1/events", `{"type":"control","from":"user","content":{"pause":{"on":true,"on":false}}}`, nil, 400, "duplicate_key", "content.pause.on"},
		{"meta key twice", "POST", "/threads/t1/events", `{"from":"user","content":"x","meta":{"via":"a","via":"b"}}`, nil, 400, "duplicate_key", "meta.via"},
		{"thread id twice", "POST", "/threads", `{"id":"x1","id":"x2"}`, nil, 400, "duplicate_key", "id"},
		{"presence from twice", "POST", "/threads/t1/presence", `{"from":"codex","from":"user","state":"idle"}`, nil, 400, "duplicate_key", "from"},
		{"presence details key twice", "POST", "/threads/t1/presence", `{"from":"codex","state":"idle","details":{"m":1,"m":2}}`, nil, 400, "duplicate_key", "details.m"},
		{"suggest title twice", "POST", "/suggest", `{"from":"codex","title":"a","title":"b"}`, nil, 400, "duplicate_key", "title"},
		{"suggestion status twice", "POST", "/suggestions/1/status", `{"status":"accepted","status":"dismissed","by":"user"}`, nil, 400, "duplicate_key", "status"},
		{"login token twice", "POST", "/auth/login", `{"token":"a","token":"b"}`, nil, 400, "duplicate_key", "token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := ts.head()
			a := ts.do(c.method, c.path, c.body, c.headers...)
			if a.status != c.status || a.errCode() != c.code {
				t.Fatalf("got %d %s, want %d %s: %s", a.status, a.errCode(), c.status, c.code, a.body)
			}
			if c.field != "" && a.errField("field") != c.field {
				t.Errorf("field = %v, want %q: %s", a.errField("field"), c.field, a.body)
			}
			if msg, _ := a.errField("message").(string); len(msg) < 10 {
				t.Errorf("message %q is not a sentence", msg)
			}
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if after := ts.head(); after != before {
				t.Errorf("a refused request stored something: head %d → %d", before, after)
			}
		})
	}
	a := ts.must(200, "GET", "/threads/t1/events", "")
	if n := a.obj()["count"]; n != float64(2) {
		t.Fatalf("thread t1 has %v events after the refusals, want 2 (created + %s)", n, first.ID)
	}
}

// TestIdempotency checks that a retry with the same key returns the first
// event and stores nothing new, and that keys are per thread.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("a")
	ts.newThread("b")
	body := `{"from":"codex","content":"reply"}`
	first := ts.must(200, "POST", "/threads/a/events", body, "Idempotency-Key: k1")
	head := ts.head()
	again := ts.must(200, "POST", "/threads/a/events", body, "Idempotency-Key: k1")
	ev1, ev2 := first.obj()["event"].(map[string]any), again.obj()["event"].(map[string]any)
	if ev1["id"] != ev2["id"] || ev1["seq"] != ev2["seq"] {
		t.Fatalf("replay returned %v, want the first event %v", ev2, ev1)
	}
	if again.obj()["replayed"] != true || again.obj()["received"] != true {
		t.Errorf("replay answer = %s, want received and replayed true", again.body)
	}
	if ts.head() != head {
		t.Fatalf("replay stored a new event")
	}
	// The key with another sender or other content is not a retry.
	for _, forged := range []string{`{"from":"mallory","content":"reply"}`, `{"from":"codex","content":"other"}`} {
		a := ts.do("POST", "/threads/a/events", forged, "Idempotency-Key: k1")
		if a.status != 409 || a.errCode() != "idempotency_conflict" || a.obj()["event"] != nil {
			t.Fatalf("%s under a used key: %d %s", forged, a.status, a.body)
		}
	}
	if ts.head() != head {
		t.Fatalf("a conflicting replay stored a new event")
	}
	other := ts.must(200, "POST", "/threads/b/events", body, "Idempotency-Key: k1")
	if other.obj()["event"].(map[string]any)["id"] == ev1["id"] {
		t.Fatalf("the same key in another thread returned the first thread's event")
	}
	if ts.head() != head+1 {
		t.Fatalf("the same key in another thread stored nothing")
	}
}

// TestMuteAndPause checks the 409s and that they name thread and
// participant.
func TestMuteAndPause(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	ts.must(200, "POST", "/threads/t/events", `{"type":"control","from":"user","content":{"mute":{"targets":["codex"],"mode":"hard"}}}`)
	a := ts.must(409, "POST", "/threads/t/events", `{"from":"codex","content":"let me talk"}`)
	if a.errCode() != "participant_muted" || a.errField("thread") != "t" || a.errField("participant") != "codex" {
		t.Fatalf("muted post: %s", a.body)
	}
	ts.post("t", "claude", "not muted")
	// The original UI sends control content as a JSON string.
	ts.must(200, "POST", "/threads/t/events", `{"type":"control","from":"user","content":"{\"pause\":{\"on\":true}}"}`)
	a = ts.must(409, "POST", "/threads/t/events", `{"from":"claude","content":"still here"}`)
	if a.errCode() != "thread_paused" || a.errField("thread") != "t" || a.errField("participant") != "claude" {
		t.Fatalf("paused post: %s", a.body)
	}
	ts.post("t", "user", "humans may speak while paused")
	st := ts.must(200, "GET", "/threads/t/state", "").obj()["state"].(map[string]any)
	if st["paused"] != true || fmt.Sprint(st["muted"]) != "[codex]" {
		t.Fatalf("state = %v", st)
	}
}

// TestStateAt checks state as of a revision.
func TestStateAt(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	inv := ts.must(200, "POST", "/threads/t/events", `{"type":"control","from":"user","content":{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"gpt-5"}}}}`)
	invSeq := inv.obj()["event"].(map[string]any)["seq"].(float64)
	ts.must(200, "POST", "/threads/t/events", `{"type":"control","from":"user","content":{"pause":{"on":true}}}`)
	now := ts.must(200, "GET", "/threads/t/state", "").obj()
	if now["state"].(map[string]any)["paused"] != true || now["seq"] != invSeq+1 {
		t.Fatalf("current state = %v", now)
	}
	then := ts.must(200, "GET", fmt.Sprintf("/threads/t/state?at=%d", int(invSeq)), "").obj()
	st := then["state"].(map[string]any)
	invited := st["participants"].(map[string]any)["invited"].([]any)
	if st["paused"] != false || len(invited) != 1 || then["seq"] != invSeq {
		t.Fatalf("state at %v = %v", invSeq, then)
	}
	before := ts.must(200, "GET", "/threads/t/state?at=1", "").obj()["state"].(map[string]any)
	if n := len(before["participants"].(map[string]any)["invited"].([]any)); n != 0 {
		t.Fatalf("state at 1 has %d invited, want 0", n)
	}
}

// TestThreadsAndRename checks creation defaults, GET /threads/{id}, paging
// and a rename through a thread.renamed event.
func TestThreadsAndRename(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	a := ts.must(200, "POST", "/threads", "")
	id, _ := a.obj()["id"].(string)
	if id == "" || a.obj()["name"] == "" {
		t.Fatalf("empty-body create: %s", a.body)
	}
	ts.newThread("named")
	ts.must(200, "POST", "/threads/named/events", `{"type":"thread.renamed","from":"user","content":"New name"}`)
	got := ts.must(200, "GET", "/threads/named", "").obj()
	if got["name"] != "New name" || got["last_seq"] != float64(2) {
		t.Fatalf("renamed thread = %v", got)
	}
	all := ts.must(200, "GET", "/threads", "").obj()["threads"].([]any)
	if len(all) != 2 {
		t.Fatalf("threads = %v", all)
	}
	page := ts.must(200, "GET", "/threads?limit=1", "").obj()["threads"].([]any)
	if len(page) != 1 {
		t.Fatalf("limit=1 page = %v", page)
	}
	after := page[0].(map[string]any)["id"].(string)
	rest := ts.must(200, "GET", "/threads?limit=1&after="+after, "").obj()["threads"].([]any)
	if len(rest) != 1 || rest[0].(map[string]any)["id"] == after {
		t.Fatalf("second page = %v", rest)
	}
}

// TestEventQueries checks after, since, tail, until and limit.
func TestEventQueries(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	var evs []string
	for i := range 5 {
		evs = append(evs, ts.post("t", "user", fmt.Sprintf("m%d", i)).TS)
	}
	seqs := func(path string) string {
		var out struct {
			Events []struct{ Seq int } `json:"events"`
			Count  int                 `json:"count"`
		}
		a := ts.must(200, "GET", path, "")
		if err := json.Unmarshal(a.body, &out); err != nil {
			t.Fatal(err)
		}
		if out.Count != len(out.Events) {
			t.Fatalf("%s: count %d for %d events", path, out.Count, len(out.Events))
		}
		return fmt.Sprint(out.Events)
	}
	for path, want := range map[string]string{
		"/threads/t/events":                 "[{1} {2} {3} {4} {5} {6}]",
		"/threads/t/events?after=4":         "[{5} {6}]",
		"/threads/t/events?after=1&limit=2": "[{2} {3}]",
		"/threads/t/events?tail=2":          "[{5} {6}]",
		"/threads/t/events?until=3":         "[{1} {2} {3}]",
		"/threads/t/events?since=" + evs[2]: "[{5} {6}]",
		"/threads/t/events?after=6":         "[]",
	} {
		if got := seqs(path); got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
}

// TestMetrics checks the appends counter, the store's group-commit
// counters and the latency histogram's route label on /metrics.
func TestMetrics(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	ts.post("t", "user", "one")
	ts.must(200, "POST", "/threads/t/events", `{"from":"user","content":"two"}`, "Idempotency-Key: k")
	ts.must(200, "POST", "/threads/t/events", `{"from":"user","content":"two"}`, "Idempotency-Key: k")
	// Made-up methods share one label, so that a client cannot grow the
	// metrics by inventing them.
	for _, m := range []string{"BREW", "WHEN", "X-1"} {
		ts.do(m, "/threads/t/events", "")
	}
	body := string(ts.must(200, "GET", "/metrics", "").body)
	for _, want := range []string{
		"agent_bridge_appends_total 3",
		// thread.created, one and two; the retry is a replay.
		"agent_bridge_store_events_total 3",
		"agent_bridge_store_replayed_total 1",
		"agent_bridge_store_rejected_total 0",
		`agent_bridge_http_request_duration_seconds_count{code="200",method="POST",route="/threads/{id}/events"} 3`,
		`agent_bridge_http_request_duration_seconds_count{code="405",method="other",route="unmatched"} 3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, m := range []string{"BREW", "WHEN", "X-1"} {
		if strings.Contains(body, `method="`+m+`"`) {
			t.Errorf("/metrics has a series for the made-up method %s", m)
		}
	}
}

// TestAnswerReplayNoted: a second answer to a permission request or a
// question, sent again with its idempotency key (a phone retrying on a bad
// network), answers with the same already_answered note as the first
// time, and stores nothing; the retry of the first answer has none.
func TestAnswerReplayNoted(t *testing.T) {
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	request := ts.must(200, "POST", "/threads/t/events", permissionRequest).obj()["event"].(map[string]any)["id"].(string)
	question := ts.must(200, "POST", "/threads/t/events",
		`{"from":"coordinator","to":"user","content":"[USER QUESTION]: which port?","meta":{"tags":["coordinator","question"]}}`).obj()["event"].(map[string]any)["id"].(string)
	for _, c := range []struct{ name, first, second string }{
		{"permission", `{"type":"control","from":"user","content":{"permission":{"event":"` + request + `","option":"allow"}}}`,
			`{"type":"control","from":"user","content":{"permission":{"event":"` + request + `","option":"reject"}}}`},
		{"question", `{"from":"user","content":"8080","meta":{"reply_to":"` + question + `"}}`,
			`{"from":"user","content":"9090","meta":{"reply_to":"` + question + `"}}`},
	} {
		first := ts.must(200, "POST", "/threads/t/events", c.first, "Idempotency-Key: "+c.name+"-1")
		if first.obj()["ignored"] != nil {
			t.Errorf("%s: the first answer is noted: %s", c.name, first.body)
		}
		second := ts.must(200, "POST", "/threads/t/events", c.second, "Idempotency-Key: "+c.name+"-2")
		note, _ := second.obj()["ignored"].(map[string]any)
		if note["code"] != agentbridge.IgnoredAlreadyAnswered {
			t.Fatalf("%s: the second answer: %s, want ignored already_answered", c.name, second.body)
		}
		head := ts.head()
		again := ts.must(200, "POST", "/threads/t/events", c.second, "Idempotency-Key: "+c.name+"-2")
		if again.obj()["replayed"] != true || !reflect.DeepEqual(again.obj()["ignored"], second.obj()["ignored"]) {
			t.Errorf("%s: the second answer replayed: %s, want replayed with the note of %s", c.name, again.body, second.body)
		}
		if first := ts.must(200, "POST", "/threads/t/events", c.first, "Idempotency-Key: "+c.name+"-1"); first.obj()["replayed"] != true || first.obj()["ignored"] != nil {
			t.Errorf("%s: the first answer replayed: %s, want replayed without a note", c.name, first.body)
		}
		if ts.head() != head {
			t.Errorf("%s: a replay stored an event", c.name)
		}
	}
}
