package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/agent-bridge/agent-bridge/coordinator/state"
)

// heldLease is this coordinator's lease on a shared PostgreSQL ledger.
type heldLease struct {
	// ctx ends when the lease is lost or the coordinator's context ends.
	ctx    context.Context
	cancel context.CancelFunc
	lost   atomic.Bool
	done   chan struct{}
}

// holdLease waits, as a standby, until this coordinator holds the lease on
// the PostgreSQL ledger at url. It returns nil, nil when ctx ended while
// standing by.
func holdLease(ctx context.Context, url string, logger *slog.Logger) (*heldLease, error) {
	lease, err := state.AcquireLease(ctx, url, logger)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h := &heldLease{done: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(ctx)
	go func() {
		defer close(h.done)
		select {
		case <-lease.Lost():
			h.lost.Store(true)
			logger.Error("lost the coordinator lease; stopping")
			h.cancel()
		case <-h.ctx.Done():
		}
		if err := lease.Release(); err != nil {
			logger.Debug("release lease", "err", err)
		}
	}()
	return h, nil
}

// release gives the lease up and reports whether it had been lost.
func (h *heldLease) release() (lost bool) {
	h.cancel()
	<-h.done
	return h.lost.Load()
}
