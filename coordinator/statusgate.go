package coordinator

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
)

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
		Open:           status.Open,
		TokenHint:      status.TokenHint,
		HostHint:       "list it in the coordinator config's status_allowed_hosts",
		OriginHint:     "only the coordinator's own dashboard may",
		RequestTimeout: timeout,
	})
	if err != nil {
		return nil, &ConfigError{Key: "status_allowed_hosts", Err: err}
	}
	return g, nil
}

// CheckStatusListen applies the listen-address rule to status_addr on its
// own, so that a command can refuse it before it starts anything (New
// applies it too): a non-loopback status_addr needs a token, which is the
// one the coordinator uses with the bridge. The error is a *ConfigError
// naming status_addr; an empty status_addr (no status API) passes.
func CheckStatusListen(cfg Config) error {
	if cfg.StatusAddr == "" {
		return nil
	}
	if err := httpguard.CheckListen(cfg.StatusAddr, cfg.BridgeToken, status.TokenHint); err != nil {
		return &ConfigError{Key: "status_addr", Err: err}
	}
	return nil
}

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
	tc, ok := s.c.threads.get(thread)
	return tc.name, ok
}
