package bridge

import (
	"context"
	"errors"
	"fmt"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
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
	// RequestTimeout bounds the arrival of a request's headers and body
	// (10 s by default); tests shorten it.
	RequestTimeout time.Duration
}

// Server is the bridge HTTP server. Create it with NewServer, start it with
// Open, stop it with Close; Handler serves the same API without a listener
// (for httptest). It is safe for concurrent use.
type Server struct {
	store    agentbridge.EventStore
	opts     Options
	log      *slog.Logger
	gate     *httpguard.Guard
	presence *presenceHub
	// receipts is the store's receipt side, nil when the store keeps none
	// (the receipt endpoints then answer not_found); receiptHub streams
	// its changes.
	receipts   agentbridge.ReceiptStore
	receiptHub *receiptHub
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

	// ctx is the base context of every request; Close cancels it so that
	// streams and long-polls end promptly instead of holding Shutdown.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	ln     net.Listener
	srv    *http.Server
	served chan struct{} // closed when Serve returns
	srvErr error         // Serve's unexpected error; read only after served
}

// NewServer builds a server over store. It refuses a non-loopback Addr
// without a Token (ErrInsecureAddr) and a malformed CORS origin.
func NewServer(store agentbridge.EventStore, opts Options) (*Server, error) {
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
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if err := CheckListen(opts.Addr, opts.Token); err != nil {
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
	}
	if t, ok := store.(interface{ Tail() *storecore.Tail }); ok {
		s.tail = t.Tail()
	}
	g, err := newGate(opts, s)
	if err != nil {
		cancel()
		return nil, err
	}
	s.gate = g
	s.receipts, _ = store.(agentbridge.ReceiptStore)
	if ss, ok := store.(agentbridge.StatsStore); ok {
		s.metrics.addStoreStats(ss)
	}
	s.receiptHub = newReceiptHub()
	s.threadHub = &threadHub{threads: map[string]*threadWatch{}}
	if rw, ok := store.(agentbridge.ReceiptWatcher); ok {
		// Receipts stored through another bridge on the same database.
		rw.WatchReceipts(s.receiptHub.add)
	}
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
	r.Use(s.instrument, s.gate.Wrap)
	r.NotFound(s.h(func(w http.ResponseWriter, r *http.Request) error {
		return agentbridge.Errorf(agentbridge.ECodeNotFound, "There is no %s on this server.", r.URL.Path)
	}))
	r.MethodNotAllowed(s.h(func(w http.ResponseWriter, r *http.Request) error {
		return agentbridge.Errorf(agentbridge.ECodeMethodNotAllowed, "%s is not allowed on %s.", r.Method, r.URL.Path)
	}))

	for _, rt := range s.api() {
		if s.receipts == nil && strings.Contains(rt.pattern, "/receipts") {
			continue // the store keeps no receipts
		}
		r.Method(rt.method, rt.pattern, s.h(rt.handle))
	}
	r.Get("/metrics", s.metrics.handler().ServeHTTP)
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
		{"GET", "/coordinators", "the registered coordinators, live or lapsed, and which live ones serve each agent", s.handleCoordinatorsGet},
		{"PUT", "/coordinators/{id}", "register a coordinator or renew its heartbeat {instance, host, agents, version?, capacity?, status_url?, ttl_ms?}", s.handleCoordinatorPut},
		{"DELETE", "/coordinators/{id}", "remove a coordinator's registration (?instance)", s.handleCoordinatorDelete},
		{"GET", "/events", "events of all threads, long-polling (?after, ?wait, ?limit)", s.handleEventsPoll},
		{"GET", "/events/stream", "events of all threads and presence as Server-Sent Events", s.handleGlobalStream},
		{"POST", "/suggest", "suggest an improvement {from, title, description}", s.handleSuggestPost},
		{"GET", "/suggestions", "the suggestions sent (?status)", s.handleSuggestionsGet},
		{"POST", "/suggestions/{id}/status", "accept, dismiss or reopen a suggestion {status, by}", s.handleSuggestionStatusPost},
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
	s.ln = ln
	s.srv = s.gate.Server(s.handler)
	s.srv.BaseContext = func(net.Listener) context.Context { return s.ctx }
	s.srv.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)
	s.served = make(chan struct{})
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

// URL returns the base URL of the listener, such as http://127.0.0.1:5111
// ("" before Open).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
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
	srv, served := s.srv, s.served
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("shutdown: %w", err), srv.Close())
	}
	<-served
	return errors.Join(err, s.srvErr)
}
