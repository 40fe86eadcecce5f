package bridge

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
)

// receiptsOf lists a thread's receipts through the API.
func (ts *testServer) receiptsOf(path string) []agentbridge.Receipt {
	ts.t.Helper()
	a := ts.must(200, "GET", path, "")
	var page struct{ Receipts []agentbridge.Receipt }
	if err := json.Unmarshal(a.body, &page); err != nil {
		ts.t.Fatalf("decode receipts %s: %v", a.body, err)
	}
	return page.Receipts
}

// TestReceiptsGolden pins the shapes of the receipt endpoints and their
// refusals. Run `go test ./bridge -run TestReceiptsGolden -update` after an
// intended change.
func TestReceiptsGolden(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t1")
	ev := ts.post("t1", "user", "hello @codex @gemini")
	base := "/threads/t1/receipts/" + ev.ID
	steps := []struct {
		file, method, path, body string
		status                   int
	}{
		{"put_queued", "PUT", base + "/codex", `{"from":"bridge-coordinator","state":"queued"}`, 200},
		{"put_running", "PUT", base + "/codex", `{"from":"bridge-coordinator","state":"running","invocation":"42"}`, 200},
		{"put_running_again", "PUT", base + "/codex", `{"from":"bridge-coordinator","state":"running","invocation":"42"}`, 200},
		{"put_skipped", "PUT", base + "/gemini", `{"from":"bridge-coordinator","state":"skipped","reason":"no adapter"}`, 200},
		{"get", "GET", "/threads/t1/receipts", "", 200},
		{"get_event", "GET", "/threads/t1/receipts?event=" + ev.ID, "", 200},
		{"get_other_event", "GET", "/threads/t1/receipts?event=nothing", "", 200},
		{"error_bad_state", "PUT", base + "/codex", `{"from":"bridge-coordinator","state":"done"}`, 400},
		{"error_missing_state", "PUT", base + "/codex", `{"from":"bridge-coordinator"}`, 400},
		{"error_missing_from", "PUT", base + "/codex", `{"state":"queued"}`, 400},
		{"error_unknown_field", "PUT", base + "/codex", `{"from":"c","state":"queued","seq":3}`, 400},
		{"error_wrong_type", "PUT", base + "/codex", `{"from":"c","state":7}`, 400},
		{"error_bad_participant", "PUT", base + "/-codex", `{"from":"c","state":"queued"}`, 400},
		{"error_long_reason", "PUT", base + "/codex", `{"from":"c","state":"skipped","reason":"` + strings.Repeat("x", agentbridge.MaxReceiptReason+1) + `"}`, 400},
		{"error_not_json", "PUT", base + "/codex", `[1]`, 400},
		{"error_unknown_thread", "PUT", "/threads/nope/receipts/" + ev.ID + "/codex", `{"from":"c","state":"queued"}`, 404},
		{"error_unknown_event", "PUT", "/threads/t1/receipts/01NOSUCHEVENT/codex", `{"from":"c","state":"queued"}`, 404},
		{"error_get_unknown_thread", "GET", "/threads/nope/receipts", "", 404},
	}
	for _, s := range steps {
		a := ts.do(s.method, s.path, s.body)
		if a.status != s.status {
			t.Fatalf("%s %s: status %d, want %d: %s", s.method, s.path, a.status, s.status, a.body)
		}
		got := normalize(t, a.body)
		path := filepath.Join("testdata", "receipts", s.file+".json")
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
		if string(got) != string(want) {
			t.Errorf("%s %s: answer differs from %s:\n got: %s\nwant: %s", s.method, s.path, path, got, want)
		}
	}
	// Refusals stored nothing, the repeated report moved nothing, and no
	// receipt made an event or a revision.
	got := ts.receiptsOf("/threads/t1/receipts")
	if len(got) != 2 || got[0].Participant != "codex" || got[0].State != "running" || got[1].State != "skipped" || got[1].Reason != "no adapter" {
		t.Fatalf("receipts after the refusals = %+v", got)
	}
	th := ts.must(200, "GET", "/threads/t1", "").obj()
	if th["last_seq"] != float64(2) {
		t.Fatalf("receipts changed the thread's head: %v", th)
	}

	// from_event and limit page through a long thread's receipts.
	ev2 := ts.post("t1", "user", "again @codex")
	ts.must(200, "PUT", "/threads/t1/receipts/"+ev2.ID+"/codex", `{"from":"c","state":"queued"}`)
	if got := ts.receiptsOf("/threads/t1/receipts?from_event=" + ev2.ID); len(got) != 1 || got[0].Event != ev2.ID {
		t.Errorf("from_event = %+v, want only the second event's", got)
	}
	if got := ts.receiptsOf("/threads/t1/receipts?from_event=" + ev.ID); len(got) != 3 {
		t.Errorf("from_event of the first = %d receipts, want 3", len(got))
	}
	if got := ts.receiptsOf("/threads/t1/receipts?limit=1"); len(got) != 1 || got[0].Participant != "codex" || got[0].Event != ev.ID {
		t.Errorf("limit=1 = %+v", got)
	}
	if code := ts.do("GET", "/threads/t1/receipts?event="+ev.ID+"&from_event="+ev.ID, "").errCode(); code != "invalid_field" {
		t.Errorf("event with from_event: %s, want invalid_field", code)
	}
	if code := ts.do("GET", "/threads/t1/receipts?limit=0", "").errCode(); code != "invalid_field" {
		t.Errorf("limit=0: %s, want invalid_field", code)
	}
}

// TestReceiptStream checks that each change reaches the thread's stream
// (only its own thread's) and the global stream as "event: receipt" with no
// id, and that an unchanged report is not sent again.
func TestReceiptStream(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("a")
	ts.newThread("b")
	ea := ts.post("a", "user", "in a")
	eb := ts.post("b", "user", "in b")
	sa := ts.openSSE("/threads/a/events/stream")
	sg := ts.openSSE("/events/stream")
	testutilWaitSubscribers(t, ts, "thread", 1)
	testutilWaitSubscribers(t, ts, "global", 1)
	ts.must(200, "PUT", "/threads/b/receipts/"+eb.ID+"/codex", `{"from":"c","state":"queued"}`)
	ts.must(200, "PUT", "/threads/a/receipts/"+ea.ID+"/codex", `{"from":"c","state":"queued"}`)
	ts.must(200, "PUT", "/threads/a/receipts/"+ea.ID+"/codex", `{"from":"c","state":"queued"}`)
	ts.must(200, "PUT", "/threads/a/receipts/"+ea.ID+"/codex", `{"from":"c","state":"succeeded","invocation":"7","reply":"R"}`)

	decode := func(m sseMsg) agentbridge.Receipt {
		t.Helper()
		if m.event != "receipt" || m.id != "" {
			t.Fatalf("message %+v, want an event: receipt without id", m)
		}
		var r agentbridge.Receipt
		if err := json.Unmarshal([]byte(m.data), &r); err != nil {
			t.Fatalf("decode receipt %q: %v", m.data, err)
		}
		return r
	}
	for i, want := range []string{"queued", "succeeded"} {
		r := decode(sa.next(t))
		if r.Thread != "a" || r.Event != ea.ID || r.State != want {
			t.Fatalf("thread stream receipt %d = %+v, want %s in a", i, r, want)
		}
	}
	for i, want := range []string{"b/queued", "a/queued", "a/succeeded"} {
		r := decode(sg.next(t))
		if r.Thread+"/"+r.State != want {
			t.Fatalf("global stream receipt %d = %+v, want %s", i, r, want)
		}
		if i == 2 && (r.Invocation != "7" || r.Reply != "R" || r.UpdatedAt == "") {
			t.Fatalf("succeeded receipt = %+v", r)
		}
	}
}

// TestReceiptsSurviveRestart stores receipts, closes server and store,
// reopens the file and finds them, while the event log is unchanged.
func TestReceiptsSurviveRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bridge.db")
	open := func() (*sqlite.Store, *Server) {
		st, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := NewServer(st, Options{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return st, srv
	}
	serve := func(srv *Server, method, path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		srv.handler.ServeHTTP(rec, req)
		return rec
	}
	st, srv := open()
	if rec := serve(srv, "POST", "/threads", `{"id":"t"}`); rec.Code != 200 {
		t.Fatal(rec.Body)
	}
	rec := serve(srv, "POST", "/threads/t/events", `{"from":"user","content":"hi"}`)
	var out struct{ Event agentbridge.Event }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if rec := serve(srv, "PUT", "/threads/t/receipts/"+out.Event.ID+"/codex", `{"from":"c","state":"failed","invocation":"3","reply":"E"}`); rec.Code != 200 {
		t.Fatal(rec.Body)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, srv = open()
	defer st.Close()
	rec = serve(srv, "GET", "/threads/t/receipts", "")
	var page struct{ Receipts []agentbridge.Receipt }
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Receipts) != 1 || page.Receipts[0].State != "failed" || page.Receipts[0].Reply != "E" || page.Receipts[0].Invocation != "3" {
		t.Fatalf("receipts after restart = %s", rec.Body)
	}
	if n, err := st.Head(ctx); err != nil || n != 2 {
		t.Fatalf("head after restart = %d %v, want 2 (no event for the receipt)", n, err)
	}
}

// FuzzReceiptBody feeds arbitrary bodies to the receipt parser: it never
// panics, and whatever it accepts passes validation and carries the path's
// ids.
func FuzzReceiptBody(f *testing.F) {
	for _, seed := range []string{
		`{"from":"bridge-coordinator","state":"queued"}`,
		`{"from":"c","state":"skipped","reason":"no adapter"}`,
		`{"from":"c","state":"succeeded","invocation":"12","reply":"01J"}`,
		`{"from":"c","state":"done"}`, `{"from":"","state":"queued"}`, `{"state":"queued"}`,
		`{"from":"c","state":"queued","x":1}`, `{"from":1}`, `[]`, `null`, `{`, ``, `"s"`,
		`{"from":"c","state":"queued","reason":"\u0000\ud800"}`,
	} {
		f.Add(seed, "codex")
	}
	f.Fuzz(func(t *testing.T, body, participant string) {
		in, err := parseReceiptBody([]byte(body), "t", "E1", participant)
		if err != nil {
			if agentbridge.ErrorCode(err) == agentbridge.ECodeInternal {
				t.Fatalf("untyped error for %q: %v", body, err)
			}
			return
		}
		if err := in.Validate(); err != nil {
			t.Fatalf("accepted an invalid receipt %+v: %v", in, err)
		}
		if in.Thread != "t" || in.Event != "E1" || in.Participant != participant {
			t.Fatalf("parsed ids %+v", in)
		}
	})
}
