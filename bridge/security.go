package bridge

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// TokenCookie is the cookie a browser gets from POST /auth/login: HttpOnly
// so page scripts cannot read it, SameSite=Strict so other sites cannot
// send it. The server accepts it wherever it accepts the bearer header, which
// lets the UI's EventSource (which cannot set headers) authenticate.
const TokenCookie = "agent_bridge_token"

// gate is the security middleware: Host allowlist (DNS rebinding), Origin
// check on state-changing requests (cross-site POSTs), CORS for listed
// origins only, and the bearer token.
type gate struct {
	token   []byte
	hosts   map[string]bool
	origins map[string]bool
}

// newGate prepares the allowlists. listenHost is added to the allowed hosts
// when it names a specific non-loopback address, so that a bridge listening
// on a LAN address with a token answers requests addressed to it.
func newGate(opts Options, listenHost string) (*gate, error) {
	g := &gate{hosts: map[string]bool{}, origins: map[string]bool{}}
	if opts.Token != "" {
		g.token = []byte(opts.Token)
	}
	for _, h := range opts.AllowedHosts {
		h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
		if h == "" {
			continue
		}
		if strings.ContainsAny(h, ":/") && net.ParseIP(h) == nil {
			return nil, fmt.Errorf("allowed host %q: give a host name without scheme or port", h)
		}
		g.hosts[h] = true
	}
	if ip := net.ParseIP(listenHost); listenHost != "" && (ip == nil || !ip.IsUnspecified()) {
		g.hosts[strings.ToLower(listenHost)] = true
	}
	for _, o := range opts.CORSOrigins {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		n, ok := normalizeOrigin(o)
		if !ok {
			return nil, fmt.Errorf("CORS origin %q: give it as scheme://host[:port]", o)
		}
		g.origins[n] = true
	}
	return g, nil
}

// normalizeOrigin lower-cases an origin and checks it is scheme://host[:port]
// with nothing else.
func normalizeOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSuffix(o, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return "", false
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), true
}

// hostAllowed reports whether a Host header (with or without port) is a
// loopback name or address, or an allowed host.
func (g *gate) hostAllowed(hostport string) bool {
	if hostport == "" {
		return false
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	return isLoopbackHost(host) || g.hosts[host]
}

// originAllowed reports whether a state-changing request from origin may
// proceed: same origin as the request's Host, or listed.
func (g *gate) originAllowed(origin, host string) bool {
	n, ok := normalizeOrigin(origin)
	if !ok {
		return false
	}
	if g.origins[n] {
		return true
	}
	u, _ := url.Parse(n)
	return strings.EqualFold(u.Host, host)
}

// tokenOK reports whether the request carries the token, as a bearer header
// or the login cookie, compared in constant time.
func (g *gate) tokenOK(r *http.Request) bool {
	if g.token == nil {
		return true
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, cred, ok := strings.Cut(auth, " ")
		return ok && strings.EqualFold(scheme, "Bearer") && g.tokenEqual(strings.TrimSpace(cred))
	}
	if c, err := r.Cookie(TokenCookie); err == nil {
		return g.tokenEqual(c.Value)
	}
	return false
}

func (g *gate) tokenEqual(s string) bool {
	return subtle.ConstantTimeCompare([]byte(s), g.token) == 1
}

// open reports whether a request needs no token: liveness probes, the login
// itself, and the UI's static assets (they hold no data; the UI asks the
// person for the token and logs in).
func open(r *http.Request) bool {
	p := r.URL.Path
	switch {
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && (p == "/ping" || p == "/healthz"):
		return true
	case r.Method == http.MethodPost && p == "/auth/login":
		return true
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && (p == "/" || p == "/ui" || strings.HasPrefix(p, "/ui/")):
		return true
	}
	return false
}

func stateChanging(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// middleware applies the gates in order: Host, Origin (and CORS), token.
func (g *gate) middleware(s *Server) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !g.hostAllowed(r.Host) {
				s.writeError(w, r, agentbridge.Errorf(agentbridge.ECodeForbiddenHost,
					"The Host %q is not allowed: use a loopback address such as 127.0.0.1, or start the server with --allowed-hosts naming it.", r.Host))
				return
			}
			origin := r.Header.Get("Origin")
			if origin != "" {
				n, _ := normalizeOrigin(origin)
				if g.origins[n] {
					h := w.Header()
					h.Set("Access-Control-Allow-Origin", n)
					h.Set("Access-Control-Allow-Credentials", "true")
					h.Add("Vary", "Origin")
				}
				if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
					if !g.originAllowed(origin, r.Host) {
						s.writeError(w, r, forbiddenOrigin(origin))
						return
					}
					h := w.Header()
					h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
					h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, Last-Event-ID")
					h.Set("Access-Control-Max-Age", "600")
					w.WriteHeader(http.StatusNoContent)
					return
				}
				if stateChanging(r.Method) && !g.originAllowed(origin, r.Host) {
					s.writeError(w, r, forbiddenOrigin(origin))
					return
				}
			}
			if !open(r) && !g.tokenOK(r) {
				s.writeError(w, r, agentbridge.Errorf(agentbridge.ECodeUnauthorized,
					"This server needs a token: send the header \"Authorization: Bearer <token>\" (the token is in the server's --token-file or BRIDGE_TOKEN)."))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func forbiddenOrigin(origin string) error {
	return agentbridge.Errorf(agentbridge.ECodeForbiddenOrigin,
		"Requests from the web page at %q may not change anything here: only the server's own pages and origins listed with --cors-origin may.", origin)
}

// loginRequest is the body of POST /auth/login.
type loginRequest struct {
	Token string `json:"token"`
}

// handleLogin checks a token and sets the HttpOnly, SameSite=Strict cookie
// the browser then sends with every request, EventSource included.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) error {
	var req loginRequest
	if err := s.decodeStrict(w, r, &req, []string{"token"}, false); err != nil {
		return err
	}
	if s.gate.token == nil {
		httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "token_required": false})
		return nil
	}
	if req.Token == "" || !s.gate.tokenEqual(req.Token) {
		return agentbridge.FieldErrorf(agentbridge.ECodeUnauthorized, "token", "That token is not this server's token.")
	}
	http.SetCookie(w, &http.Cookie{
		Name:     TokenCookie,
		Value:    req.Token,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   r.TLS != nil,
	})
	httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "token_required": true})
	return nil
}

// handleLogout clears the login cookie.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) error {
	http.SetCookie(w, &http.Cookie{Name: TokenCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	httpjson.Write(w, http.StatusOK, map[string]any{"ok": true})
	return nil
}
