package coordinator

import (
	"log/slog"

	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// deps is what the coordinator's helpers read and write through: the
// ledger, the bridge's client, the configuration in effect and the log.
// The shell (New) makes it once and hands it to each helper, with the
// few other parts a helper uses named beside it, so that no helper holds
// the Coordinator; retry (retry.go) is its one retry loop.
type deps struct {
	db     *ledger.DB
	bridge *client.Client
	// config returns the configuration in effect (a reload replaces it).
	config func() *config.Config
	log    *slog.Logger
}
