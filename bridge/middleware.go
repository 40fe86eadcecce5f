package bridge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type ctxKey int

const requestIDKey ctxKey = iota

// requestID returns the id instrument gave the request ("" outside one).
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// statusWriter records the status for logs and metrics. It implements
// Unwrap so http.ResponseController reaches the real writer's Flush and
// deadlines, which the streams need.
type statusWriter struct {
	http.ResponseWriter
	status int
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

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument gives each request an id (echoed as X-Request-Id), and records
// its latency by route pattern and a debug log line. It never logs headers,
// so the token cannot end up in a log.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := fmt.Sprintf("%s-%d", s.reqBase, s.reqSeq.Add(1))
		w.Header().Set("X-Request-Id", id)
		sw := &statusWriter{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		d := time.Since(start)
		s.metrics.latency.WithLabelValues(route, r.Method, strconv.Itoa(sw.status)).Observe(d.Seconds())
		s.log.Debug("request", "request_id", id, "method", r.Method, "route", route, "status", sw.status, "duration", d)
	})
}

// metrics are the server's Prometheus collectors, on a registry of its own
// so that several servers (tests, `up`) never collide.
type metrics struct {
	reg         *prometheus.Registry
	appends     prometheus.Counter
	subscribers *prometheus.GaugeVec
	latency     *prometheus.HistogramVec
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
	}
	m.reg.MustRegister(m.appends, m.subscribers, m.latency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
