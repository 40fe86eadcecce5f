package bridge

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// requestID returns the id instrument gave the request ("" outside one),
// from the X-Request-Id header it set on w: reading it back from the
// answer's headers saves every request a context value and the copy of
// the *http.Request that WithContext makes.
func requestID(w http.ResponseWriter) string {
	if v := w.Header()["X-Request-Id"]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// statusWriter records the status for logs and metrics. It implements
// Unwrap so http.ResponseController reaches the real writer's Flush and
// deadlines, which the streams need.
type statusWriter struct {
	http.ResponseWriter
	status int
	// idHeader holds the request id; it backs the X-Request-Id header
	// value, saving an allocation per request.
	idHeader [1]string
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// WriteString lets io.WriteString reach the real writer's WriteString
// without converting to a byte slice.
func (w *statusWriter) WriteString(s string) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return io.WriteString(w.ResponseWriter, s)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument gives each request an id (echoed as X-Request-Id), and records
// its latency by route pattern and a debug log line. It never logs headers,
// so the token cannot end up in a log. It runs on every request, so it
// formats the id without fmt, reuses one histogram observer per (route,
// method, status) instead of hashing the labels each time, and builds the
// debug line only when debug logging is on.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var buf [48]byte
		sw := &statusWriter{ResponseWriter: w}
		id := string(strconv.AppendUint(append(append(buf[:0], s.reqBase...), '-'), s.reqSeq.Add(1), 10))
		sw.idHeader[0] = id
		w.Header()["X-Request-Id"] = sw.idHeader[:1:1]
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		d := time.Since(start)
		s.metrics.observer(route, methodLabel(r.Method), sw.status).Observe(d.Seconds())
		if s.log.Enabled(r.Context(), slog.LevelDebug) {
			s.log.Debug("request", "request_id", id, "method", r.Method, "route", route, "status", sw.status, "duration", d)
		}
	})
}

// methodLabel is the method label of a request: the method itself for the
// ones HTTP defines, "other" for anything else. A client may send any token
// as its method, and a label per token would grow the metrics (and the
// observer cache) without bound.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// latencyKey names one latency series.
type latencyKey struct {
	route, method string
	status        int
}

// metrics are the server's Prometheus collectors, on a registry of its own
// so that several servers (tests, `up`) never collide.
type metrics struct {
	reg         *prometheus.Registry
	appends     prometheus.Counter
	subscribers *prometheus.GaugeVec
	latency     *prometheus.HistogramVec
	// pushLatency and pushes are Web Push's (contract 8.4): from an event
	// reaching the notifier to the push service's answer, and each push's
	// outcome (sent, expired, failed).
	pushLatency prometheus.Histogram
	pushes      *prometheus.CounterVec
	// observers caches latency's children by latencyKey: the set is
	// bounded by the route patterns, methodLabel's methods and the
	// statuses the server answers.
	observers sync.Map
}

// observer returns the latency histogram of one (route, method, status).
func (m *metrics) observer(route, method string, status int) prometheus.Observer {
	k := latencyKey{route: route, method: method, status: status}
	if o, ok := m.observers.Load(k); ok {
		return o.(prometheus.Observer)
	}
	o := m.latency.WithLabelValues(route, method, strconv.Itoa(status))
	m.observers.Store(k, o)
	return o
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		appends: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agent_bridge_appends_total",
			Help: "Events appended through the HTTP API (idempotent replays excluded).",
		}),
		subscribers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agent_bridge_stream_subscribers",
			Help: "Open event streams and long-polls, by kind (thread, global, poll).",
		}, []string{"kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agent_bridge_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern (streams count their whole life).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30, 120},
		}, []string{"route", "method", "code"}),
		pushLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agent_bridge_push_latency_seconds",
			Help:    "Web Push latency: from an event reaching the notifier to the push service's answer (or its failure).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 30},
		}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agent_bridge_push_deliveries_total",
			Help: "Web Push deliveries by outcome: sent, expired (404/410: the subscription is removed), failed (another status, or no answer).",
		}, []string{"outcome"}),
	}
	for _, o := range []string{agentbridge.PushSent, agentbridge.PushExpired, "failed"} {
		m.pushes.WithLabelValues(o)
	}
	m.reg.MustRegister(m.appends, m.subscribers, m.latency, m.pushLatency, m.pushes, controlParses(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observePush counts one push's outcome and its latency.
func (m *metrics) observePush(d agentbridge.PushDelivery) {
	outcome := d.Outcome
	if strings.HasPrefix(outcome, agentbridge.PushFailedPfx) {
		outcome = "failed"
	}
	m.pushes.WithLabelValues(outcome).Inc()
	m.pushLatency.Observe(float64(d.LatencyMS) / 1000)
}

// addStoreStats exports a store's group-commit counters, read at scrape
// time: agent_bridge_appends_total counts HTTP appends only, these count
// what the writer did (thread creations and refusals too, and how many
// commits carried them).
func (m *metrics) addStoreStats(ss agentbridge.StatsStore) {
	counter := func(name, help string, get func(agentbridge.StoreStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(get(ss.Stats())) })
	}
	m.reg.MustRegister(
		counter("agent_bridge_store_events_total", "Events the store committed, thread.created included.",
			func(st agentbridge.StoreStats) uint64 { return st.Appends }),
		counter("agent_bridge_store_replayed_total", "Appends the store answered from an idempotency key.",
			func(st agentbridge.StoreStats) uint64 { return st.Replayed }),
		counter("agent_bridge_store_rejected_total", "Appends the store's writer refused (unknown thread or reply_to, muted, paused, ...).",
			func(st agentbridge.StoreStats) uint64 { return st.Rejected }),
		counter("agent_bridge_store_commits_total", "Group commits; events_total / commits_total is the mean batch size.",
			func(st agentbridge.StoreStats) uint64 { return st.Batches }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agent_bridge_store_max_batch",
			Help: "The most requests one group commit has carried since the store opened.",
		}, func() float64 { return float64(ss.Stats().MaxBatchSeen) }),
	)
}

// controlParses exports agentbridge.ControlParses. A control is parsed
// once on its way through each daemon (the bridge's append, the
// coordinator's follow loop), so this counter growing faster than control
// events are appended shows a path that parses again.
func controlParses() prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "agent_bridge_control_parses_total",
		Help: "Control contents this process parsed; once per appended control.",
	}, func() float64 { return float64(agentbridge.ControlParses()) })
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
