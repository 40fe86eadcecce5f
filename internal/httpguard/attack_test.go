package httpguard_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/bridge/ui"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

const token = "s3cret-token"

// stack is a real bridge (API and UI) and a real coordinator (status API,
// runs dashboard, /metrics, cancel), both on 127.0.0.1, with the token set
// on the bridge and, as by default, the same token for the status API.
type stack struct {
	bridgeURL, statusURL string
	bridge               *bridge.Server
	// client has a transport of its own, whose idle connections are
	// closed before the goroutine check.
	client *http.Client
}

type stackOptions struct {
	requestTimeout time.Duration
	maxStreams     int
	keepAlive      time.Duration
	// bridgeOnly starts no coordinator (whose follow stream would take
	// one of the bridge's stream slots).
	bridgeOnly bool
}

func startStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	t.Cleanup(testutil.CheckGoroutines(t))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	quiet := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "bridge.db"), sqlite.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := bridge.NewServer(st, bridge.Options{
		Addr: "127.0.0.1:0", Token: token, Logger: quiet, UI: ui.NewHandler(ui.Options{}),
		RequestTimeout: o.requestTimeout, MaxStreams: o.maxStreams, KeepAlive: o.keepAlive,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close bridge: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})

	if o.bridgeOnly {
		return &stack{bridgeURL: srv.URL(), bridge: srv, client: client}
	}
	cfg := config.Default()
	cfg.BridgeURL = srv.URL()
	cfg.BridgeToken = token
	cfg.StatusAddr = "127.0.0.1:0"
	cfg.PrimerPath, cfg.ScenePrimerPath = "", ""
	db, err := ledger.Open(context.Background(), filepath.Join(dir, "coordinator.db"), cfg.CoordinatorID)
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordinator.New(coordinator.Options{Config: cfg, State: db, Logger: quiet, RequestTimeout: o.requestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("close state: %v", err)
		}
	})
	testutil.WaitFor(t, 10*time.Second, "the coordinator's status API", func() bool {
		resp, err := client.Get(c.StatusURL() + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return &stack{bridgeURL: srv.URL(), statusURL: c.StatusURL(), bridge: srv, client: client}
}

// target is one route of one listener the attacks are run against.
type target struct {
	name, base, method, path, body string
	// open: the route needs no token by design (static pages that hold
	// no data).
	open bool
}

func (s *stack) targets() []target {
	return []target{
		{name: "bridge API read", base: s.bridgeURL, method: "GET", path: "/threads"},
		{name: "bridge API append", base: s.bridgeURL, method: "POST", path: "/threads", body: `{"name":"x"}`},
		{name: "bridge stream", base: s.bridgeURL, method: "GET", path: "/events?wait=0"},
		{name: "bridge metrics", base: s.bridgeURL, method: "GET", path: "/metrics"},
		{name: "bridge UI", base: s.bridgeURL, method: "GET", path: "/ui", open: true},
		{name: "coordinator runs", base: s.statusURL, method: "GET", path: "/runs"},
		{name: "coordinator invocations", base: s.statusURL, method: "GET", path: "/invocations"},
		{name: "coordinator metrics", base: s.statusURL, method: "GET", path: "/metrics"},
		{name: "coordinator dashboard", base: s.statusURL, method: "GET", path: "/", open: true},
		{name: "coordinator cancel", base: s.statusURL, method: "POST", path: "/invocations/1/cancel"},
	}
}

// attack is one hostile request shape. Each field changes the honest
// request (loopback Host, the right token, JSON body, no Origin).
type attack struct {
	name        string
	host        string // Host header; "" = the listener's own
	origin      string
	auth        string // Authorization; "-" = none
	contentType string
	preflight   bool
}

var attacks = []attack{
	{name: "rebinding Host", host: "evil.example"},
	{name: "rebinding Host with port", host: "evil.example:5111"},
	{name: "foreign Origin", origin: "https://evil.example"},
	{name: "foreign Origin on another local port", origin: "http://127.0.0.1:1"},
	{name: "Origin null", origin: "null"},
	{name: "no token", auth: "-"},
	{name: "wrong token", auth: "Bearer wrong"},
	{name: "token as basic auth", auth: "Basic " + token},
	{name: "text/plain body", contentType: "text/plain"},
	{name: "form body", contentType: "application/x-www-form-urlencoded"},
	{name: "CORS preflight", origin: "https://evil.example", preflight: true},
}

// want is what the gate must answer for an attack on a target: the error
// code, or "" when the request is not refused by the gate (it is then
// checked not to hand a foreign page the answer through CORS).
func (a attack) want(tg target) string {
	stateChanging := tg.method == "POST"
	switch {
	case a.host != "":
		return "forbidden_host"
	case a.preflight:
		return "forbidden_origin"
	case a.origin != "" && stateChanging:
		return "forbidden_origin"
	case a.auth != "" && !tg.open:
		return "unauthorized"
	case a.contentType != "" && stateChanging:
		return "unsupported_media_type"
	}
	return ""
}

func (a attack) request(t *testing.T, tg target) *http.Request {
	t.Helper()
	method, body := tg.method, tg.body
	if a.preflight {
		method, body = http.MethodOptions, ""
	}
	if a.contentType != "" && body == "" {
		body = "x=1"
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, tg.base+tg.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.contentType != "" {
		req.Header.Set("Content-Type", a.contentType)
	}
	switch a.auth {
	case "":
		req.Header.Set("Authorization", "Bearer "+token)
	case "-":
	default:
		req.Header.Set("Authorization", a.auth)
	}
	if a.host != "" {
		req.Host = a.host
	}
	if a.origin != "" {
		req.Header.Set("Origin", a.origin)
	}
	if a.preflight {
		req.Header.Set("Access-Control-Request-Method", tg.method)
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	}
	return req
}

// TestAttackMatrix runs the same attacks against every listener the
// product opens: DNS rebinding, a foreign or null Origin, no or a wrong
// token, a body a page can send without a preflight, and a preflight from
// another site. Each must be refused with its code, and an honest request
// to the same route must pass the gate.
func TestAttackMatrix(t *testing.T) {
	s := startStack(t, stackOptions{})
	for _, tg := range s.targets() {
		t.Run(tg.name, func(t *testing.T) {
			honest := attack{}.request(t, tg)
			code, status, _ := s.send(t, honest)
			if status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusUnsupportedMediaType {
				t.Fatalf("the honest request was refused: %d %s", status, code)
			}
			for _, a := range attacks {
				t.Run(a.name, func(t *testing.T) {
					want := a.want(tg)
					code, status, h := s.send(t, a.request(t, tg))
					if want == "" {
						if status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusUnsupportedMediaType {
							t.Fatalf("refused with %d %s, want the request through", status, code)
						}
					} else if code != want {
						t.Fatalf("got %d %q, want %q", status, code, want)
					}
					if acao := h.Get("Access-Control-Allow-Origin"); acao != "" {
						t.Fatalf("a foreign origin got Access-Control-Allow-Origin %q", acao)
					}
				})
			}
		})
	}
	// Nothing the attacks sent was stored: the honest POST /threads made
	// the only thread.
	req := attack{}.request(t, target{base: s.bridgeURL, method: "GET", path: "/threads"})
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Threads []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Threads) != 1 {
		t.Fatalf("%d threads stored, want the honest one only", len(list.Threads))
	}
}

// send does req and returns the error code (if any), the status and the
// headers.
func (s *stack) send(t *testing.T, req *http.Request) (string, int, http.Header) {
	t.Helper()
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string }
	}
	_ = json.Unmarshal(b, &e)
	return e.Error.Code, resp.StatusCode, resp.Header
}

// TestLoginCookieOpensBothListeners: a browser logged in to the bridge
// (POST /auth/login) sends the same HttpOnly cookie to the coordinator's
// dashboard on the same host, which takes it, as the token is the same;
// the dashboard's own login sets the same cookie, and a wrong token sets
// nothing.
func TestLoginCookieOpensBothListeners(t *testing.T) {
	s := startStack(t, stackOptions{})
	login := func(base, tok string) (int, *http.Cookie) {
		req, _ := http.NewRequest("POST", base+"/auth/login", strings.NewReader(`{"token":"`+tok+`"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.Name == "agent_bridge_token" {
				return resp.StatusCode, c
			}
		}
		return resp.StatusCode, nil
	}
	withCookie := func(u string, c *http.Cookie) int {
		req, _ := http.NewRequest("GET", u, nil)
		req.AddCookie(c)
		_, status, _ := s.send(t, req)
		return status
	}
	if status, c := login(s.statusURL, "wrong"); status != http.StatusUnauthorized || c != nil {
		t.Fatalf("dashboard login with a wrong token: %d, cookie %v", status, c)
	}
	for _, base := range []string{s.bridgeURL, s.statusURL} {
		status, c := login(base, token)
		if status != http.StatusOK || c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
			t.Fatalf("login at %s: %d, cookie %+v", base, status, c)
		}
		for _, u := range []string{s.bridgeURL + "/threads", s.statusURL + "/runs"} {
			if got := withCookie(u, c); got != http.StatusOK {
				t.Errorf("%s with the cookie of %s: %d", u, base, got)
			}
		}
	}
}
