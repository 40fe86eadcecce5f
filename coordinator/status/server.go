// Package status is the coordinator's status server: its JSON API
// (/healthz, /metrics, /invocations, /decisions, /sessions, /journals, the
// cancel and the login) and the runs dashboard (/, /runs, /usage). It is one
// face of the coordinator, reading through Source what the coordinator
// package keeps. Its security gate (NewGuard, over internal/httpguard)
// checks tokens with the bridge; the coordinator puts it in front of
// Handler and runs the listener.
package status

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// Source is what the status server shows and acts on; the coordinator
// implements it.
type Source interface {
	// Ledger is the coordinator's ledger: runs, decisions, sessions,
	// journals and usage are read from it.
	Ledger() *ledger.DB
	// Cancel stops invocation id (by names who asked; "" for the API).
	Cancel(ctx context.Context, id int64, by string) (ledger.Invocation, error)
	// Health is the gseq of the last event processed and whether the
	// coordinator follows the log (every event appended from now on will
	// be processed).
	Health() (cursor int64, following bool)
	// Metrics is the coordinator's Prometheus registry.
	Metrics() prometheus.Gatherer
	// BridgeURL is the bridge the coordinator follows; Bridge is its
	// client, for trigger excerpts and thread names.
	BridgeURL() string
	Bridge() *client.Client
	// CachedThreadName is a thread's name from the coordinator's folded
	// state, when it has the thread.
	CachedThreadName(thread string) (string, bool)
}

// TokenHint says where the status API's token comes from.
const TokenHint = "the coordinator's bridge_token or BRIDGE_TOKEN, the bridge's token"

// Server is the status server's handlers and the dashboard's caches.
type Server struct {
	src   Source
	guard *httpguard.Guard
	log   *slog.Logger
	// excerpts caches trigger excerpts and thread names for the runs
	// dashboard.
	excerpts excerpts
}

// New returns the status server of src; guard is the gate in front of it,
// whose token the login checks.
func New(src Source, guard *httpguard.Guard, log *slog.Logger) *Server {
	return &Server{src: src, guard: guard, log: log}
}

// Open reports whether a status API request needs no token: the
// liveness probe, and the dashboard's page and files, which hold no data
// (the page's requests for runs carry the login cookie).
func Open(r *http.Request) bool {
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
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string `json:"token"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLoginBody))
	if err == nil {
		err = httpjson.DecodeObject(body, &req, []string{"token"})
	}
	if err != nil {
		// A duplicate key is named as such; any other fault gets the
		// body's one shape.
		var e *agentbridge.Error
		if !errors.As(err, &e) || e.Code != agentbridge.ECodeDuplicateKey {
			e = agentbridge.Errorf(agentbridge.ECodeInvalidJSON, "The body must be {\"token\": \"...\"}.")
		}
		httpjson.WriteError(w, e)
		return
	}
	if !s.guard.HasToken() {
		httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "token_required": false})
		return
	}
	if _, err := s.guard.Credential(r.Context(), req.Token); req.Token == "" || err != nil {
		httpguard.WriteError(w, r, agentbridge.FieldErrorf(agentbridge.ECodeUnauthorized, "token", "That token does not open this coordinator: give its bridge_token, or a person or read token of its bridge."))
		return
	}
	httpguard.SetLoginCookie(w, r, req.Token)
	httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "token_required": true})
}

// Handler serves the status API: /healthz, /metrics, /invocations,
// /decisions, /sessions, /journals and the runs dashboard, all read-only,
// and POST /invocations/{id}/cancel and /auth/login. The coordinator puts
// its gate (the Guard given to New, from NewGuard) in front of it; a read
// credential the gate let through is refused the cancel here.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// following tells scripts and tests that events appended from
		// now on will be processed (startup_mode end has settled).
		cursor, following := s.src.Health()
		httpjson.Write(w, http.StatusOK, map[string]any{"status": "ok", "cursor": cursor, "following": following})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.src.Metrics(), promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /invocations", s.handleInvocations)
	mux.HandleFunc("GET /invocations/{id}", s.handleInvocation)
	mux.HandleFunc("POST /invocations/{id}/cancel", s.handleCancel)
	mux.HandleFunc("GET /decisions", s.handleDecisions)
	mux.HandleFunc("POST /auth/login", s.handleLogin)
	mux.HandleFunc("GET /sessions", s.handleSessions)
	mux.HandleFunc("GET /journals/{participant}", s.handleJournal)
	s.mountDashboard(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeNotFound, "There is no %s %s on the coordinator's status API; try /invocations or /decisions?event=ID.", r.Method, r.URL.Path))
	})
	return readOnlyUnlessPerson(mux)
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
func (s *Server) handleInvocations(w http.ResponseWriter, r *http.Request) {
	f, ferr := invocationFilter(r.URL.Query(), agentbridge.MaxEventsLimit)
	if ferr != nil {
		httpjson.WriteError(w, ferr)
		return
	}
	invs, err := s.src.Ledger().Invocations(r.Context(), f)
	if err != nil {
		s.log.Error("list invocations", "err", err)
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeInternal, "The invocation records could not be read."))
		return
	}
	if invs == nil {
		invs = []ledger.Invocation{}
	}
	httpjson.Write(w, http.StatusOK, InvocationsResponse{Invocations: invs})
}

func (s *Server) handleDecisions(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("event")
	if id == "" {
		httpjson.WriteError(w, agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "event", "Say which event: /decisions?event=EVENT_ID."))
		return
	}
	d, err := s.src.Ledger().Decision(r.Context(), id)
	if errors.Is(err, ledger.ErrNotFound) {
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeEventNotFound,
			"The coordinator recorded no decision for event %q: it is not a message, or it was posted before the coordinator started following (startup_mode end) or to another bridge.", id))
		return
	}
	if err != nil {
		s.log.Error("read decision", "err", err)
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeInternal, "The decision could not be read."))
		return
	}
	httpjson.Write(w, http.StatusOK, d)
}
