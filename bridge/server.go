package bridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/storecore"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/notify"
	"github.com/agent-bridge/agent-bridge/bridge/schedule"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// Defaults for the zero values of Options.
const (
	DefaultAddr        = agentbridge.DefaultBridgeAddr
	DefaultMaxBody     = 1 << 20
	DefaultPresenceTTL = 120 * time.Second
	DefaultKeepAlive   = 15 * time.Second
	// DefaultMaxStreams caps the streams open at once (Options.MaxStreams).
	DefaultMaxStreams = httpguard.DefaultMaxStreams
)

// ErrInsecureAddr is returned by NewServer for a non-loopback address
// without a token: the original answered any website's cross-origin POST and
// its coordinator runs agents with full tool permissions, so the bridge must
// not be reachable from the network unauthenticated.
var ErrInsecureAddr = httpguard.ErrInsecureAddr

// Options configures a Server. The zero value of each field means its
// default.
type Options struct {
	// Addr is the listen address, "127.0.0.1:5111" by default; use
	// "127.0.0.1:0" in tests and read the port back with URL.
	Addr string
	// Token is the bearer token every request but GET /ping and /healthz
	// must carry; "" disables the check (loopback only).
	Token string
	// Humans are the participant ids whose controls count. Pause and mute
	// are enforced by the store, which must be opened with the same set;
	// the server keeps it so that its configuration is complete in one
	// place (startBridge passes one value to both).
	Humans agentbridge.Humans
	// AllowedHosts are extra Host header names (no port) besides loopback.
	AllowedHosts []string
	// CORSOrigins are extra allowed Origins, as scheme://host[:port].
	CORSOrigins []string
	// MaxBody caps request bodies in bytes (1 MiB by default).
	MaxBody int64
	// PresenceTTL is how long a presence report stays fresh (120 s).
	PresenceTTL time.Duration
	// KeepAlive is the SSE keep-alive comment interval (15 s).
	KeepAlive time.Duration
	// Logger receives request and error logs (slog.Default by default).
	Logger *slog.Logger
	// Version is reported by GET /ping.
	Version string
	// UI, when non-nil, is mounted at /ui and /ui/*.
	UI http.Handler
	// MaxStreams caps the streams (SSE and long-polls) open at once; the
	// one over answers 503 too_many_streams (1,024 by default).
	MaxStreams int
	// MaxStreamsPerCredential caps one token's open streams (256 by
	// default); CoordinatorStreams of MaxStreams are kept for coordinator
	// tokens (16 by default, at most a quarter).
	MaxStreamsPerCredential, CoordinatorStreams int
	// RequestTimeout bounds the arrival of a request's headers and body
	// (10 s by default); tests shorten it.
	RequestTimeout time.Duration
	// RequireCredential makes every request but the open ones (ping,
	// healthz, login, the UI's files) carry a token even when Token is
	// "": one of the store's tokens (agentbridge.TokenStore). serve and up
	// set it unless --open; without it and without Token the server is
	// open, as v0 was (a request without a token acts as the person).
	RequireCredential bool
	// Now is the clock of pairing links, of "last seen" and of the
	// credential cache and tokens' expiry (time.Now by default; tests
	// move it).
	Now func() time.Time
	// TokenPruneInterval is how often the server deletes the tokens
	// revoked or expired more than agentbridge.TokenRetention ago (once at
	// Open, then hourly by default); tests shorten it.
	TokenPruneInterval time.Duration
	// ClaimSweep is how often the server looks for claims whose holder
	// lapsed and waiting claims past their ttl (DefaultClaimSweep).
	ClaimSweep time.Duration
	// TLSCert and TLSKey, both set, are PEM files of the certificate
	// (chain) and key the listener serves HTTPS with; every answer then
	// carries HSTS and the login cookie is Secure.
	TLSCert, TLSKey string
	// AttachmentMaxBytes caps an uploaded file
	// (agentbridge.DefaultAttachmentMaxBytes by default); it is apart
	// from MaxBody, which caps JSON bodies.
	AttachmentMaxBytes int64
	// AttachmentDir is the folder uploads are spooled to while they are
	// hashed and measured (os.TempDir() when ""); serve puts it next to
	// a SQLite database, on the same disk and not in a tmpfs.
	AttachmentDir string
	// AttachmentSweep is how often the server removes the attachments no
	// event named within a day of their upload (DefaultAttachmentSweep).
	AttachmentSweep time.Duration
	// Notify configures what reaches the person away from the desk: Web
	// Push to the devices subscribed in the store (when it keeps them) and
	// the ntfy topic. Its Store, Humans and Logger are the server's, and
	// its Observe the server's /metrics.
	Notify notify.Options
	// CatchUp is how old a schedule's missed due time may be and still be
	// posted at start (schedule.DefaultCatchUp); ScheduleClock is the
	// schedules' time (the wall clock; tests inject theirs).
	CatchUp       time.Duration
	ScheduleClock schedule.Clock
}

// Store is everything the bridge keeps in its database. Both stores,
// bridge/sqlite and bridge/postgres, implement all of it (one engine,
// internal/storecore.Engine), so the server uses every part as it is.
type Store interface {
	agentbridge.EventStore
	agentbridge.TokenStore
	agentbridge.PairStore
	agentbridge.AttachmentStore
	agentbridge.ReceiptStore
	agentbridge.ReceiptWatcher
	agentbridge.StatsStore
	agentbridge.PushStore
	agentbridge.ClaimStore
	agentbridge.ClaimWaitStore
	agentbridge.CoordinatorStore
	agentbridge.SearchStore
	agentbridge.ScheduleStore
	agentbridge.SuggestionStore
	// LogEpoch is the log's epoch (agentbridge.LogEpoch).
	LogEpoch() agentbridge.LogEpoch
	// WritesRefused says why the store refuses writes, while it does.
	WritesRefused() (string, bool)
	// Tail is the latest committed events, which the streams read before
	// the database (nil: the store keeps none).
	Tail() *storecore.Tail
}

// Server is the bridge HTTP server. Create it with NewServer, start it with
// Open, stop it with Close; Handler serves the same API without a listener
// (for httptest). It is safe for concurrent use.
type Server struct {
	store    Store
	opts     Options
	log      *slog.Logger
	gate     *httpguard.Guard
	presence *presenceHub
	// receiptHub streams the receipts' changes.
	receiptHub *ringLog[agentbridge.Receipt]
	// credCache remembers the store's answers about tokens for at most
	// credentialTTL.
	credCache credentialCache
	logins    loginCodes
	// seen is when each credential was last seen; now is the clock of
	// pairing and of seen (tests move it).
	seen seenCredentials
	now  func() time.Time
	// publicURL is how a phone reaches this bridge (the bridge config's
	// notify.public_url, else its own URL): the start of pairing links.
	publicURL func() string
	// threadHub wakes thread streams when their thread gets events.
	threadHub *threadHub
	// tail is the store's latest committed events, nil when it keeps none
	// (storecore.Tail): the streams read there before the database.
	tail    *storecore.Tail
	metrics *metrics
	handler http.Handler
	reqSeq  atomic.Uint64
	reqBase string
	answers bufPool // buffers of append answers (writeAppendAnswer)
	// notifier sends the notes of the events this server stores.
	notifier *notify.Notifier
	// tls is the listener's TLS config, nil for plain HTTP.
	tls *tls.Config
	// sched posts the schedules' due times; scheduled is closed when its
	// Run returns.
	sched     *schedule.Scheduler
	scheduled chan struct{}

	// ctx is the base context of every request; Close cancels it so that
	// streams and long-polls end promptly instead of holding Shutdown.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	ln     net.Listener
	srv    *http.Server
	served chan struct{} // closed when Serve returns
	// notified is closed when the notifier's Run returns, after its
	// deliveries, so none touches the store after Close.
	notified chan struct{}
	// pruned is closed when the token pruner returns (pruneTokens).
	pruned chan struct{}
	// swept is closed when the claim sweeper returns (sweepClaims), and
	// attSwept when the attachment sweeper does (sweepAttachments).
	swept, attSwept chan struct{}
	srvErr          error // Serve's unexpected error; read only after served
	// extra has a channel per listener added after Open (OpenLocal,
	// Serve), closed when its Serve returns; local is whether OpenLocal's
	// is one of them.
	extra []chan struct{}
	local bool
}

// NewServer builds a server over store. It refuses a non-loopback Addr
// that takes requests without a token (neither Token nor
// RequireCredential: ErrInsecureAddr) and a malformed CORS origin.
func NewServer(store Store, opts Options) (*Server, error) {
	if store == nil {
		return nil, errors.New("bridge: nil event store")
	}
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.PresenceTTL <= 0 {
		opts.PresenceTTL = DefaultPresenceTTL
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.Humans == nil {
		opts.Humans = agentbridge.DefaultHumans
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ClaimSweep <= 0 {
		opts.ClaimSweep = DefaultClaimSweep
	}
	if opts.TokenPruneInterval <= 0 {
		opts.TokenPruneInterval = DefaultTokenPruneInterval
	}
	if opts.AttachmentMaxBytes <= 0 {
		opts.AttachmentMaxBytes = agentbridge.DefaultAttachmentMaxBytes
	}
	if opts.AttachmentSweep <= 0 {
		opts.AttachmentSweep = DefaultAttachmentSweep
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if err := CheckListen(opts.Addr, opts.Token); err != nil && !opts.RequireCredential {
		return nil, err
	}
	tc, err := loadTLS(opts.TLSCert, opts.TLSKey)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		store:    store,
		opts:     opts,
		log:      opts.Logger.With("component", "bridge"),
		presence: newPresenceHub(opts.PresenceTTL, time.Now),
		metrics:  newMetrics(),
		reqBase:  fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff),
		ctx:      ctx,
		cancel:   cancel,
		tls:      tc,
	}
	s.tail = store.Tail()
	g, err := newGate(opts, s)
	if err != nil {
		cancel()
		return nil, err
	}
	s.gate = g
	s.metrics.addStoreStats(store)
	s.receiptHub = newReceiptHub()
	nopts := opts.Notify
	nopts.Store, nopts.Humans, nopts.Logger = store, opts.Humans, opts.Logger
	nopts.Observe = s.metrics.observePush
	nopts.ThreadName = func(ctx context.Context, id string) string {
		th, err := store.Thread(ctx, id)
		if err != nil {
			return ""
		}
		return th.Name
	}
	if nopts.BaseURL == nil {
		nopts.BaseURL = s.URL
	}
	s.notifier = notify.New(nopts)
	s.now, s.publicURL = opts.Now, nopts.BaseURL
	if s.now == nil {
		s.now = time.Now
	}
	s.threadHub = &threadHub{threads: map[string]*threadWatch{}}
	s.sched = schedule.New(store, schedule.Options{CatchUp: opts.CatchUp, Clock: opts.ScheduleClock, Logger: opts.Logger})
	// Receipts stored through another bridge on the same database.
	store.WatchReceipts(s.receiptHub.add)
	s.handler = s.routes()
	return s, nil
}

// CheckListen applies the listen-address rule on its own, so that a command
// can refuse a bad address before it opens anything: addr must be
// host:port, and a non-loopback host needs a token (ErrInsecureAddr).
func CheckListen(addr, token string) error {
	return httpguard.CheckListen(addr, token, "--token-file or BRIDGE_TOKEN")
}

// routes builds the router: security and instrumentation first, then the
// API. Stream routes get no timeout or buffering middleware.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(s.instrument, s.hsts, s.gate.Wrap, s.noteSeen)
	r.NotFound(s.h(func(w http.ResponseWriter, r *http.Request) error {
		return agentbridge.Errorf(agentbridge.ECodeNotFound, "There is no %s on this server.", r.URL.Path)
	}))
	r.MethodNotAllowed(s.h(func(w http.ResponseWriter, r *http.Request) error {
		return agentbridge.Errorf(agentbridge.ECodeMethodNotAllowed, "%s is not allowed on %s.", r.Method, r.URL.Path)
	}))

	for _, rt := range s.api() {
		r.Method(rt.method, rt.pattern, s.h(scoped(rt)))
	}
	metrics := s.metrics.handler()
	r.Get("/metrics", s.h(func(w http.ResponseWriter, r *http.Request) error {
		// An agent token is one run's: the bridge's counters (routes,
		// threads' traffic) are not its to read.
		if cred, ok := httpguard.CredentialFrom(r.Context()); ok && cred.Scope == agentbridge.ScopeAgent {
			return agentbridge.Errorf(agentbridge.ECodeForbiddenScope, "An agent token may not read /metrics; a person, coordinator or read token may.")
		}
		metrics.ServeHTTP(w, r)
		return nil
	}))
	if s.opts.UI != nil {
		r.Handle("/ui", s.opts.UI)
		r.Handle("/ui/*", s.opts.UI)
	}
	return r
}

// route is one API endpoint: how it is matched, what it does in a phrase
// (for the index GET / answers), and its handler.
type route struct {
	method, pattern, doc string
	handle               handlerFunc
}

// api lists every endpoint but /metrics and the UI, in the order the index
// shows them.
func (s *Server) api() []route {
	return []route{
		{"GET", "/", "this index (a browser asking for HTML is sent to /ui)", s.handleIndex},
		{"GET", "/ping", "liveness and version", s.handlePing},
		{"GET", "/healthz", "ok when the event store answers", s.handleHealthz},
		{"POST", "/auth/login", "exchange the token for a browser cookie", s.handleLogin},
		{"POST", "/auth/logout", "clear the login cookie", s.handleLogout},
		{"GET", "/auth/whoami", "the credential this request carries {id, name, scope, thread?, participant?, open, sender?}", s.handleWhoami},
		{"GET", "/auth/tokens", "the tokens, without their secrets (person only), a page at a time (?after, ?limit)", s.handleTokensGet},
		{"POST", "/auth/tokens", "create a token {scope, name, thread?, participant?, ttl_s?, agents?}; its secret is shown once", s.handleTokensPost},
		{"DELETE", "/auth/tokens/{id}", "revoke a token", s.handleTokenDelete},
		{"POST", "/auth/login-links", "a one-time login link for a browser (person only)", s.handleLoginLinkPost},
		{"GET", "/threads", "list threads, most recently updated first (?limit, ?after)", s.handleThreadsGet},
		{"POST", "/threads", "create a thread {id?, name?, from?}", s.handleThreadsPost},
		{"GET", "/threads/{id}", "one thread", s.handleThreadGet},
		{"GET", "/threads/{id}/events", "a thread's events (?since, ?after, ?tail, ?until, ?limit)", s.handleEventsGet},
		{"POST", "/threads/{id}/events", "append an event {type?, from, to?, content, meta?}", s.handleEventsPost},
		{"GET", "/threads/{id}/events/stream", "a thread's events as Server-Sent Events", s.handleThreadStream},
		{"GET", "/threads/{id}/state", "a thread's derived state (?at)", s.handleStateGet},
		{"GET", "/threads/{id}/transcript", "a thread as text to read", s.handleTranscript},
		{"GET", "/threads/{id}/presence", "who is present in a thread", s.handlePresenceGet},
		{"POST", "/threads/{id}/presence", "report presence {from, state, details?}", s.handlePresencePost},
		{"GET", "/threads/{id}/receipts", "delivery receipts of a thread's events", s.handleReceiptsGet},
		{"PUT", "/threads/{id}/receipts/{event}/{participant}", "record a delivery receipt", s.handleReceiptPut},
		{"POST", "/threads/{id}/attachments", "upload a file: multipart field file, or the raw body with ?name=; its type is sniffed", s.handleAttachmentPost},
		{"GET", "/attachments/{id}", "an attachment's bytes, served with its sniffed type", s.handleAttachmentGet},
		{"GET", "/coordinators", "the registered coordinators, live or lapsed, and which live ones serve each agent (?served_ever, ?client)", s.handleCoordinatorsGet},
		{"PUT", "/coordinators/{id}", "register a coordinator or renew its heartbeat {instance, host, agents, version?, capacity?, status_url?, ttl_ms?, workspaces?}", s.handleCoordinatorPut},
		{"DELETE", "/coordinators/{id}", "remove a coordinator's registration (?instance)", s.handleCoordinatorDelete},
		{"POST", "/claims", "claim a run or a notice {thread, event, participant|notice, round?, coordinator, instance, client?, wait?, pending_ttl_ms?, fallback_from?}", s.handleClaimsPost},
		{"POST", "/claims/{id}/done", "finish a claim {coordinator, instance, fence, outcome?, reason?}", s.handleClaimDone},
		{"POST", "/claims/{id}/wait", "put a running claim back to waiting until a usage limit resets {coordinator, instance, fence, retry_at, pending_ttl_ms?, reason?}", s.handleClaimWait},
		{"GET", "/claims", "claims a coordinator may take (?claimable) or of a thread (?thread)", s.handleClaimsGet},
		{"GET", "/search", "search every thread the credential may read (?q, ?thread, ?from, ?type, ?before, ?after, ?limit, ?cursor)", s.handleSearch},
		{"GET", "/schedules", "the threads' schedules with their next due time (?thread)", s.handleSchedules},
		{"GET", "/events", "events of all threads, long-polling (?after, ?wait, ?limit)", s.handleEventsPoll},
		{"GET", "/events/stream", "events of all threads and presence as Server-Sent Events", s.handleGlobalStream},
		{"POST", "/suggest", "suggest an improvement {from, title, description}", s.handleSuggestPost},
		{"GET", "/suggestions", "the suggestions sent (?status)", s.handleSuggestionsGet},
		{"POST", "/suggestions/{id}/status", "accept, dismiss or reopen a suggestion {status, by}", s.handleSuggestionStatusPost},
		{"POST", "/auth/pair", "a one-time link that pairs a device {name}", s.handlePair},
		{"POST", "/auth/pair/redeem", "pair this browser: its own person token as the login cookie {code}", s.handlePairRedeem},
		{"GET", "/devices", "the paired devices, their notifications and last push", s.handleDevices},
		{"DELETE", "/devices/{id}", "revoke a paired device", s.handleDeviceRevoke},
		{"GET", "/push/key", "the VAPID public key browsers subscribe with", s.handlePushKey},
		{"GET", "/push/subscriptions", "the devices subscribed to Web Push and their last delivery", s.handlePushList},
		{"POST", "/push/subscriptions", "subscribe a device {endpoint, keys, device, categories}", s.handlePushSubscribe},
		{"POST", "/push/unsubscribe", "remove a device's subscription {endpoint}", s.handlePushUnsubscribe},
		{"POST", "/push/visible", "a device's page shows a thread {endpoint, thread, visible}", s.handlePushVisible},
	}
}

// scoped puts the credential's scope check (checkScope) in front of a
// route's handler.
func scoped(rt route) handlerFunc {
	pattern := rt.method + " " + rt.pattern
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := checkScope(r, pattern); err != nil {
			return err
		}
		return rt.handle(w, r)
	}
}

// indexEntry is one endpoint in the answer of GET /.
type indexEntry struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Doc    string `json:"doc"`
}

// handleIndex sends a browser (which asks for HTML) to the UI and answers
// anyone else with the list of endpoints, as the original did.
func (s *Server) handleIndex(w http.ResponseWriter, r *http.Request) error {
	if s.opts.UI != nil && strings.Contains(r.Header.Get("Accept"), "text/html") {
		http.Redirect(w, r, "/ui", http.StatusFound)
		return nil
	}
	routes := s.api()
	list := make([]indexEntry, 0, len(routes)+2)
	for _, rt := range routes {
		list = append(list, indexEntry{rt.method, rt.pattern, rt.doc})
	}
	list = append(list, indexEntry{"GET", "/metrics", "Prometheus metrics"})
	ui := ""
	if s.opts.UI != nil {
		ui = "/ui"
		list = append(list, indexEntry{"GET", "/ui", "the web UI"})
	}
	httpjson.Write(w, http.StatusOK, struct {
		Server    string       `json:"server"`
		Version   string       `json:"version"`
		UI        string       `json:"ui,omitempty"`
		Endpoints []indexEntry `json:"endpoints"`
	}{"agent-bridge", s.opts.Version, ui, list})
	return nil
}

// Open binds the listener synchronously, so a port already in use fails
// here, and starts serving in the background.
func (s *Server) Open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return errors.New("bridge: server already open")
	}
	if s.ctx.Err() != nil {
		return errors.New("bridge: server closed")
	}
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.opts.Addr, err)
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.ln = ln
	s.srv = s.gate.Server(s.handler)
	s.srv.BaseContext = func(net.Listener) context.Context { return s.ctx }
	s.srv.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)
	s.served = make(chan struct{})
	s.notified = make(chan struct{})
	s.pruned = make(chan struct{})
	s.swept = make(chan struct{})
	s.attSwept = make(chan struct{})
	s.scheduled = make(chan struct{})
	go func() {
		defer close(s.scheduled)
		s.sched.Run(s.ctx)
	}()
	go func() {
		defer close(s.swept)
		s.sweepClaims(s.ctx)
	}()
	go func() {
		defer close(s.attSwept)
		s.sweepAttachments(s.ctx)
	}()
	go func() {
		defer close(s.notified)
		s.notifier.Run(s.ctx)
	}()
	go func() {
		defer close(s.pruned)
		s.pruneTokens(s.ctx)
	}()
	go func() {
		defer close(s.served)
		err := s.srv.Serve(ln)
		if !errors.Is(err, http.ErrServerClosed) {
			s.srvErr = fmt.Errorf("serve: %w", err)
			s.log.Error("serve", "err", err)
		}
	}()
	s.log.Info("bridge listening", "addr", ln.Addr().String())
	return nil
}

// OpenLocal adds, after Open, a plain-HTTP listener on a free loopback
// port serving the same handler, and returns its URL. It is for a client
// in this process when the main listener serves HTTPS with a certificate
// that client cannot check (self-signed, or issued for the machine's
// name): up's own coordinator. The requests it takes need the same
// credentials; Close closes it with the main listener.
func (s *Server) OpenLocal() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return "", errors.New("bridge: OpenLocal before Open")
	}
	if s.local {
		return "", errors.New("bridge: local listener already open")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listen on loopback: %w", err)
	}
	s.local = true
	s.serveLocked(ln, "this process")
	return "http://" + ln.Addr().String(), nil
}

// Serve serves, after Open, one more listener with the same handler, gate
// and credentials: the tailnet's TLS listener (internal/tailnet), whose
// name the gate must allow (Options.AllowedHosts). what names it in the
// log. URL still names Open's listener; Close closes this one with it.
func (s *Server) Serve(ln net.Listener, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return errors.New("bridge: Serve before Open")
	}
	s.serveLocked(ln, what)
	return nil
}

// serveLocked serves ln with the open server until Close; s.mu is held.
func (s *Server) serveLocked(ln net.Listener, what string) {
	srv, done := s.srv, make(chan struct{})
	s.extra = append(s.extra, done)
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serve", "listener", what, "err", err)
		}
	}()
	s.log.Info("bridge listening", "for", what, "addr", ln.Addr().String())
}

// URL returns the base URL of the listener, such as http://127.0.0.1:5111
// (https with TLS; "" before Open).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	if s.tls != nil {
		return "https://" + s.ln.Addr().String()
	}
	return "http://" + s.ln.Addr().String()
}

// Close shuts the server down gracefully: it cancels the base context, which
// ends streams and long-polls, then waits for in-flight requests until ctx
// is done, after which it closes the remaining connections.
func (s *Server) Close(ctx context.Context) error {
	s.cancel()
	s.threadHub.close()
	s.mu.Lock()
	srv, served, notified, pruned, swept, attSwept, extra, scheduled := s.srv, s.served, s.notified, s.pruned, s.swept, s.attSwept, s.extra, s.scheduled
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("shutdown: %w", err), srv.Close())
	}
	<-served
	for _, done := range extra {
		<-done
	}
	<-notified
	<-pruned
	<-swept
	<-attSwept
	<-scheduled
	return errors.Join(err, s.srvErr)
}
