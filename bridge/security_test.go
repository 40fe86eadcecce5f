package bridge

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// TestHostAndOrigin is a table of Host/Origin pairs allowed and denied.
func TestHostAndOrigin(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{AllowedHosts: []string{"bridge.internal"}, CORSOrigins: []string{"http://app.example:3000"}})
	ts.newThread("t")
	post := `{"from":"user","content":"hi"}`
	cases := []struct {
		name, method, host, origin string
		status                     int
		code                       string
	}{
		{"loopback ip", "GET", "127.0.0.1:5111", "", 200, ""},
		{"loopback ip other port", "GET", "127.0.0.1:1", "", 200, ""},
		{"localhost", "GET", "localhost:5111", "", 200, ""},
		{"localhost no port", "GET", "localhost", "", 200, ""},
		{"ipv6 loopback", "GET", "[::1]:5111", "", 200, ""},
		{"allowed host", "GET", "bridge.internal:8080", "", 200, ""},
		{"allowed host upper case", "GET", "BRIDGE.internal", "", 200, ""},
		{"rebinding name", "GET", "evil.example:5111", "", 403, "forbidden_host"},
		{"lan ip", "GET", "192.168.1.5:5111", "", 403, "forbidden_host"},
		{"loopback lookalike", "GET", "127.0.0.1.evil.example", "", 403, "forbidden_host"},
		{"post no origin (curl)", "POST", "127.0.0.1:5111", "", 200, ""},
		{"post same origin", "POST", "OWN", "http://OWN", 200, ""},
		{"post same origin as localhost", "POST", "OWN", "http://localhost:OWNPORT", 200, ""},
		// The Origin is never compared with the Host header, which the
		// sender writes: a page on another local port that names its own
		// origin as Host is still foreign to this listener.
		{"post origin matching a forged host", "POST", "127.0.0.1:5111", "http://127.0.0.1:5111", 403, "forbidden_origin"},
		{"post listed origin", "POST", "127.0.0.1:5111", "http://app.example:3000", 200, ""},
		{"post other site", "POST", "127.0.0.1:5111", "https://evil.example", 403, "forbidden_origin"},
		{"post other port", "POST", "127.0.0.1:5111", "http://127.0.0.1:8000", 403, "forbidden_origin"},
		{"post null origin", "POST", "127.0.0.1:5111", "null", 403, "forbidden_origin"},
		{"get other site is read-only", "GET", "127.0.0.1:5111", "https://evil.example", 200, ""},
		{"post bad host before origin", "POST", "evil.example", "http://evil.example", 403, "forbidden_host"},
	}
	own := strings.TrimPrefix(ts.url, "http://")
	_, ownPort, _ := strings.Cut(own, ":")
	for _, c := range cases {
		c.host = strings.ReplaceAll(c.host, "OWN", own)
		c.origin = strings.ReplaceAll(strings.ReplaceAll(c.origin, "OWNPORT", ownPort), "OWN", own)
		t.Run(c.name, func(t *testing.T) {
			h := []string{"Host: " + c.host}
			if c.origin != "" {
				h = append(h, "Origin: "+c.origin)
			}
			path, body := "/threads", ""
			if c.method == "POST" {
				path, body = "/threads/t/events", post
			}
			before := ts.head()
			a := ts.do(c.method, path, body, h...)
			if a.status != c.status || a.errCode() != c.code {
				t.Fatalf("got %d %q, want %d %q: %s", a.status, a.errCode(), c.status, c.code, a.body)
			}
			if c.status != 200 && ts.head() != before {
				t.Fatal("a forbidden request stored an event")
			}
			acao := a.header.Get("Access-Control-Allow-Origin")
			if c.origin == "http://app.example:3000" {
				if acao != c.origin {
					t.Errorf("listed origin got Access-Control-Allow-Origin %q", acao)
				}
			} else if acao != "" {
				t.Errorf("unlisted origin got Access-Control-Allow-Origin %q", acao)
			}
		})
	}
}

// TestPreflight checks CORS preflight for listed and unlisted origins.
func TestPreflight(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{CORSOrigins: []string{"http://app.example:3000"}})
	a := ts.do("OPTIONS", "/threads", "", "Origin: http://app.example:3000", "Access-Control-Request-Method: POST")
	if a.status != 204 || a.header.Get("Access-Control-Allow-Origin") != "http://app.example:3000" || !strings.Contains(a.header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("listed preflight: %d %v", a.status, a.header)
	}
	a = ts.do("OPTIONS", "/threads", "", "Origin: https://evil.example", "Access-Control-Request-Method: POST")
	if a.status != 403 || a.errCode() != "forbidden_origin" || a.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("unlisted preflight: %d %s", a.status, a.body)
	}
}

// TestToken checks the bearer token gate, the open routes and the login
// cookie.
func TestToken(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Token: "s3cret"})
	ts.token = ""
	cases := []struct {
		name, method, path, auth string
		status                   int
	}{
		{"ping open", "GET", "/ping", "", 200},
		{"healthz open", "GET", "/healthz", "", 200},
		{"threads needs token", "GET", "/threads", "", 401},
		{"metrics needs token", "GET", "/metrics", "", 401},
		{"stream needs token", "GET", "/events/stream", "", 401},
		{"wrong token", "GET", "/threads", "Bearer nope", 401},
		{"wrong scheme", "GET", "/threads", "Basic s3cret", 401},
		{"token prefix", "GET", "/threads", "Bearer s3cre", 401},
		{"right token", "GET", "/threads", "Bearer s3cret", 200},
		{"scheme case", "GET", "/threads", "bearer s3cret", 200},
		{"post needs token", "POST", "/threads", "", 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h []string
			if c.auth != "" {
				h = append(h, "Authorization: "+c.auth)
			}
			a := ts.do(c.method, c.path, "", h...)
			if a.status != c.status {
				t.Fatalf("got %d, want %d: %s", a.status, c.status, a.body)
			}
			if c.status == 401 && (a.errCode() != "unauthorized" || a.header.Get("WWW-Authenticate") == "") {
				t.Fatalf("401 answer: %v %s", a.header, a.body)
			}
		})
	}

	if a := ts.do("POST", "/auth/login", `{"token":"nope"}`); a.status != 401 {
		t.Fatalf("login with a wrong token: %d", a.status)
	}
	a := ts.must(200, "POST", "/auth/login", `{"token":"s3cret"}`)
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == TokenCookie {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login cookie = %+v", cookie)
	}
	ts.must(200, "GET", "/threads", "", "Cookie: "+TokenCookie+"=s3cret")
	ts.must(401, "GET", "/threads", "", "Cookie: "+TokenCookie+"=wrong")
}

// TestNewServerRefusesInsecureAddr checks the non-loopback rule.
func TestNewServerRefusesInsecureAddr(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.168.1.5:5111", "[::]:0"} {
		if _, err := NewServer(st, Options{Addr: addr}); !errors.Is(err, ErrInsecureAddr) {
			t.Errorf("NewServer(%q) without token: %v, want ErrInsecureAddr", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		if _, err := NewServer(st, Options{Addr: addr}); err != nil {
			t.Errorf("NewServer(%q): %v", addr, err)
		}
	}
	if _, err := NewServer(st, Options{Addr: "0.0.0.0:0", Token: "t"}); err != nil {
		t.Errorf("NewServer on 0.0.0.0 with a token: %v", err)
	}
	if _, err := NewServer(st, Options{Addr: "127.0.0.1:0", CORSOrigins: []string{"app.example"}}); err == nil {
		t.Error("NewServer accepted a CORS origin without scheme")
	}
}

// TestStatusTable pins the code → status mapping of the contract.
func TestStatusTable(t *testing.T) {
	t.Parallel()
	want := map[int][]string{
		400: {"missing_field", "invalid_field", "invalid_control", "unknown_field", "field_not_allowed", "invalid_json"},
		413: {"body_too_large"}, 401: {"unauthorized"}, 403: {"forbidden_host", "forbidden_origin"},
		404: {"not_found", "thread_not_found", "event_not_found"}, 405: {"method_not_allowed"},
		409: {"thread_exists", "participant_muted", "thread_paused", "cursor_ahead", "not_running"},
		422: {"unknown_reply_to"}, 500: {"internal", "no_such_code"},
	}
	for status, codes := range want {
		for _, c := range codes {
			if got := httpjson.StatusFor(c); got != status {
				t.Errorf("StatusFor(%q) = %d, want %d", c, got, status)
			}
		}
	}
}

// TestHeadersTooLarge checks the 64 KiB cap on request headers.
func TestHeadersTooLarge(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	if a := ts.do("GET", "/ping", "", "X-Big: "+strings.Repeat("a", 70<<10)); a.status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("70 KiB of headers: %d, want 431", a.status)
	}
	ts.must(200, "GET", "/ping", "", "X-Big: "+strings.Repeat("a", 32<<10))
}
