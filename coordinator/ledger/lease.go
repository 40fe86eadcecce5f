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

// LeaseRetake is how long a holder whose lock connection ended (a
// database restart) keeps working while it tries to take its lock again.
// Its runs go on meanwhile: nobody else can take the lock while the
// database is down. Past it, another process of the same id that reaches
// the database may hold the lock, so the holder stops.
const LeaseRetake = 30 * time.Second

// leaseKey is the advisory lock that is the lease of coordinator id: one
// per coordinator id, so coordinators with different ids on one ledger
// all work at once, and a second process with the same id (a restart that
// overlaps, or the same config started twice) stands by.
func leaseKey(id string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("agent-bridge coordinator lease\x00" + id))
	return int64(h.Sum64())
}

// Lease is one coordinator id's right to work on a PostgreSQL ledger that
// several coordinators share: a session-level advisory lock, keyed by the
// id, held on a connection of its own. It ends when the holder releases
// it, or when its connection ends, which is what happens when the
// holder's process dies.
type Lease struct {
	db   *sql.DB
	key  int64
	log  *slog.Logger
	conn *sql.Conn // the lock's; only watch changes it while it runs

	lost     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
}

// AcquireLease blocks until this process holds coordinator id's lease on
// the ledger at url (a postgres:// URL), trying every LeasePoll, or until
// ctx ends. It logs once that it is waiting as a standby.
func AcquireLease(ctx context.Context, url, id string, logger *slog.Logger) (*Lease, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	// A connection given back is closed, never kept idle: one that still
	// held the lock would hold it where nobody watches.
	db.SetMaxIdleConns(0)
	waiting, unreachable := false, false
	for {
		l, err := tryLease(ctx, db, leaseKey(id), logger)
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
				logger.Info("lease taken: this coordinator now works", "coordinator_id", id)
			}
			return l, nil
		}
		if !waiting && err == nil {
			waiting = true
			logger.Info("standby: another process of this coordinator id holds its lease on the state database; waiting to take over", "coordinator_id", id)
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
func tryLease(ctx context.Context, db *sql.DB, key int64, logger *slog.Logger) (*Lease, error) {
	conn, got, err := lockOn(ctx, db, key)
	if err != nil || !got {
		return nil, err
	}
	l := &Lease{db: db, key: key, log: logger, conn: conn, lost: make(chan struct{}), stop: make(chan struct{}), stopped: make(chan struct{})}
	go l.watch()
	return l, nil
}

// lockOn takes the advisory lock key on a new connection of db, which it
// returns when it got the lock.
func lockOn(ctx context.Context, db *sql.DB, key int64) (*sql.Conn, bool, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, false, err
	}
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil {
		_ = conn.Close()
		return nil, false, err
	}
	if !got {
		_ = conn.Close()
		return nil, false, nil
	}
	return conn, true, nil
}

// watch checks every LeasePoll that the lock's connection is alive. When
// it is not, PostgreSQL ended the session and its lock: watch takes the
// lock again (retake), and closes Lost when it cannot, since another
// process of the same coordinator id may then work.
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
		if err == nil {
			continue
		}
		_ = l.conn.Close()
		l.conn = nil
		if !l.retake(err) {
			close(l.lost)
			return
		}
	}
}

// retake takes the lock again after its session ended (cause), trying
// every LeasePoll for up to LeaseRetake. It reports false when another
// process holds the lock, when the database stayed unreachable that long,
// or when the lease is released meanwhile.
func (l *Lease) retake(cause error) bool {
	l.log.Warn("lease: its connection to the state database ended; taking the lease again", "err", cause)
	deadline := time.Now().Add(LeaseRetake)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), LeasePoll)
		conn, got, err := lockOn(ctx, l.db, l.key)
		cancel()
		switch {
		case err == nil && got:
			l.conn = conn
			l.log.Info("lease: taken again; this coordinator works on")
			return true
		case err == nil:
			l.log.Warn("lease: another process of this coordinator id took the lease")
			return false
		case time.Now().After(deadline):
			l.log.Warn("lease: the state database stayed unreachable", "for", LeaseRetake.String(), "err", err)
			return false
		}
		select {
		case <-l.stop:
			return false
		case <-time.After(LeasePoll):
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
	var err error
	if l.conn != nil {
		err = l.conn.Close()
	}
	return errors.Join(err, l.db.Close())
}
