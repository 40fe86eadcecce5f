package main

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/backoff"
)

// heldLease is this coordinator's lease on a shared PostgreSQL ledger:
// one per coordinator id (ledger.AcquireLease), so that coordinators with
// different ids work side by side and a second process with the same id
// stands by.
type heldLease struct {
	// ctx ends when the lease is lost or the coordinator's context ends.
	ctx    context.Context
	cancel context.CancelFunc
	lost   atomic.Bool
	done   chan struct{}

	mu     sync.Mutex
	onLost func() // set by the work once it runs (onLoss)
}

// holdLease waits, as a standby, until this process holds coordinator
// id's lease on the PostgreSQL ledger at url. It returns nil, nil when ctx
// ended while standing by.
func holdLease(ctx context.Context, url, id string, logger *slog.Logger) (*heldLease, error) {
	lease, err := ledger.AcquireLease(ctx, url, id, logger)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return watchLease(ctx, lease, logger), nil
}

// ledgerLease is what a heldLease uses of a ledger.Lease.
type ledgerLease interface {
	Lost() <-chan struct{}
	Release() error
}

// watchLease holds lease until it is lost or ctx ends, then releases it.
func watchLease(ctx context.Context, lease ledgerLease, logger *slog.Logger) *heldLease {
	h := &heldLease{done: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(ctx)
	go func() {
		defer close(h.done)
		select {
		case <-lease.Lost():
			h.lost.Store(true)
			logger.Warn("lost the coordinator lease (another process of this coordinator id took it, or the state database stayed unreachable); stopping work and standing by again")
			h.mu.Lock()
			onLost := h.onLost
			h.mu.Unlock()
			if onLost != nil {
				onLost()
			}
			h.cancel()
		case <-h.ctx.Done():
		}
		if err := lease.Release(); err != nil {
			logger.Debug("release lease", "err", err)
		}
	}()
	return h
}

// onLoss sets what runs first when the lease is lost: the coordinator
// skips its shutdown grace, since another coordinator may take over its
// runs at any moment.
func (h *heldLease) onLoss(fn func()) {
	h.mu.Lock()
	h.onLost = fn
	h.mu.Unlock()
}

// release gives the lease up and reports whether it had been lost.
func (h *heldLease) release() (lost bool) {
	h.cancel()
	<-h.done
	return h.lost.Load()
}

// Backoff between two terms of a coordinator whose term ended in a fault,
// so that two coordinators that cannot both work (one status address) do
// not take the lease from each other in a tight loop.
const (
	leaseRetryMin = 200 * time.Millisecond
	leaseRetryMax = 5 * time.Second
)

// runLeased runs work for as long as this process holds coordinator id's
// lease on the PostgreSQL ledger at url, and stands by again whenever a
// term ends in a fault: a coordinator never dies of the lease (contract
// 6.3). A database restart ends the lock's session but not the term: the
// holder takes its lock again and works on (ledger.LeaseRetake). A term
// ends when the lease is lost (another process of the same id took it,
// or the database stayed unreachable), or when work fails while ctx lasts: the status address held past
// statusAddrWait (term.newCoordinator waits that long for a previous
// holder to let it go), or a ledger the restarting database does not
// answer yet. Each fault is logged with its reason, once per term, and
// the next attempt waits a capped, growing backoff with jitter (from
// leaseRetryMin up to leaseRetryMax).
// runLeased returns nil when ctx ends, and work's error only when work
// failed before its first term ever ran and the failure is not one of
// those (a configuration that can never work).
func runLeased(ctx context.Context, url, id string, logger *slog.Logger, work func(*heldLease) error) error {
	hold := func(ctx context.Context) (*heldLease, error) { return holdLease(ctx, url, id, logger) }
	return leaseTerms(ctx, hold, logger, work)
}

// leaseTerms is runLeased's loop over terms, each a lease from hold: a
// test runs it on a testing/synctest clock with leases of its own.
func leaseTerms(ctx context.Context, hold func(context.Context) (*heldLease, error), logger *slog.Logger, work func(*heldLease) error) error {
	retry := backoff.Backoff{Min: leaseRetryMin, Max: leaseRetryMax}
	worked := false
	for {
		lease, err := hold(ctx)
		if err != nil || lease == nil {
			return err // nil: ctx ended while standing by
		}
		began := time.Now()
		err = work(lease)
		lost := lease.release()
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case lost:
			// Logged when it was lost.
		case errors.Is(err, errTermStarted):
			worked = true
			logger.Warn("the coordinator stopped while holding the lease; standing by again", "err", err)
		case errors.Is(err, syscall.EADDRINUSE):
			logger.Warn("the status address stayed in use (another program may hold it); released the lease and standing by again", "wait", statusAddrWait.String(), "err", err)
		case err != nil && !worked && !transientLedgerError(err):
			return err
		case err != nil:
			logger.Warn("the coordinator could not work while holding the lease; standing by again", "err", err)
		default:
			logger.Warn("the coordinator stopped while holding the lease; standing by again")
		}
		if time.Since(began) > leaseRetryMax {
			retry.Reset() // a long term: this is a new fault
		}
		if !backoff.Sleep(ctx, retry.Next()) {
			return nil
		}
	}
}

// statusAddrWait is how long a new lease holder waits for the status
// address while the previous holder, which has lost the lease, stops and
// lets it go; only then does it give the lease back (runLeased).
const statusAddrWait = 10 * time.Second

// term is one coordinator's run: as the holder of leased when that is set
// (a PostgreSQL ledger), else on its own.
type term struct {
	leased *heldLease
	// ran is set once the coordinator runs, so that the caller can tell a
	// coordinator that stopped from one that could not start.
	ran bool
}

// newCoordinator builds the term's coordinator. A lease holder finding
// the status address in use waits up to statusAddrWait for it (retrying
// every 100 ms, logging once), since the previous holder, which lost the
// lease, is stopping and will let it go; giving the lease back at once
// would hand it to that stopping coordinator. On its return the
// coordinator's shutdown skips the grace when the lease is lost.
func (t *term) newCoordinator(ctx context.Context, opts coordinator.Options, logger *slog.Logger) (*coordinator.Coordinator, error) {
	deadline := time.Now().Add(statusAddrWait)
	logged := false
	for {
		c, err := coordinator.New(opts)
		if err == nil {
			if t.leased != nil {
				t.leased.onLoss(c.SkipGrace)
			}
			return c, nil
		}
		if t.leased == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return nil, err
		}
		if !logged {
			logged = true
			logger.Info("the status address is still in use, probably by the previous lease holder that is stopping; waiting for it", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// errTermStarted marks an error of a coordinator that had started
// working (its Run returned), as opposed to one that could not start.
var errTermStarted = errors.New("coordinator stopped")

// transientLedgerError reports whether err (from opening the ledger or
// starting the coordinator) may go away on its own: the database not
// answering yet, or the status address still taken.
func transientLedgerError(err error) bool {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne):
		return true
	case errors.As(err, &pe):
		// Connection exceptions, and a server shutting down or starting.
		return pe.Code[:2] == "08" || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, driver.ErrBadConn)
}
