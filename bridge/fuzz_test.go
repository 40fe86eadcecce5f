package bridge

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzEventsPost posts arbitrary bodies through the handler: the server
// never answers 5xx, a 4xx stores nothing, and a 200 stores exactly one
// event.
func FuzzEventsPost(f *testing.F) {
	for _, seed := range []string{
		`{"from":"user","content":"hi"}`,
		`{"from":"user","to":"codex","content":"hi @codex","meta":{"tags":["a"],"reply_to":null,"hop":2}}`,
		`{"type":"control","from":"user","content":{"pause":{"on":true}}}`,
		`{"type":"control","from":"user","content":"{\"mute\":{\"targets\":[\"x\"]}}"}`,
		`{"type":"control","from":"user","content":{"invite":{"participant_id":"a","profile":{"client":"c","model":"m"}}}}`,
		`{"type":"thread.renamed","from":"user","content":"new"}`,
		`{"type":"custom.kind","from":"bot","content":[1,2]}`,
		`{"from":"user","content":"x","meta":{"reply_to":"nope"}}`,
		`{"from":"user","content":"x","seq":1}`,
		`{"from":"","content":""}`,
		`{"from":"user","content":"\u0000"}`,
		`[]`, `null`, `"str"`, `{`, ``, `{"meta":{"hop":-1},"from":"u","content":"x"}`,
		`{"from":"user","from":"evil","content":"hi"}`,
		`{"type":"message","type":"control","from":"user","content":{"pause":{"on":true}}}`,
		`{"type":"control","from":"user","content":{"pause":{"on":true,"on":false}}}`,
	} {
		f.Add(seed)
	}
	st := openStore(f)
	srv, err := NewServer(st, Options{Addr: "127.0.0.1:0", MaxBody: 4096, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	h := srv.handler
	ctx := context.Background()
	post := func(path, body string) *http.Request {
		r := httptest.NewRequest("POST", "http://127.0.0.1"+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, post("/threads", `{"id":"fz"}`))
	if rec.Code != 200 {
		f.Fatalf("create thread: %d %s", rec.Code, rec.Body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		before, err := st.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, post("/threads/fz/events", body))
		after, err := st.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case rec.Code >= 500:
			t.Fatalf("body %q: %d %s", body, rec.Code, rec.Body)
		case rec.Code >= 400 && after != before:
			t.Fatalf("body %q: refused with %d but stored an event", body, rec.Code)
		case rec.Code == 200 && after != before+1:
			t.Fatalf("body %q: accepted but head went %d → %d", body, before, after)
		}
	})
}
