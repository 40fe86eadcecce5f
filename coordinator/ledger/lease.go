package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"
)

// LeasePoll is how often a standby coordinator tries to take the lease,
// and how often the holder checks that it still has it. A holder killed
// with -9 loses its connection, and PostgreSQL its session lock, at once,
// so a standby takes over within about one poll.
const LeasePoll = time.Second

// leaseKey is the advisory lock that is the lease: one per database, so
// the coordinators sharing a ledger share one lease.
var leaseKey = func() int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("agent-bridge coordinator lease"))
	return int64(h.Sum64())
}()

// Lease is the right to work on a PostgreSQL ledger that several
// coordinators share: a session-level advisory lock held on a connection
// of its own. It ends when the holder releases it, or when its connection
// ends, which is what happens when the holder's process dies.
type Lease struct {
	db       *sql.DB
	conn     *sql.Conn
	lost     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
}

// AcquireLease blocks until this process holds the lease on the ledger at
// url (a postgres:// URL), trying every LeasePoll, or until ctx ends. It
// logs once that it is waiting as a standby.
func AcquireLease(ctx context.Context, url string, logger *slog.Logger) (*Lease, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	waiting, unreachable := false, false
	for {
		l, err := tryLease(ctx, db)
		switch {
		case err != nil && !unreachable:
			// Once per outage, not once a poll.
			unreachable = true
			logger.Warn("lease: cannot reach the state database; retrying every second", "err", err)
		case err != nil:
			logger.Debug("lease: state database still unreachable", "err", err)
		case unreachable:
			unreachable = false
			logger.Info("lease: the state database answers again")
		}
		if l != nil {
			if waiting {
				logger.Info("lease taken: this coordinator now works")
			}
			return l, nil
		}
		if !waiting && err == nil {
			waiting = true
			logger.Info("standby: another coordinator holds the lease; waiting to take over")
		}
		select {
		case <-ctx.Done():
			_ = db.Close()
			return nil, ctx.Err()
		case <-time.After(LeasePoll):
		}
	}
}

// tryLease takes the lock if it is free; (nil, nil) when another holds it.
func tryLease(ctx context.Context, db *sql.DB) (*Lease, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, leaseKey).Scan(&got); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if !got {
		_ = conn.Close()
		return nil, nil
	}
	l := &Lease{db: db, conn: conn, lost: make(chan struct{}), stop: make(chan struct{}), stopped: make(chan struct{})}
	go l.watch()
	return l, nil
}

// watch checks every LeasePoll that the lock's connection is alive; when
// it is not, the lock is gone (PostgreSQL ended the session) and another
// coordinator may already work, so Lost is closed.
func (l *Lease) watch() {
	defer close(l.stopped)
	for {
		select {
		case <-l.stop:
			return
		case <-time.After(LeasePoll):
		}
		ctx, cancel := context.WithTimeout(context.Background(), LeasePoll)
		// A session lock lasts as long as its session: the connection
		// answering is the lock still held.
		var one int
		err := l.conn.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
		cancel()
		if err != nil {
			close(l.lost)
			return
		}
	}
}

// Lost is closed when the lease is gone: the holder must stop working.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release gives the lease up (closing its connection ends the session's
// lock) for a standby to take.
func (l *Lease) Release() error {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.stopped
	return errors.Join(l.conn.Close(), l.db.Close())
}
