// Package httpguard is the one security gate in front of every HTTP
// listener agent-bridge opens: the bridge's API and UI, and the
// coordinator's status API with its runs dashboard, /metrics and cancel.
// Both daemons build their gate here, so the rules cannot drift apart
// (docs/security.md):
//
//   - Host must be a loopback name or address, or one configured (DNS
//     rebinding);
//   - a state-changing request with an Origin must come from the
//     listener's own origin (a name it answers to, on the port the
//     connection arrived at) or a listed one; Origin: null is refused. The
//     Origin is never compared with the request's own Host header, which
//     the sender chooses;
//   - the bearer token (or the login cookie), when one is set;
//   - a state-changing request with a body must declare it as JSON (a
//     text/plain or form body is what any web page can send without a
//     CORS preflight);
//   - all of it decided before a byte of the body is read, and a refused
//     request with a body closes its connection, so a slow body cannot
//     hold the answer back;
//   - the request (headers and body) must arrive within RequestTimeout
//     (Server), and at most MaxStreams streams are open at once (Stream).
package httpguard

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// Defaults of the zero Options fields.
const (
	// DefaultRequestTimeout bounds how long a request's headers and body
	// may take to arrive (contract §6.2).
	DefaultRequestTimeout = 10 * time.Second
	// DefaultMaxStreams caps the streams (SSE and long-polls) a listener
	// holds open at once.
	DefaultMaxStreams = 1024
	// DefaultMaxStreamsPerCredential caps the streams one credential holds
	// open at once.
	DefaultMaxStreamsPerCredential = 256
	// DefaultCoordinatorStreams is the pool of stream slots kept for
	// coordinator credentials.
	DefaultCoordinatorStreams = 16
	// DefaultReservedStreamsPerCoordinator caps the slots of that pool one
	// coordinator credential holds, so that the coordinators of several
	// machines each get their stream.
	DefaultReservedStreamsPerCoordinator = 4
	// MaxHeaderBytes caps request headers (the contract's 64 KiB).
	MaxHeaderBytes = 64 << 10
	// idleTimeout closes keep-alive connections nobody uses.
	idleTimeout = 2 * time.Minute
)

// TokenCookie is the cookie a browser gets from POST /auth/login: HttpOnly
// so page scripts cannot read it, SameSite=Strict so other sites cannot
// send it. The gate accepts it wherever it accepts the bearer header, which
// lets pages (and EventSource, which cannot set headers) authenticate.
// Cookies are scoped by host name, not port, so a browser logged in to the
// bridge on 127.0.0.1 also sends it to the coordinator's dashboard there,
// which by default has the same token.
const TokenCookie = "agent_bridge_token"

// ErrInsecureAddr is returned by CheckListen for a non-loopback address
// without a token: the coordinator runs agents with full tool permissions,
// so nothing that reaches it may be open to the network unauthenticated.
var ErrInsecureAddr = errors.New("refusing to listen on a non-loopback address without a token")

// Options configures a Guard. Hints are the sentences' endings that tell a
// person which flag or config key to use; each listener names its own.
type Options struct {
	// Token is the bearer token every request but the Open ones must
	// carry; "" disables the check.
	Token string
	// AllowedHosts are extra Host names (no port) besides loopback.
	AllowedHosts []string
	// CORSOrigins are extra allowed origins, as scheme://host[:port].
	CORSOrigins []string
	// ListenAddr is the listener's host:port: a specific non-loopback host
	// in it is allowed as a Host too, so that a listener on a LAN address
	// (with a token) answers requests addressed to it.
	ListenAddr string
	// Open reports whether a request needs no token (liveness probes, the
	// login itself, static pages that hold no data); nil means none.
	Open func(*http.Request) bool
	// TokenHint says where the token is configured ("--token-file or
	// BRIDGE_TOKEN").
	TokenHint string
	// HostHint says how to allow another Host ("start the server with
	// --allowed-hosts naming it").
	HostHint string
	// OriginHint says which pages may change things ("only the server's
	// own pages and origins listed with --cors-origin may").
	OriginHint string
	// WriteError writes a refusal; nil writes it as JSON with Status.
	WriteError func(w http.ResponseWriter, r *http.Request, err error)
	// RequestTimeout bounds the arrival of a request's headers and body
	// (DefaultRequestTimeout when 0).
	RequestTimeout time.Duration
	// MaxStreams caps concurrent streams (DefaultMaxStreams when 0).
	MaxStreams int
	// MaxStreamsPerCredential caps one credential's concurrent streams
	// (DefaultMaxStreamsPerCredential when 0; at most MaxStreams).
	MaxStreamsPerCredential int
	// CoordinatorStreams is how many of MaxStreams only coordinator
	// credentials may take (DefaultCoordinatorStreams when 0, at most a
	// quarter of MaxStreams).
	CoordinatorStreams int
	// ReservedStreamsPerCoordinator caps how many slots of the
	// CoordinatorStreams pool one coordinator credential holds
	// (DefaultReservedStreamsPerCoordinator when 0, at most
	// CoordinatorStreams).
	ReservedStreamsPerCoordinator int
	// Resolve, when set, turns a presented token that is not Token into
	// the credential it stands for (a token store's lookup); an unknown,
	// revoked or expired token is an error (unauthorized). nil accepts
	// only Token.
	Resolve func(ctx context.Context, token string) (Credential, error)
	// RequireCredential makes every request but the Open ones carry a
	// credential even when Token is "" (tokens then come from Resolve).
	// Without it and without Token the listener is open: a request that
	// presents no token acts as the person (OpenCredential).
	RequireCredential bool
	// Upload reports whether a request is an upload (the bridge's POST
	// /threads/{id}/attachments), whose body is a file rather than JSON:
	// it must then come as multipart/form-data or with a media type no web
	// page can send without a CORS preflight (checkUploadType).
	Upload func(*http.Request) bool
}

// Credential is who a request speaks for (agentbridge.Credential); the
// gate puts it in the request's context (CredentialFrom).
type Credential = agentbridge.Credential

// StaticCredential is the credential of the listener's Token
// (--token-file or BRIDGE_TOKEN): the person's.
var StaticCredential = Credential{ID: "token-file", Name: "--token-file or BRIDGE_TOKEN", Scope: agentbridge.ScopePerson}

// OpenCredential is what a token-less request gets on an open listener
// (serve --open): the person's power, as in v0.
var OpenCredential = Credential{ID: "open", Name: "no token (--open)", Scope: agentbridge.ScopePerson}

// credentialKey is the context key of a request's Credential.
type credentialKey struct{}

// CredentialFrom returns the credential the gate resolved for the request
// whose context is ctx; ok is false on an open route that carried none.
func CredentialFrom(ctx context.Context) (Credential, bool) {
	c, ok := ctx.Value(credentialKey{}).(Credential)
	return c, ok
}

// WithCredential returns ctx carrying c, as the gate does.
func WithCredential(ctx context.Context, c Credential) context.Context {
	return context.WithValue(ctx, credentialKey{}, c)
}

// Guard is one listener's gate. Build it with New; it is safe for
// concurrent use.
type Guard struct {
	opts    Options
	token   []byte
	hosts   map[string]bool
	origins map[string]bool
	// slotMu guards the stream counts: general, the open streams in the
	// pool every credential shares; reserved, those in the pool kept for
	// coordinator credentials; credStreams, the open streams per
	// credential id; and credReserved, the reserved slots per coordinator
	// credential id.
	slotMu            sync.Mutex
	general, reserved int
	credStreams       map[string]int
	credReserved      map[string]int
}

// New checks the options and prepares the allowlists. A host with a scheme
// or port, or an origin that is not scheme://host[:port], is an error.
func New(opts Options) (*Guard, error) {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.MaxStreamsPerCredential <= 0 {
		opts.MaxStreamsPerCredential = DefaultMaxStreamsPerCredential
	}
	opts.MaxStreamsPerCredential = min(opts.MaxStreamsPerCredential, opts.MaxStreams)
	if opts.CoordinatorStreams <= 0 {
		opts.CoordinatorStreams = DefaultCoordinatorStreams
	}
	opts.CoordinatorStreams = min(opts.CoordinatorStreams, opts.MaxStreams/4)
	if opts.ReservedStreamsPerCoordinator <= 0 {
		opts.ReservedStreamsPerCoordinator = DefaultReservedStreamsPerCoordinator
	}
	opts.ReservedStreamsPerCoordinator = min(opts.ReservedStreamsPerCoordinator, opts.CoordinatorStreams)
	if opts.WriteError == nil {
		opts.WriteError = WriteError
	}
	if opts.TokenHint == "" {
		opts.TokenHint = "its configuration"
	}
	g := &Guard{opts: opts, hosts: map[string]bool{}, origins: map[string]bool{}, credStreams: map[string]int{}, credReserved: map[string]int{}}
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
	if host, _, err := net.SplitHostPort(opts.ListenAddr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			g.hosts[strings.ToLower(host)] = true
		}
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

// CheckListen applies the listen-address rule on its own, so that a command
// can refuse a bad address before it opens anything: addr must be
// host:port, and a non-loopback host needs a token (ErrInsecureAddr).
// tokenHint says where a token is configured.
func CheckListen(addr, token, tokenHint string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if !IsLoopbackHost(host) && token == "" {
		return fmt.Errorf("%w: %s is reachable from other machines; configure a token (%s) or listen on 127.0.0.1", ErrInsecureAddr, addr, tokenHint)
	}
	return nil
}

// IsLoopbackAddr reports whether a listen address (host:port) names only
// this machine; an empty host (all interfaces) does not.
func IsLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && host != "" && IsLoopbackHost(host)
}

// IsLoopbackHost reports whether host (no port) names only this machine.
// The gate calls it on every request, so it parses with net/netip, which
// does not allocate; a zoned address is not loopback, as net.ParseIP
// rejects zones.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// normalizeOrigin lower-cases an origin and checks it is scheme://host[:port]
// with nothing else ("null" and anything else are not).
func normalizeOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSuffix(o, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return "", false
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), true
}

// hostAllowed reports whether a Host header (with or without port) is a
// loopback name or address, or an allowed host.
func (g *Guard) hostAllowed(hostport string) bool {
	if hostport == "" {
		return false
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	return IsLoopbackHost(host) || g.hosts[host]
}

// originAllowed reports whether a state-changing request from origin may
// proceed: a listed origin, or the listener's own, meaning a name the
// listener answers to (loopback or allowed) on the port the connection
// actually arrived at. The port comes from the socket, never from the
// request's Host header, which the sender writes.
func (g *Guard) originAllowed(origin string, r *http.Request) bool {
	n, ok := normalizeOrigin(origin)
	if !ok {
		return false
	}
	if g.origins[n] {
		return true
	}
	u, err := url.Parse(n)
	if err != nil {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if la == nil {
		return false
	}
	_, lport, err := net.SplitHostPort(la.String())
	if err != nil || lport != port {
		return false
	}
	host := strings.TrimSuffix(strings.Trim(u.Hostname(), "[]"), ".")
	return IsLoopbackHost(host) || g.hosts[host]
}

// HasToken reports whether the listener asks for a token.
func (g *Guard) HasToken() bool { return g.token != nil }

// TokenEqual compares s with the token in constant time.
func (g *Guard) TokenEqual(s string) bool {
	return g.token != nil && subtle.ConstantTimeCompare([]byte(s), g.token) == 1
}

// presented returns the token the request carries, as a bearer header or
// the login cookie; ok is false when it carries none. A malformed
// Authorization header counts as a wrong token ("" with ok).
func presented(r *http.Request) (string, bool) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, cred, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", true
		}
		return strings.TrimSpace(cred), true
	}
	if c, err := r.Cookie(TokenCookie); err == nil {
		return c.Value, true
	}
	return "", false
}

// Open reports whether the listener takes requests without a token.
func (g *Guard) Open() bool { return g.token == nil && !g.opts.RequireCredential }

// Credential resolves a presented token: the listener's Token is the
// person's (StaticCredential), any other goes to Resolve. A wrong token
// is unauthorized.
func (g *Guard) Credential(ctx context.Context, token string) (Credential, error) {
	if token != "" && g.TokenEqual(token) {
		return StaticCredential, nil
	}
	if token != "" && g.opts.Resolve != nil {
		return g.opts.Resolve(ctx, token)
	}
	return Credential{}, g.unauthorized()
}

// unauthorized is the refusal of a missing or wrong token.
func (g *Guard) unauthorized() error {
	return agentbridge.Errorf(agentbridge.ECodeUnauthorized,
		"This server needs a token: send the header \"Authorization: Bearer <token>\" (the token is in %s).", g.opts.TokenHint)
}

// authenticate finds the request's credential: the token it presents
// (Credential), OpenCredential for none (or an unknown one) on an open
// listener, none on an open route. A request that presents no token to a
// closed listener, or a wrong one anywhere but an open route, is
// unauthorized.
func (g *Guard) authenticate(r *http.Request) (Credential, bool, error) {
	openRoute := g.opts.Open != nil && g.opts.Open(r)
	tok, ok := presented(r)
	if !ok {
		switch {
		case openRoute:
			return Credential{}, false, nil
		case g.Open():
			return OpenCredential, true, nil
		}
		return Credential{}, false, g.unauthorized()
	}
	c, err := g.Credential(r.Context(), tok)
	switch {
	case err == nil:
		return c, true, nil
	case openRoute:
		return Credential{}, false, nil // a stale cookie does not shut the login page
	case g.Open() && agentbridge.ErrorCode(err) == agentbridge.ECodeUnauthorized:
		// An open listener takes a token it does not know as it takes
		// none, as v0 did; a token it knows keeps its scope.
		break
	default:
		return Credential{}, false, err
	}
	return OpenCredential, true, nil
}

// StateChanging reports whether a method changes state, so that the Origin
// gate applies to it.
func StateChanging(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// Wrap puts the gate in front of next: Host, then Origin (with CORS and
// preflights), then the token, then the body's media type; a request that
// passes gets its body's read timeout reported as request_timeout.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, err := g.check(w, r)
		if err != nil {
			if r.ContentLength != 0 {
				// Answer at once and drop the connection rather than let
				// net/http read the unread body first (a slow body would
				// hold the refusal back for the whole request timeout).
				w.Header().Set("Connection", "close")
			}
			g.opts.WriteError(w, r, err)
			return
		}
		if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, Last-Event-ID")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			r2 := *r
			r2.Body = timeoutBody{r.Body, g.opts.RequestTimeout}
			r = &r2
		}
		next.ServeHTTP(w, r)
	})
}

// check applies the gates in order and returns the first refusal, or the
// request with its credential in its context. It sets the CORS headers of
// a listed origin on w.
func (g *Guard) check(w http.ResponseWriter, r *http.Request) (*http.Request, error) {
	if !g.hostAllowed(r.Host) {
		return r, agentbridge.Errorf(agentbridge.ECodeForbiddenHost,
			"The Host %q is not allowed: use a loopback address such as 127.0.0.1, or %s.", agentbridge.Clip(r.Host, 101), g.opts.HostHint)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if n, _ := normalizeOrigin(origin); g.origins[n] {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", n)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Add("Vary", "Origin")
		}
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if (preflight || StateChanging(r.Method)) && !g.originAllowed(origin, r) {
			return r, agentbridge.Errorf(agentbridge.ECodeForbiddenOrigin,
				"Requests from the web page at %q may not change anything here: %s.", agentbridge.Clip(origin, 101), g.opts.OriginHint)
		}
		if preflight {
			return r, nil // answered by Wrap, without a token: browsers send none
		}
	}
	cred, ok, err := g.authenticate(r)
	if err != nil {
		return r, err
	}
	if ok {
		r = r.WithContext(WithCredential(r.Context(), cred))
	}
	if StateChanging(r.Method) {
		if g.opts.Upload != nil && g.opts.Upload(r) {
			return r, checkUploadType(r)
		}
		return r, checkJSONType(r)
	}
	return r, nil
}

// checkUploadType refuses an upload whose body is declared as text/plain,
// as a URL-encoded form or not at all: the simple requests any web page
// can make a browser send. multipart/form-data is one too, and is taken
// because a file input sends it; like every write, it still needs an
// allowed Origin and a credential a foreign page cannot attach (the
// SameSite=Strict cookie, or a bearer header).
func checkUploadType(r *http.Request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case err != nil, mt == "text/plain", mt == "application/x-www-form-urlencoded":
		ct := r.Header.Get("Content-Type")
		if ct == "" {
			ct = "none"
		}
		return agentbridge.Errorf(agentbridge.ECodeUnsupportedMediaType,
			"Send the file as multipart/form-data (field \"file\") or as the raw body with \"Content-Type: application/octet-stream\" and ?name= (this request's type: %s); with curl, use -F file=@FILE.", agentbridge.Clip(ct, 101))
	}
	return nil
}

// checkJSONType refuses a request body that is not declared as JSON. A
// form or text/plain body (curl -d without -H, an HTML form) would
// otherwise be read as JSON, and it is what any web page can make a browser
// send to this server without a CORS preflight. A request without a body
// needs no type.
func checkJSONType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" || r.ContentLength == 0 {
		return nil
	}
	if mt, params, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		if cs, ok := params["charset"]; !ok || strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	if ct == "" {
		ct = "none"
	}
	return agentbridge.Errorf(agentbridge.ECodeUnsupportedMediaType,
		"The request body must be JSON sent with the header \"Content-Type: application/json\" (this request's type: %s); with curl, add -H 'Content-Type: application/json'.", agentbridge.Clip(ct, 101))
}

// timeoutBody reports a body that stopped arriving before the request
// timeout as request_timeout (a 408 with a sentence), not as an internal
// error of the handler reading it.
type timeoutBody struct {
	io.ReadCloser
	timeout time.Duration
}

func (b timeoutBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = agentbridge.Errorf(agentbridge.ECodeRequestTimeout,
			"The request's body did not arrive within %s; send the whole request at once.", b.timeout)
	}
	return n, err
}

// Stream takes one of the listener's stream slots (SSE or long-poll) for
// the request whose context is ctx; release gives it back and must be
// called once the stream ends. It refuses (too_many_streams) a stream over
// the listener's MaxStreams or over MaxStreamsPerCredential of the same
// credential. CoordinatorStreams of MaxStreams are kept for coordinator
// credentials: other clients holding every other slot cannot starve the
// coordinator of its stream. A coordinator's stream takes a shared slot
// while one is free and a kept one only then, at most
// ReservedStreamsPerCoordinator per coordinator credential, so that one
// coordinator cannot take the whole pool from the coordinators of other
// machines. Without a credential (an open listener's anonymous requests
// share OpenCredential) only the listener's cap applies.
func (g *Guard) Stream(ctx context.Context) (release func(), err error) {
	cred, _ := CredentialFrom(ctx)
	coordinator := cred.Scope == agentbridge.ScopeCoordinator
	perCred := cred.ID != "" && cred.ID != OpenCredential.ID
	g.slotMu.Lock()
	defer g.slotMu.Unlock()
	if perCred && g.credStreams[cred.ID] >= g.opts.MaxStreamsPerCredential {
		return nil, agentbridge.Errorf(agentbridge.ECodeTooManyStreams,
			"This token already holds its limit of %d open streams; close one.", g.opts.MaxStreamsPerCredential)
	}
	inReserve := false
	switch {
	case g.general < g.opts.MaxStreams-g.opts.CoordinatorStreams:
	case g.general+g.reserved >= g.opts.MaxStreams:
		return nil, agentbridge.Errorf(agentbridge.ECodeTooManyStreams,
			"This server already holds its limit of %d open streams; close one, or raise the limit (--max-streams).", g.opts.MaxStreams)
	case !coordinator:
		return nil, agentbridge.Errorf(agentbridge.ECodeTooManyStreams,
			"This server holds every stream slot but the %d kept for the coordinator; close one, or raise the limit (--max-streams).", g.opts.CoordinatorStreams)
	case g.credReserved[cred.ID] >= g.opts.ReservedStreamsPerCoordinator:
		return nil, agentbridge.Errorf(agentbridge.ECodeTooManyStreams,
			"This coordinator token already holds %d of the %d stream slots kept for coordinators, its share; close one, or raise the limit (--max-streams).",
			g.opts.ReservedStreamsPerCoordinator, g.opts.CoordinatorStreams)
	default:
		inReserve = true
	}
	if inReserve {
		g.reserved++
		g.credReserved[cred.ID]++
	} else {
		g.general++
	}
	if perCred {
		g.credStreams[cred.ID]++
	}
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			g.releaseStream(cred.ID, perCred, inReserve)
		}
	}, nil
}

// releaseStream gives back a stream slot of credential id: one of the
// kept pool when inReserve, else a shared one.
func (g *Guard) releaseStream(id string, perCred, inReserve bool) {
	g.slotMu.Lock()
	defer g.slotMu.Unlock()
	if inReserve {
		g.reserved--
		if g.credReserved[id]--; g.credReserved[id] <= 0 {
			delete(g.credReserved, id)
		}
	} else {
		g.general--
	}
	if perCred {
		if g.credStreams[id]--; g.credStreams[id] <= 0 {
			delete(g.credStreams, id)
		}
	}
}

// Server returns an http.Server for h with the listener's limits: headers
// and body must arrive within RequestTimeout (the read deadline is lifted
// once the body is read, so a long stream or long-poll answer is not
// cut), headers are capped at MaxHeaderBytes, and idle keep-alive
// connections close. There is no WriteTimeout: it would cut every healthy
// stream; the streams set their own write deadlines. The caller sets
// BaseContext and ErrorLog.
func (g *Guard) Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: g.opts.RequestTimeout,
		ReadTimeout:       g.opts.RequestTimeout,
		IdleTimeout:       idleTimeout,
	}
}

// WriteError writes one of the gate's refusals (any other error as
// internal) in the API's error shape; a 401 carries WWW-Authenticate.
func WriteError(w http.ResponseWriter, _ *http.Request, err error) {
	var ae *agentbridge.Error
	if !errors.As(err, &ae) {
		ae = agentbridge.Errorf(agentbridge.ECodeInternal, "The server could not handle this request.")
	}
	if ae.Code == agentbridge.ECodeUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-bridge"`)
	}
	httpjson.WriteError(w, ae)
}

// SecureRequest reports whether the browser reached r over HTTPS: the
// connection is TLS, or the page that sent it is an https page (behind
// tailscale serve or another TLS-terminating proxy the connection is
// plain but the browser's is not, and a Secure cookie is then right).
func SecureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(r.Header.Get("Origin")), "https://")
}

// SetLoginCookie gives the browser the token as the HttpOnly,
// SameSite=Strict login cookie (Secure over TLS).
func SetLoginCookie(w http.ResponseWriter, r *http.Request, token string) {
	http.SetCookie(w, &http.Cookie{
		Name:     TokenCookie,
		Value:    token,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   SecureRequest(r),
	})
}

// ClearLoginCookie removes the login cookie.
func ClearLoginCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: TokenCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}
