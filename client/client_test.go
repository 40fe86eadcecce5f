package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

func TestErrorDecoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		ctype    string
		body     string
		wantCode string
		wantMsg  string
		wantHead int64
	}{
		{"server error JSON", 404, "application/json",
			`{"error":{"code":"thread_not_found","message":"There is no thread \"x\".","thread":"x"}}`,
			"thread_not_found", `There is no thread "x".`, -1},
		{"cursor ahead carries the head", 409, "application/json",
			`{"error":{"code":"cursor_ahead","message":"The cursor 9 is past the end (5).","head":5}}`,
			"cursor_ahead", "The cursor 9 is past the end (5).", 5},
		{"plain text 431", 431, "text/plain", "431 Request Header Fields Too Large",
			"headers_too_large", "The server answered 431 Request Header Fields Too Large: 431 Request Header Fields Too Large.", -1},
		{"HTML from a proxy", 502, "text/html", "<html>\n<body>bad   gateway</body></html>",
			"unavailable", "The server answered 502 Bad Gateway: <html> <body>bad gateway</body></html>.", -1},
		{"empty 401", 401, "", "", "unauthorized", "The server answered 401 Unauthorized.", -1},
		{"JSON without an error object", 500, "application/json", `{"oops":true}`,
			"internal", `The server answered 500 Internal Server Error: {"oops":true}.`, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.ctype != "" {
					w.Header().Set("Content-Type", tt.ctype)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			_, err := New(srv.URL).Thread(t.Context(), "x")
			var e *agentbridge.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *agentbridge.Error", err, err)
			}
			if e.Code != tt.wantCode || e.Message != tt.wantMsg || e.Status != tt.status {
				t.Errorf("got code %q message %q status %d, want %q %q %d", e.Code, e.Message, e.Status, tt.wantCode, tt.wantMsg, tt.status)
			}
			if tt.wantHead >= 0 && (e.Head == nil || *e.Head != tt.wantHead) {
				t.Errorf("head = %v, want %d", e.Head, tt.wantHead)
			}
		})
	}
}

func TestTokenSentAndKeptOutOfErrors(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token-value"
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"code":"unauthorized","message":"A valid bearer token is required."}}`)
	}))
	defer srv.Close()
	c := New(srv.URL+"/", WithToken(token))
	if c.URL() != srv.URL {
		t.Errorf("URL() = %q, want %q without the trailing slash", c.URL(), srv.URL)
	}
	_, err := c.Append(t.Context(), "t", agentbridge.EventInput{From: "user", Content: []byte(`"hi"`)}, "k1")
	if err == nil || strings.Contains(err.Error(), token) {
		t.Fatalf("err = %v: want an error that does not contain the token", err)
	}
	_, err = c.Stream(t.Context(), "t", -1)
	if err == nil || strings.Contains(err.Error(), token) {
		t.Fatalf("stream err = %v: want an error that does not contain the token", err)
	}
	for _, h := range got {
		if h != "Bearer "+token {
			t.Errorf("Authorization = %q, want the bearer token", h)
		}
	}
	if len(got) != 2 {
		t.Errorf("server saw %d requests, want 2", len(got))
	}
}

func TestNetworkErrorsWrapped(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := New(url).Ping(t.Context())
	if err == nil || !strings.HasPrefix(err.Error(), "ping: ") {
		t.Fatalf("err = %v, want it wrapped with the operation", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = New(url).Append(ctx, "t", agentbridge.EventInput{From: "user"}, "")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want errors.Is(err, context.Canceled)", err)
	}
}

// sseHandler serves the given frames, flushing after each, then holds the
// stream open until the client goes away.
func sseHandler(frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		rc := http.NewResponseController(w)
		for _, f := range frames {
			io.WriteString(w, f)
			rc.Flush()
		}
		<-r.Context().Done()
	}
}

func TestStreamItems(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(sseHandler(
		": keep-alive\n\n",
		"id: 5\ndata: {\"id\":\"E1\",\"seq\":5,\"gseq\":9,\"thread\":\"t\",\"type\":\"message\",\"from\":\"user\",\"to\":\"all\",\"content\":\"hi\",\"meta\":{}}\n\n",
		"event: presence\ndata: {\"thread\":\"t\",\"id\":\"codex\",\"state\":\"thinking\",\"updated_at\":\"x\",\"stale\":false,\"details\":null}\n\n",
		"event: unknown-kind\ndata: {}\n\n",
		"id: 6\r\ndata: {\"id\":\"E2\",\"seq\":6,\"type\":\"message\",\"from\":\"a\",\r\ndata: \"to\":\"all\",\"content\":\"x\"}\r\n\r\n",
	))
	defer srv.Close()
	s, err := New(srv.URL).StreamAll(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	it, err := s.Next()
	if err != nil || it.Event == nil || it.Event.ID != "E1" || it.ID != "5" || it.Event.Text() != "hi" {
		t.Fatalf("first item = %+v, %v", it, err)
	}
	it, err = s.Next()
	if err != nil || it.Presence == nil || it.Presence.ID != "codex" || it.Presence.State != "thinking" || it.ID != "" {
		t.Fatalf("second item = %+v, %v", it, err)
	}
	it, err = s.Next()
	if err != nil || it.Event == nil || it.Event.ID != "E2" || it.ID != "6" {
		t.Fatalf("third item (multi-line data, CRLF) = %+v, %v", it, err)
	}

	// Close from another goroutine unblocks a pending Next with io.EOF.
	done := make(chan error, 1)
	go func() {
		_, err := s.Next()
		done <- err
	}()
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("Next after Close = %v, want io.EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after Close")
	}
}

func TestStreamContextCancel(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(sseHandler(": keep-alive\n\n"))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	s, err := New(srv.URL).Stream(ctx, "t", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		_, err := s.Next()
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Next after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after the context ended")
	}
}

func TestStreamEndsWithEOFAndRejectsNonSSE(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/threads/t/events/stream" {
			if got := r.URL.Query().Get("after"); got != "" {
				http.Error(w, fmt.Sprintf("unexpected after=%s", got), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"id\":\"E\"}\n\ndata: {\"id\":\"partial\"}\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"events":[]}`)
	}))
	defer srv.Close()
	c := New(srv.URL)
	s, err := c.Stream(t.Context(), "t", -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if it, err := s.Next(); err != nil || it.Event.ID != "E" {
		t.Fatalf("Next = %+v, %v", it, err)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("Next at the end = %v, want io.EOF (the partial message dropped)", err)
	}
	if _, err := New(srv.URL).StreamAll(t.Context(), 0); err == nil || !strings.Contains(err.Error(), "not an event stream") {
		t.Fatalf("StreamAll against JSON = %v, want a content type error", err)
	}
}

// A burst of concurrent requests, like the coordinator's presence changes
// and replies when many runs start or end together, reuses the
// connections of the burst before: net/http's default idle pool of two
// per host made each request beyond two dial, and close, a connection of
// its own.
func TestBurstsReuseConnections(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	dials, arrived := 0, 0
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		mu.Unlock()
		<-release // hold every request of a burst open together
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true,"version":"test"}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			dials++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	c := New(srv.URL)
	const burst = 50
	for round := range 3 {
		var wg sync.WaitGroup
		for range burst {
			wg.Go(func() {
				if _, err := c.Ping(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		// Every request of the burst is in the server before any ends.
		testutil.WaitFor(t, 10*time.Second, "the burst's requests to arrive", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return arrived == burst*(round+1)
		})
		close(release)
		wg.Wait()
		release = make(chan struct{})
		mu.Lock()
		n := dials
		mu.Unlock()
		if n != burst {
			t.Fatalf("after burst %d of %d concurrent requests: %d connections dialed, want %d", round+1, burst, n, burst)
		}
	}
}
