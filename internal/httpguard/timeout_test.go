package httpguard_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// slowRequest opens a connection to base and sends the headers of a
// request announcing a 100,000-byte body, then one byte of it.
func slowRequest(t *testing.T, base, method, path, auth string) net.Conn {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n", method, path, u.Host)
	if auth != "" {
		fmt.Fprintf(conn, "Authorization: %s\r\n", auth)
	}
	if _, err := io.WriteString(conn, "\r\n{"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestSlowBodyIsCut sends, to every listener, a body that trickles in one
// byte at a time and would take hours to arrive: the listener must close
// the connection once the request timeout has passed, not wait for it.
// The bytes keep coming while the test waits, so the server is never
// idle-timed out: only the request deadline can end it.
func TestSlowBodyIsCut(t *testing.T) {
	s := startStack(t, stackOptions{requestTimeout: 300 * time.Millisecond})
	for _, tg := range []struct{ name, base, path string }{
		{"bridge append", s.bridgeURL, "/threads"},
		{"coordinator cancel", s.statusURL, "/invocations/1/cancel"},
	} {
		t.Run(tg.name, func(t *testing.T) {
			conn := slowRequest(t, tg.base, "POST", tg.path, "Bearer "+token)
			closed := make(chan string, 1)
			go func() {
				// Read whatever answer comes until the server closes.
				b, _ := io.ReadAll(conn)
				closed <- string(b)
			}()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(30 * time.Second)
			for sent := 1; ; sent++ {
				select {
				case answer := <-closed:
					if sent >= 100000 {
						t.Fatalf("the whole body was sent")
					}
					if tg.name == "bridge append" && !strings.Contains(answer, " 408 ") {
						t.Errorf("the bridge answered %q, want 408 request_timeout", firstLine(answer))
					}
					return
				case <-deadline:
					t.Fatalf("the connection is still open after %d bytes", sent)
				case <-tick.C:
					_, _ = conn.Write([]byte(" "))
				}
			}
		})
	}
}

// TestWrongTokenAnsweredBeforeBody checks that authentication is decided
// before a byte of the body is waited for: a request with a wrong token
// and a body that never comes gets its 401 while the body is still
// missing, with the request timeout far away, and the connection closes.
func TestWrongTokenAnsweredBeforeBody(t *testing.T) {
	s := startStack(t, stackOptions{requestTimeout: time.Hour})
	for _, tg := range []struct{ name, base, path string }{
		{"bridge append", s.bridgeURL, "/threads"},
		{"coordinator cancel", s.statusURL, "/invocations/1/cancel"},
	} {
		t.Run(tg.name, func(t *testing.T) {
			conn := slowRequest(t, tg.base, "POST", tg.path, "Bearer wrong")
			// Far below the request timeout: only an answer given before
			// the body arrives can come in time.
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer while the body is missing: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
				t.Fatalf("got %d (close %v), want 401 and the connection closed", resp.StatusCode, resp.Close)
			}
		})
	}
}

// TestStreamOutlivesRequestTimeout checks that the request deadline ends
// with the request: an SSE stream open for many times the request timeout
// still gets its keep-alives and events.
func TestStreamOutlivesRequestTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	s := startStack(t, stackOptions{requestTimeout: timeout, keepAlive: 20 * time.Millisecond})
	req, _ := http.NewRequest("GET", s.bridgeURL+"/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	start := time.Now()
	for time.Since(start) < 5*timeout {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after %s: %v", time.Since(start), err)
		}
		_ = line
	}
	// Still delivering events, not only keep-alives.
	post, _ := http.NewRequest("POST", s.bridgeURL+"/threads", strings.NewReader(`{"name":"late"}`))
	post.Header.Set("Authorization", "Bearer "+token)
	post.Header.Set("Content-Type", "application/json")
	pr, err := s.client.Do(post)
	if err != nil {
		t.Fatal(err)
	}
	pr.Body.Close()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before the event: %v", err)
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"late"`) {
			return
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\r\n")
	return l
}

// TestStreamCap fills the bridge's cap of streams (SSE and waiting
// long-polls): the one over gets 503 too_many_streams, a poll that does
// not wait is still answered, and a closed stream frees its slot.
func TestStreamCap(t *testing.T) {
	s := startStack(t, stackOptions{maxStreams: 2, bridgeOnly: true})
	open := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest("GET", s.bridgeURL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		return s.client.Do(req)
	}
	var streams []*http.Response
	for _, p := range []string{"/events/stream", "/events/stream"} {
		resp, err := open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %d", len(streams)+1, resp.StatusCode)
		}
		streams = append(streams, resp)
	}
	for _, p := range []string{"/events/stream", "/events?wait=30"} {
		code, status, _ := s.send(t, mustRequest(t, s.bridgeURL+p))
		if status != http.StatusServiceUnavailable || code != "too_many_streams" {
			t.Fatalf("%s over the cap: %d %q, want 503 too_many_streams", p, status, code)
		}
	}
	if _, status, _ := s.send(t, mustRequest(t, s.bridgeURL+"/events?wait=0")); status != http.StatusOK {
		t.Fatalf("a poll that does not wait: %d", status)
	}
	streams[0].Body.Close()
	testutil.WaitFor(t, 10*time.Second, "the closed stream's slot", func() bool {
		resp, err := open("/events/stream")
		if err != nil {
			return false
		}
		resp.Body.Close() // without reading: a stream's body never ends
		return resp.StatusCode == http.StatusOK
	})
	streams[1].Body.Close()
}

func mustRequest(t *testing.T, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}
