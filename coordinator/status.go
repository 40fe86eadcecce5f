package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// metrics are the coordinator's Prometheus metrics, in a registry of its
// own so that two coordinators in one process (tests) do not collide.
type metrics struct {
	reg         *prometheus.Registry
	invocations *prometheus.CounterVec
	duration    prometheus.Histogram
	queueDepth  prometheus.Gauge
	// tokens (by participant and direction) and cost (by participant)
	// add up the usage adapters report on the progress fd.
	tokens *prometheus.CounterVec
	cost   *prometheus.CounterVec
}

func newMetrics(c *Coordinator) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agent_bridge_coordinator_invocations_total",
			Help: "Adapter invocations by final status.",
		}, []string{"status"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agent_bridge_coordinator_invocation_duration_seconds",
			Help:    "Wall time of adapter runs.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agent_bridge_coordinator_queue_depth",
			Help: "Invocations waiting for their participant, a concurrency slot or the rate limit.",
		}),
	}
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agent_bridge_coordinator_tokens_total",
		Help: "Tokens adapters reported using, by participant and direction (input, output).",
	}, []string{"participant", "direction"})
	m.cost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agent_bridge_coordinator_cost_usd_total",
		Help: "Cost in US dollars adapters reported, by participant.",
	}, []string{"participant"})
	lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agent_bridge_coordinator_cursor_lag",
		Help: "Events in the bridge's log not yet processed (head gseq minus cursor); -1 when the bridge is unreachable.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		head, err := c.bridge.Head(ctx)
		if err != nil {
			return -1
		}
		return float64(max(head-c.cursor.Load(), 0))
	})
	m.reg.MustRegister(m.invocations, m.duration, m.queueDepth, m.tokens, m.cost, lag)
	return m
}

// addUsage adds a run's new usage; a negative delta (an adapter that
// reported less than before) is ignored, as counters only grow.
func (m *metrics) addUsage(participant string, in, out int64, cost float64) {
	if in > 0 {
		m.tokens.WithLabelValues(participant, "input").Add(float64(in))
	}
	if out > 0 {
		m.tokens.WithLabelValues(participant, "output").Add(float64(out))
	}
	if cost > 0 {
		m.cost.WithLabelValues(participant).Add(cost)
	}
}

func (m *metrics) observe(status string, d time.Duration) {
	m.invocations.WithLabelValues(status).Inc()
	if d > 0 {
		m.duration.Observe(d.Seconds())
	}
}

// newStatusGuard builds the status API's gate, the bridge's own
// (internal/httpguard): Host loopback or status_allowed_hosts, Origin on
// the cancel, and the token the coordinator uses with the bridge
// (bridge_token, else BRIDGE_TOKEN), so that the runs, their trigger
// excerpts and the cancel are as closed as the bridge's own data. A
// non-loopback status_addr without a token is a *ConfigError.
func newStatusGuard(cfg Config, timeout time.Duration) (*httpguard.Guard, error) {
	if err := CheckStatusListen(cfg); err != nil {
		return nil, err
	}
	g, err := httpguard.New(httpguard.Options{
		Token:          cfg.BridgeToken,
		AllowedHosts:   cfg.StatusAllowedHosts,
		ListenAddr:     cfg.StatusAddr,
		Open:           statusOpen,
		TokenHint:      statusTokenHint,
		HostHint:       "list it in the coordinator config's status_allowed_hosts",
		OriginHint:     "only the coordinator's own dashboard may",
		RequestTimeout: timeout,
	})
	if err != nil {
		return nil, &ConfigError{Key: "status_allowed_hosts", Err: err}
	}
	return g, nil
}

// statusTokenHint says where the status API's token comes from.
const statusTokenHint = "the coordinator's bridge_token or BRIDGE_TOKEN, the bridge's token"

// CheckStatusListen applies the listen-address rule to status_addr on its
// own, so that a command can refuse it before it starts anything (New
// applies it too): a non-loopback status_addr needs a token, which is the
// one the coordinator uses with the bridge. The error is a *ConfigError
// naming status_addr; an empty status_addr (no status API) passes.
func CheckStatusListen(cfg Config) error {
	if cfg.StatusAddr == "" {
		return nil
	}
	if err := httpguard.CheckListen(cfg.StatusAddr, cfg.BridgeToken, statusTokenHint); err != nil {
		return &ConfigError{Key: "status_addr", Err: err}
	}
	return nil
}

// statusOpen reports whether a status API request needs no token: the
// liveness probe, and the dashboard's page and files, which hold no data
// (the page's requests for runs carry the login cookie).
func statusOpen(r *http.Request) bool {
	p := r.URL.Path
	if r.Method == http.MethodPost {
		return p == "/auth/login"
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return p == "/healthz" || p == "/" || strings.HasPrefix(p, "/dashboard/")
}

// maxLoginBody caps the body of POST /auth/login, which is read before any
// token is known.
const maxLoginBody = 4 << 10

// handleLogin serves POST /auth/login {"token": "..."}: with the right
// token it sets the same HttpOnly, SameSite=Strict cookie as the bridge's
// login, for the dashboard's requests (docs/security.md).
func (c *Coordinator) handleLogin(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string `json:"token"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxLoginBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		httpjson.WriteError(w, http.StatusBadRequest, agentbridge.Errorf(agentbridge.ECodeInvalidJSON, "The body must be {\"token\": \"...\"}."))
		return
	}
	if !c.guard.HasToken() {
		httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "token_required": false})
		return
	}
	if !c.guard.TokenEqual(req.Token) {
		httpguard.WriteError(w, r, agentbridge.FieldErrorf(agentbridge.ECodeUnauthorized, "token", "That token is not this coordinator's token (the bridge's token, bridge_token in its config)."))
		return
	}
	httpguard.SetLoginCookie(w, r, req.Token)
	httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "token_required": true})
}

// statusHandler serves the status API: /healthz, /metrics, /invocations
// and /decisions, all read-only, and POST /invocations/{id}/cancel. The
// gate (newStatusGuard) is put in front of it by Run.
func (c *Coordinator) statusHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// following tells scripts and tests that events appended from
		// now on will be processed (startup_mode end has settled).
		httpjson.Write(w, http.StatusOK, map[string]any{"status": "ok", "cursor": c.cursor.Load(), "following": c.following.Load()})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(c.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /invocations", c.handleInvocations)
	mux.HandleFunc("GET /invocations/{id}", c.handleInvocation)
	mux.HandleFunc("POST /invocations/{id}/cancel", c.handleCancel)
	mux.HandleFunc("GET /decisions", c.handleDecisions)
	mux.HandleFunc("POST /auth/login", c.handleLogin)
	mux.HandleFunc("GET /sessions", c.handleSessions)
	mux.HandleFunc("GET /journals/{participant}", c.handleJournal)
	c.mountDashboard(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpjson.WriteError(w, http.StatusNotFound, agentbridge.Errorf(agentbridge.ECodeNotFound, "There is no %s %s on the coordinator's status API; try /invocations or /decisions?event=ID.", r.Method, r.URL.Path))
	})
	return mux
}

// InvocationsResponse is the body of GET /invocations.
type InvocationsResponse struct {
	Invocations []ledger.Invocation `json:"invocations"`
}

// invocationFilter reads the filter of GET /invocations and GET /runs:
// thread, participant, status (one of the statuses) and limit (1 to max).
func invocationFilter(q url.Values, max int) (ledger.Filter, *agentbridge.Error) {
	f := ledger.Filter{Thread: q.Get("thread"), Participant: q.Get("participant"), Status: q.Get("status")}
	if f.Status != "" && !ledger.ValidStatus(f.Status) {
		return f, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "status",
			"%q is not an invocation status: use queued, running, succeeded, failed, timeout, interrupted, refused, cancelled or passed.", f.Status)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > max {
			return f, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "limit", "limit must be a whole number from 1 to %d.", max)
		}
		f.Limit = n
	}
	return f, nil
}

// handleInvocations serves GET /invocations?thread=&participant=&status=&limit=.
func (c *Coordinator) handleInvocations(w http.ResponseWriter, r *http.Request) {
	f, ferr := invocationFilter(r.URL.Query(), agentbridge.MaxEventsLimit)
	if ferr != nil {
		httpjson.WriteError(w, http.StatusBadRequest, ferr)
		return
	}
	invs, err := c.db.Invocations(r.Context(), f)
	if err != nil {
		c.log.Error("list invocations", "err", err)
		httpjson.WriteError(w, http.StatusInternalServerError, agentbridge.Errorf(agentbridge.ECodeInternal, "The invocation records could not be read."))
		return
	}
	if invs == nil {
		invs = []ledger.Invocation{}
	}
	httpjson.Write(w, http.StatusOK, InvocationsResponse{Invocations: invs})
}

func (c *Coordinator) handleDecisions(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("event")
	if id == "" {
		httpjson.WriteError(w, http.StatusBadRequest, agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "event", "Say which event: /decisions?event=EVENT_ID."))
		return
	}
	d, err := c.db.Decision(r.Context(), id)
	if errors.Is(err, ledger.ErrNotFound) {
		httpjson.WriteError(w, http.StatusNotFound, agentbridge.Errorf(agentbridge.ECodeEventNotFound,
			"The coordinator recorded no decision for event %q: it is not a message, or it was posted before the coordinator started following (startup_mode end) or to another bridge.", id))
		return
	}
	if err != nil {
		c.log.Error("read decision", "err", err)
		httpjson.WriteError(w, http.StatusInternalServerError, agentbridge.Errorf(agentbridge.ECodeInternal, "The decision could not be read."))
		return
	}
	httpjson.Write(w, http.StatusOK, d)
}
