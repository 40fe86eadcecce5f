package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// testServer is a real server on 127.0.0.1:0 over a real SQLite file.
type testServer struct {
	t     testing.TB
	srv   *Server
	store *sqlite.Store
	url   string
	token string
}

func openStore(t testing.TB) *sqlite.Store { return openStoreWith(t, sqlite.Options{}) }

func openStoreWith(t testing.TB, o sqlite.Options) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "bridge.db"), o)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

func newTestServer(t testing.TB, opts Options) *testServer {
	t.Helper()
	return newTestServerWith(t, opts, sqlite.Options{})
}

// newTestServerWith is newTestServer over a store opened with so.
func newTestServerWith(t testing.TB, opts Options, so sqlite.Options) *testServer {
	t.Helper()
	// Registered first, so it runs last: after the server and the store
	// have closed, none of their goroutines may be left.
	t.Cleanup(testutil.CheckGoroutines(t))
	st := openStoreWith(t, so)
	ts := serve(t, st, opts)
	ts.store = st
	return ts
}

// serve opens a server over store on 127.0.0.1, closed when the test
// ends; testServer.store is left to the caller, as store may be any
// EventStore (a wrapper that counts reads, PostgreSQL).
func serve(t testing.TB, store Store, opts Options) *testServer {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := NewServer(store, opts)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	if err := srv.Open(); err != nil {
		t.Fatalf("open server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return &testServer{t: t, srv: srv, url: srv.URL(), token: opts.Token}
}

// answer is a decoded HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// obj decodes the body as a JSON object.
func (a answer) obj() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(a.body, &m)
	return m
}

// errCode returns error.code of an error answer.
func (a answer) errCode() string {
	e, _ := a.obj()["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (a answer) errField(k string) any {
	e, _ := a.obj()["error"].(map[string]any)
	return e[k]
}

// do sends a request; headers are "Name: value" strings.
func (ts *testServer) do(method, path, body string, headers ...string) answer {
	ts.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.url+path, rd)
	if err != nil {
		ts.t.Fatalf("new request: %v", err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if ts.token != "" {
		req.Header.Set("Authorization", "Bearer "+ts.token)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		if strings.EqualFold(k, "Host") {
			req.Host = strings.TrimSpace(v)
			continue
		}
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatalf("read %s %s: %v", method, path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// must sends a request and fails the test unless the status is want.
func (ts *testServer) must(want int, method, path, body string, headers ...string) answer {
	ts.t.Helper()
	a := ts.do(method, path, body, headers...)
	if a.status != want {
		ts.t.Fatalf("%s %s: status %d, want %d: %s", method, path, a.status, want, a.body)
	}
	return a
}

// newThread creates a thread with the given id.
func (ts *testServer) newThread(id string) {
	ts.t.Helper()
	ts.must(200, "POST", "/threads", `{"id":"`+id+`","name":"thread `+id+`"}`)
}

// post appends a message and returns the event.
func (ts *testServer) post(thread, from, content string) agentbridge.Event {
	ts.t.Helper()
	b, _ := json.Marshal(map[string]any{"from": from, "content": content})
	a := ts.must(200, "POST", "/threads/"+thread+"/events", string(b))
	var out struct{ Event agentbridge.Event }
	if err := json.Unmarshal(a.body, &out); err != nil {
		ts.t.Fatalf("decode append answer: %v", err)
	}
	return out.Event
}

// head is the store's last gseq.
func (ts *testServer) head() int64 {
	ts.t.Helper()
	h, err := ts.store.Head(context.Background())
	if err != nil {
		ts.t.Fatalf("head: %v", err)
	}
	return h
}

// sseMsg is one Server-Sent Event.
type sseMsg struct {
	id, event, data string
}

// sseStream reads an open SSE answer; its reads end when the test's
// context does, so a missing event fails instead of hanging.
type sseStream struct {
	resp   *http.Response
	cancel context.CancelFunc
	msgs   chan sseMsg
	done   chan struct{}
}

// openSSE opens a stream and fails unless it answers 200.
func (ts *testServer) openSSE(path string, headers ...string) *sseStream {
	ts.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.url+path, nil)
	if ts.token != "" {
		req.Header.Set("Authorization", "Bearer "+ts.token)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		ts.t.Fatalf("open %s: %v", path, err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		ts.t.Fatalf("open %s: status %d: %s", path, resp.StatusCode, b)
	}
	s := &sseStream{resp: resp, cancel: cancel, msgs: make(chan sseMsg, 1024), done: make(chan struct{})}
	go s.read()
	ts.t.Cleanup(s.close)
	return s
}

func (s *sseStream) read() {
	defer close(s.done)
	defer close(s.msgs)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var m sseMsg
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() > 0 || m.event != "" {
				m.data = data.String()
				s.msgs <- m
			}
			m, data = sseMsg{}, bytes.Buffer{}
		case strings.HasPrefix(line, ":"):
			if strings.TrimSpace(line[1:]) == "keep-alive" {
				s.msgs <- sseMsg{event: "keep-alive"}
			}
		case strings.HasPrefix(line, "id: "):
			m.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			m.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data.WriteString(line[6:])
		}
	}
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
	<-s.done
}

// next returns the next message that is not a keep-alive, failing the test
// if the stream ends or nothing comes within the deadline.
func (s *sseStream) next(t testing.TB) sseMsg {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				t.Fatalf("stream ended while waiting for a message")
			}
			if m.event == "keep-alive" {
				continue
			}
			return m
		case <-deadline:
			t.Fatalf("no stream message within 10s")
		}
	}
}

// nextEvent returns the next data message decoded as an event.
func (s *sseStream) nextEvent(t testing.TB) (string, agentbridge.Event) {
	t.Helper()
	m := s.next(t)
	if m.event != "" {
		t.Fatalf("got %q message %s, want an event", m.event, m.data)
	}
	var ev agentbridge.Event
	if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
		t.Fatalf("decode event %q: %v", m.data, err)
	}
	return m.id, ev
}

// waitFor polls cond with a deadline (testutil.WaitFor).
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, timeout, what, cond)
}

// subscriberCount reads the open-subscriber gauge of a kind.
func subscriberCount(s *Server, kind string) float64 {
	var m dto.Metric
	if err := s.metrics.subscribers.WithLabelValues(kind).Write(&m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}
