package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestThreadStream checks the per-thread SSE stream: it starts at the end
// with no cursor, carries id: <seq>, resumes by after, since and
// Last-Event-ID, and stays quiet about other threads.
func TestThreadStream(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	ts.newThread("other")
	old := ts.post("t", "user", "before the stream")

	live := ts.openSSE("/threads/t/events/stream")
	ts.post("other", "user", "elsewhere")
	e3 := ts.post("t", "user", "live one")
	id, ev := live.nextEvent(t)
	if ev.ID != e3.ID || id != "3" || ev.Seq != 3 {
		t.Fatalf("live stream got id %s event %+v, want seq 3 %s", id, ev, e3.ID)
	}

	want := []string{old.ID, e3.ID}
	for _, c := range []struct {
		path   string
		header []string
	}{
		{"/threads/t/events/stream?after=1", nil},
		{"/threads/t/events/stream", []string{"Last-Event-ID: 1"}},
		{"/threads/t/events/stream?after=3", []string{"Last-Event-ID: 1"}},
		{"/threads/t/events/stream?since=" + ts.must(200, "GET", "/threads/t/events?until=1", "").obj()["events"].([]any)[0].(map[string]any)["ts"].(string), nil},
	} {
		s := ts.openSSE(c.path, c.header...)
		for _, w := range want {
			if _, ev := s.nextEvent(t); ev.ID != w {
				t.Fatalf("%s %v: got %s, want %s", c.path, c.header, ev.ID, w)
			}
		}
		e := ts.post("t", "user", "after resume "+c.path)
		want = append(want, e.ID)
		if id, ev := s.nextEvent(t); ev.ID != e.ID || id != strconv.FormatInt(e.Seq, 10) {
			t.Fatalf("%s: got %s %s, want %d %s", c.path, id, ev.ID, e.Seq, e.ID)
		}
		s.close()
		if _, ev := live.nextEvent(t); ev.ID != e.ID {
			t.Fatalf("live stream missed %s", e.ID)
		}
	}
}

// TestGlobalStream checks the global SSE stream: id: <gseq> across threads,
// presence changes as "event: presence" without an id, and resume by
// Last-Event-ID.
func TestGlobalStream(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("a")
	ts.newThread("b")
	s := ts.openSSE("/events/stream")
	ea := ts.post("a", "user", "in a")
	eb := ts.post("b", "codex", "in b")
	for _, want := range []agentbridge.Event{ea, eb} {
		id, ev := s.nextEvent(t)
		if ev.ID != want.ID || id != strconv.FormatInt(want.GSeq, 10) {
			t.Fatalf("got %s %s, want %d %s", id, ev.ID, want.GSeq, want.ID)
		}
	}
	ts.must(200, "POST", "/threads/b/presence", `{"from":"codex","state":"thinking","details":{"step":1}}`)
	m := s.next(t)
	if m.event != "presence" || m.id != "" {
		t.Fatalf("got %+v, want a presence message without id", m)
	}
	var p agentbridge.Presence
	if err := json.Unmarshal([]byte(m.data), &p); err != nil {
		t.Fatal(err)
	}
	if p.Thread != "b" || p.ID != "codex" || p.State != "thinking" || p.Stale || string(p.Details) != `{"step":1}` {
		t.Fatalf("presence = %+v", p)
	}

	r := ts.openSSE("/events/stream", "Last-Event-ID: "+strconv.FormatInt(ea.GSeq, 10))
	if _, ev := r.nextEvent(t); ev.ID != eb.ID {
		t.Fatalf("resume from %d got %s, want %s", ea.GSeq, ev.ID, eb.ID)
	}
	r2 := ts.openSSE("/events/stream?after=0")
	if _, ev := r2.nextEvent(t); ev.Type != agentbridge.TypeThreadCreated || ev.GSeq != 1 {
		t.Fatalf("after=0 first event = %+v", ev)
	}
}

// TestPresence checks the GET shape and staleness after the TTL.
func TestPresence(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{PresenceTTL: time.Second})
	ts.newThread("t")
	ts.must(200, "POST", "/threads/t/presence", `{"from":"codex","state":"typing"}`)
	a := ts.must(200, "GET", "/threads/t/presence", "").obj()
	ps := a["participants"].([]any)
	if a["thread"] != "t" || a["ttl_seconds"] != float64(1) || len(ps) != 1 {
		t.Fatalf("presence = %v", a)
	}
	p := ps[0].(map[string]any)
	for _, k := range []string{"id", "state", "updated_at", "stale", "details"} {
		if _, ok := p[k]; !ok {
			t.Errorf("presence entry lacks %q: %v", k, p)
		}
	}
	if p["stale"] != false || p["state"] != "typing" {
		t.Fatalf("fresh presence = %v", p)
	}
	waitStale := func() bool {
		p := ts.must(200, "GET", "/threads/t/presence", "").obj()["participants"].([]any)[0].(map[string]any)
		return p["stale"] == true
	}
	waitFor(t, 10*time.Second, "presence to go stale", waitStale)
}

// TestCursorAhead checks that every kind of cursor past the head is a 409
// with the head, before any byte of a stream.
func TestCursorAhead(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	ts.post("t", "user", "x")
	head := ts.head()
	cases := []struct {
		path     string
		header   []string
		wantHead int64
	}{
		{"/threads/t/events/stream?after=3", nil, 2},
		{"/threads/t/events/stream", []string{"Last-Event-ID: 9"}, 2},
		{"/threads/t/events?after=3", nil, 2},
		{fmt.Sprintf("/events/stream?after=%d", head+1), nil, head},
		{"/events/stream", []string{fmt.Sprintf("Last-Event-ID: %d", head+5)}, head},
		{fmt.Sprintf("/events?after=%d", head+1), nil, head},
		{fmt.Sprintf("/events?after=%d&wait=5", head+1), nil, head},
	}
	for _, c := range cases {
		a := ts.do("GET", c.path, "", c.header...)
		if a.status != 409 || a.errCode() != "cursor_ahead" || a.errField("head") != float64(c.wantHead) {
			t.Errorf("%s %v: got %d %s, want 409 cursor_ahead head %d", c.path, c.header, a.status, a.body, c.wantHead)
		}
	}
}

// TestLongPoll checks that the global long-poll answers on an append, times
// out empty, and reports next and head.
func TestLongPoll(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	head := ts.head()

	empty := ts.must(200, "GET", fmt.Sprintf("/events?after=%d&wait=1", head), "").obj()
	if len(empty["events"].([]any)) != 0 || empty["next"] != float64(head) || empty["head"] != float64(head) {
		t.Fatalf("timed-out poll = %v", empty)
	}

	done := make(chan answer, 1)
	go func() {
		done <- ts.do("GET", fmt.Sprintf("/events?after=%d&wait=60", head), "")
	}()
	testutilWaitSubscribers(t, ts, "poll", 1)
	e := ts.post("t", "user", "wake up")
	select {
	case a := <-done:
		obj := a.obj()
		evs := obj["events"].([]any)
		if a.status != 200 || len(evs) != 1 || evs[0].(map[string]any)["id"] != e.ID || obj["next"] != float64(e.GSeq) || obj["head"] != float64(e.GSeq) {
			t.Fatalf("woken poll = %d %s", a.status, a.body)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("long-poll did not answer after an append")
	}

	first := ts.must(200, "GET", "/events?after=0&limit=1", "").obj()
	if len(first["events"].([]any)) != 1 || first["next"] != float64(1) || first["head"] != float64(e.GSeq) {
		t.Fatalf("after=0&limit=1 = %v", first)
	}
}

// testutilWaitSubscribers waits until the gauge of open subscribers of a
// kind reaches n, so a test knows its stream or poll is waiting.
func testutilWaitSubscribers(t testing.TB, ts *testServer, kind string, n int) {
	t.Helper()
	waitFor(t, 10*time.Second, kind+" subscribers", func() bool {
		return subscriberCount(ts.srv, kind) >= float64(n)
	})
}

// TestShutdownClosesStreams checks that Close ends open SSE streams and
// long-polls instead of waiting for them.
func TestShutdownClosesStreams(t *testing.T) {
	t.Parallel()
	// No goroutine of this test is left once the server and the store are
	// closed; only this test's count, as the other tests' servers run
	// beside it.
	t.Cleanup(testutil.CheckGoroutines(t))
	st := openStore(t)
	srv, err := NewServer(st, Options{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, srv: srv, store: st, url: srv.URL()}
	ts.newThread("t")
	s1 := ts.openSSE("/events/stream")
	s2 := ts.openSSE("/threads/t/events/stream")
	poll := make(chan answer, 1)
	go func() { poll <- ts.do("GET", "/events?after=1&wait=60", "") }()
	testutilWaitSubscribers(t, ts, "poll", 1)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatalf("close: %v (streams held the shutdown)", err)
	}
	for _, s := range []*sseStream{s1, s2} {
		select {
		case <-s.done:
		case <-ctx.Done():
			t.Fatal("stream still open after Close")
		}
	}
	if a := <-poll; a.status != 200 {
		t.Fatalf("poll during shutdown: %d %s", a.status, a.body)
	}
	if _, err := http.Get(srv.URL() + "/ping"); err == nil {
		t.Fatal("server still answering after Close")
	}
}

// TestKeepAlive checks that an idle stream gets keep-alive comments.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{KeepAlive: 20 * time.Millisecond})
	ts.newThread("t")
	for _, path := range []string{"/events/stream", "/threads/t/events/stream"} {
		s := ts.openSSE(path)
		select {
		case m := <-s.msgs:
			if m.event != "keep-alive" {
				t.Fatalf("%s: idle stream sent %+v", path, m)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no keep-alive", path)
		}
	}
}

// TestSlowSubscriberDoesNotBlockAppends opens a stream that never reads
// and checks that appends far beyond the socket buffers still complete.
func TestSlowSubscriberDoesNotBlockAppends(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /events/stream?after=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	testutilWaitSubscribers(t, ts, "global", 1)
	big := strings.Repeat("x", 16<<10)
	const n = 400 // 6.4 MB of events, far more than the socket buffers hold
	for i := range n {
		ts.post("t", "user", fmt.Sprintf("%d %s", i, big))
	}
	if got := ts.must(200, "GET", "/threads/t/events?tail=1", "").obj()["events"].([]any)[0].(map[string]any)["seq"]; got != float64(n+1) {
		t.Fatalf("last seq = %v, want %d", got, n+1)
	}
}

// TestStreamsAcrossTheTail: over a store whose tail holds 4 events, streams
// that start further back read the database, then follow from the tail,
// and fall back to the database when a burst outruns the tail. Each gets
// every event of its scope once, in order, whichever way it came.
func TestStreamsAcrossTheTail(t *testing.T) {
	t.Parallel()
	ts := newTestServerWith(t, Options{}, sqlite.Options{TailEvents: 4})
	ts.newThread("a")
	ts.newThread("b")
	n := 0
	post := func(count int) {
		for range count {
			th := "a"
			if n%3 == 2 {
				th = "b"
			}
			ts.post(th, "user", fmt.Sprint("m", n))
			n++
		}
	}
	post(12)
	global := ts.openSSE("/events/stream?after=0")
	thread := ts.openSSE("/threads/a/events/stream?after=0")
	fromTail := ts.openSSE("/threads/b/events/stream")
	post(3)
	post(40)
	ctx := context.Background()
	all, err := ts.store.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	onA, err := ts.store.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "a", After: -1})
	if err != nil {
		t.Fatal(err)
	}
	onB, err := ts.store.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "b", After: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		s    *sseStream
		want []agentbridge.Event
	}{{"global", global, all}, {"thread a", thread, onA}, {"thread b from its end", fromTail, onB}} {
		for i, w := range c.want {
			if _, ev := c.s.nextEvent(t); ev.ID != w.ID || ev.Seq != w.Seq || ev.Text() != w.Text() {
				t.Fatalf("%s: event %d is %s (seq %d), want %s (seq %d)", c.name, i, ev.ID, ev.Seq, w.ID, w.Seq)
			}
		}
	}
}

// TestGlobalStreamReadsOtherWritersFirst: a global stream that starts
// after another process appended to the same file (this bridge has not
// committed since) gets that event from its first read, which is the
// database's; the tail knows only this bridge's commits.
func TestGlobalStreamReadsOtherWritersFirst(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("a")
	mine := ts.post("a", "user", "mine")
	other, err := sqlite.Open(context.Background(), ts.store.Path(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Append(context.Background(), agentbridge.AppendRequest{Thread: "a", Input: agentbridge.EventInput{From: "user", Content: json.RawMessage(`"from elsewhere"`)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	s := ts.openSSE("/events/stream?after=" + strconv.FormatInt(mine.GSeq, 10))
	if _, ev := s.nextEvent(t); ev.ID != foreign.Event.ID {
		t.Fatalf("global stream's first event is %s (%q), want the other writer's %s", ev.ID, ev.Text(), foreign.Event.ID)
	}
}
