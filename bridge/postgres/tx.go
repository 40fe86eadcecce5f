package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agent-bridge/agent-bridge/internal/pgschema"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// Serialization failures and deadlocks are retried inside the store, so
// that no request fails for them (contract 8.3). Every transaction takes
// its locks in one order (threads, then claims, then receipts:
// docs/storage.md, "Lock order"), so a deadlock needs a path that breaks
// it; the retry is what keeps a request whole should one remain.

// txAttempts bounds the tries of one transaction; each retry waits a
// little longer (txBackoff, doubled, with jitter), so two transactions
// that collided do not collide again in step.
const (
	txAttempts = 5
	txBackoff  = 2 * time.Millisecond
)

// retryable reports whether err is PostgreSQL ending a transaction that
// may succeed when run again: a serialization failure (40001) or a
// deadlock (40P01). Nothing the transaction did is kept.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// inTx runs fn in a transaction that commits when fn returns nil, and runs
// it again, from the start, when PostgreSQL ends it with a serialization
// failure or a deadlock. fn must keep its results in variables it sets
// afresh on each run.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.retry(ctx, "transaction", func() error { return pgx.BeginFunc(ctx, s.pool, fn) })
}

// retry runs attempt until it ends with anything but a retryable error,
// at most txAttempts times; what names the work in the log.
func (s *Store) retry(ctx context.Context, what string, attempt func() error) error {
	wait := txBackoff
	for n := 1; ; n++ {
		err := attempt()
		if err == nil || !retryable(err) || n == txAttempts {
			return err
		}
		s.Log.Info("PostgreSQL ended a "+what+" to break a conflict; running it again", "attempt", n+1, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait/2 + rand.N(wait)):
		}
		wait *= 2
	}
}

// writeTx is the engine's write transaction (storecore.WriteFunc): inTx.
func (s *Store) writeTx(ctx context.Context, fn func(ctx context.Context, c storecore.Conn) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return fn(ctx, pgConn{tx}) })
}

// pgConn is a storecore.Conn over the pool or a transaction: the engine's
// queries, rebound to $1, $2 ….
type pgConn struct {
	q interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
}

func (c pgConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.q.Exec(ctx, pgschema.Rebind(query), args...)
	return tag.RowsAffected(), err
}

func (c pgConn) Query(ctx context.Context, query string, args ...any) (storecore.RowSet, error) {
	return c.q.Query(ctx, pgschema.Rebind(query), args...)
}

func (c pgConn) QueryRow(ctx context.Context, query string, args ...any) storecore.Row {
	return c.q.QueryRow(ctx, pgschema.Rebind(query), args...)
}
