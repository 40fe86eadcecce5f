package coordinator

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
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
	// failures counts failed runs by participant and failure class
	// (contract 8.5).
	failures *prometheus.CounterVec
}

// newMetrics registers the coordinator's metrics; the cursor lag is the
// bridge's head less cursor, read when scraped.
func newMetrics(bridge *client.Client, cursor *atomic.Int64) *metrics {
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
		head, err := bridge.Head(ctx)
		if err != nil {
			return -1
		}
		return float64(max(head-cursor.Load(), 0))
	})
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agent_bridge_coordinator_failures_total",
		Help: "Failed runs by participant and failure class (quota, auth, unreachable, crash, timeout, cancelled).",
	}, []string{"participant", "class"})
	m.reg.MustRegister(m.invocations, m.duration, m.queueDepth, m.tokens, m.cost, m.failures, lag)
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

// failed counts a run's failure, when it has one.
func (m *metrics) failed(participant string, f *agentbridge.Failure) {
	if f != nil {
		m.failures.WithLabelValues(participant, f.Class).Inc()
	}
}
