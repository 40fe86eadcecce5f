package coordinator

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
)

// statusSource is the coordinator as the status server sees it
// (status.Source): a type of its own, so that the coordinator's exported
// API does not grow by the accessors only the status server needs.
type statusSource struct{ c *Coordinator }

var _ status.Source = statusSource{}

// Ledger is the coordinator's ledger.
func (s statusSource) Ledger() *ledger.DB { return s.c.db }

// Cancel stops a run as the CLI's cancel does.
func (s statusSource) Cancel(ctx context.Context, id int64, by string) (ledger.Invocation, error) {
	return s.c.Cancel(ctx, id, by)
}

// Health is the cursor and whether the follow loop has settled.
func (s statusSource) Health() (int64, bool) { return s.c.cursor.Load(), s.c.following.Load() }

// Metrics is the coordinator's own Prometheus registry.
func (s statusSource) Metrics() prometheus.Gatherer { return s.c.metrics.reg }

// BridgeURL is the bridge followed.
func (s statusSource) BridgeURL() string { return s.c.cfg.Load().BridgeURL }

// Bridge is the coordinator's bridge client.
func (s statusSource) Bridge() *client.Client { return s.c.bridge }

// CachedThreadName is a thread's name from the folded-state cache.
func (s statusSource) CachedThreadName(thread string) (string, bool) {
	tc, ok := s.c.threads.Get(thread)
	return tc.name, ok
}
