package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
)

// ledgerOutage logs the edges of a time when the ledger refuses writes (a
// full disk, a lost PostgreSQL server): one line when the first write
// fails and one when a write succeeds again, instead of one per failed
// write or reconnect. Everything waits meanwhile: the follow loop commits
// nothing and reads the events again, and no reply is posted before its
// outcome is recorded.
type ledgerOutage struct {
	log *slog.Logger

	mu   sync.Mutex
	down bool
	// failures counts the writes refused during the outage.
	failures int
}

// failed notes a refused write. A write its caller gave up on (its
// context cancelled, as at shutdown) was not refused by the ledger: it
// neither starts an outage nor counts in one.
func (o *ledgerOutage) failed(what string, err error) {
	if errors.Is(err, context.Canceled) {
		o.log.Debug("a ledger write given up by its caller", "what", what, "err", err)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures++
	if o.down {
		o.log.Debug("the ledger still refuses writes", "what", what, "err", err)
		return
	}
	o.down = true
	o.log.Error("the ledger refuses writes; nothing is committed or posted until it takes them again", "what", what, "err", err)
}

// ok notes a write that succeeded.
func (o *ledgerOutage) ok() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down {
		return
	}
	o.log.Info("the ledger takes writes again; carrying on", "refused_writes", o.failures)
	o.down, o.failures = false, 0
}
