package storecore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// The engine is the one bridge store over two dialects: the rules, the
// order of the writes and the reads are written once, here, with ?
// placeholders in the SQL both databases share; each driver gives it a
// Conn for reads, a write transaction (SQLite's runs in its writer's group
// commit, PostgreSQL's is run again on a serialization failure) and what
// differs between the dialects (Dialect). A driver's Store embeds the
// Engine, so the methods below are the store's own; each driver keeps only
// its SQL of what only it does: its append path and batching, SQLite's
// single writer, PostgreSQL's LISTEN/NOTIFY.

// Conn is a connection or a transaction of either driver, its queries
// written with ? placeholders (the PostgreSQL driver rebinds them).
type Conn interface {
	// Exec runs query and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs query; the caller closes the rows.
	Query(ctx context.Context, query string, args ...any) (RowSet, error)
	// QueryRow runs a query of at most one row.
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// RowSet is the rows of a Query, which the caller closes.
type RowSet interface {
	Rows
	Close()
}

// WriteFunc runs fn in one write transaction of the driver, with the
// transaction's own ctx (SQLite's writer runs it in a group commit that no
// caller's cancellation may abort). An *agentbridge.Error fn returns is a
// refusal: the caller's answer, and on SQLite the group commit goes on, so
// fn decides every refusal before it writes anything.
type WriteFunc func(ctx context.Context, fn func(ctx context.Context, c Conn) error) error

// Dialect is what the engine's SQL says differently on each database.
type Dialect struct {
	// PG is set on PostgreSQL: it locks what it counts (several bridges
	// may write at once), where SQLite's one writer takes turns already.
	PG bool
	// NowMillis is the database's clock in milliseconds since the epoch:
	// every bridge on a database reads the same clock.
	NowMillis string
	// ForUpdate ends a SELECT whose rows a write transaction locks until
	// COMMIT (PostgreSQL; SQLite's writer holds the whole database).
	ForUpdate string
	// CollateC makes text compare byte by byte (PostgreSQL's default
	// collation may not; SQLite's does).
	CollateC string
	// ThreadTable is where a thread's row and head are read.
	ThreadTable string
}

// SQLite and PostgreSQL are the two dialects.
var (
	SQLite     = Dialect{NowMillis: `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`, ThreadTable: `thread_heads`}
	PostgreSQL = Dialect{PG: true, NowMillis: `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`,
		ForUpdate: ` FOR UPDATE`, CollateC: ` COLLATE "C"`, ThreadTable: `threads`}
)

// Engine is the store both drivers share. Its zero value is not usable;
// a driver's Open sets every field.
type Engine struct {
	Dialect
	// Read reads what is committed (SQLite's read-only pool, PostgreSQL's
	// pool); ReadTx runs fn in a read transaction, one snapshot of the
	// log; Reads are the driver's read queries (read.go).
	Read   Conn
	ReadTx func(ctx context.Context, fn func(ctx context.Context, c Conn) error) error
	Reads  *ReadSQL
	// Write runs a write transaction.
	Write WriteFunc
	// ClaimWrite runs a claim write's transaction (claimsql.go).
	ClaimWrite func(ctx context.Context, fn func(ctx context.Context, t ClaimWriteTx) error) error
	// Outage turns an unreachable database into the unavailable error.
	Outage *Outage
	Humans agentbridge.Humans
	Log    *slog.Logger
	// Recent holds the latest committed events for the streams (SQLite's;
	// nil on PostgreSQL, whose other bridges' commits it would miss).
	Recent *Tail

	// The group commits' counts since Open (Stats); only the writer
	// goroutine adds to them.
	appends, replayed, rejected, batches, maxBatch atomic.Uint64

	// claimStates decodes the state a claim's trigger check reads
	// (ClaimEvent) once per snapshot.
	claimStates StateCache
	// suggestMu guards lastSuggestion, the time of the last suggestion
	// stored, so that their timestamps strictly increase.
	suggestMu      sync.Mutex
	lastSuggestion time.Time
}

// Guard is deferred by every store method a client calls: it turns an
// unusable database into the unavailable error and tracks the outage.
func (e *Engine) Guard(started time.Time, err *error) { *err = e.Outage.Check(started, *err) }

// GuardWrite is Guard for the methods that write: their refusals make GET
// /healthz answer 503 until a write succeeds.
func (e *Engine) GuardWrite(started time.Time, err *error) {
	*err = e.Outage.CheckWrite(started, *err)
}

// WritesRefused returns why the store refuses writes, while it does.
func (e *Engine) WritesRefused() (string, bool) { return e.Outage.WritesRefused() }

// Tail returns the latest committed events, which the streams read
// instead of the database when it holds what they wait for (nil: none).
func (e *Engine) Tail() *Tail { return e.Recent }

// Stats returns the store's counters since Open; the bridge exports them
// on /metrics (agentbridge.StatsStore).
func (e *Engine) Stats() agentbridge.StoreStats {
	return agentbridge.StoreStats{
		Appends: e.appends.Load(), Replayed: e.replayed.Load(), Rejected: e.rejected.Load(),
		Batches: e.batches.Load(), MaxBatchSeen: e.maxBatch.Load(),
	}
}

// CountCommit records a group commit of n requests: committed new events
// and replayed and rejected appends. Only the writer goroutine calls it.
func (e *Engine) CountCommit(n int, committed, replayed, rejected uint64) {
	e.appends.Add(committed)
	e.replayed.Add(replayed)
	e.rejected.Add(rejected)
	e.batches.Add(1)
	if n := uint64(n); n > e.maxBatch.Load() {
		e.maxBatch.Store(n)
	}
}

// Thread returns one thread, or thread_not_found.
func (e *Engine) Thread(ctx context.Context, id string) (_ agentbridge.Thread, err error) {
	defer e.Guard(time.Now(), &err)
	return LookupThread(e.Read.QueryRow(ctx, `SELECT `+ThreadColumns+` FROM `+e.ThreadTable+` WHERE id = ?`, id), id)
}

// lock takes, on PostgreSQL, a transaction lock named key, held until
// COMMIT: two bridges that count and then insert take turns under it.
// SQLite's one writer takes turns already.
func (e *Engine) lock(ctx context.Context, c Conn, key string) error {
	if !e.PG {
		return nil
	}
	if _, err := c.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(?, 0))`, key); err != nil {
		return fmt.Errorf("lock %s: %w", key, err)
	}
	return nil
}

// text is a text value as the dialect stores it: bytes on PostgreSQL,
// whose columns of any UTF-8 a client sent are bytea (a NUL included).
func (e *Engine) text(s string) any {
	if e.PG {
		return []byte(s)
	}
	return s
}

// List runs query on c and scans each row with scan; what names the rows
// in errors. The result is never nil.
func List[T any](ctx context.Context, c Conn, what string, scan func(Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := c.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	defer rows.Close()
	return Collect(rows, what, scan)
}

// Refusal is err when it is a refusal (an *agentbridge.Error), else nil.
func Refusal(err error) error {
	var ae *agentbridge.Error
	if errors.As(err, &ae) {
		return err
	}
	return nil
}

// SQLConn is a Conn over database/sql (a pool, a connection or a
// transaction): SQLite's.
func SQLConn(q interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) Conn {
	return sqlConn{q}
}

type sqlConn struct {
	q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
}

func (c sqlConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c sqlConn) Query(ctx context.Context, query string, args ...any) (RowSet, error) {
	rows, err := c.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (c sqlConn) QueryRow(ctx context.Context, query string, args ...any) Row {
	return c.q.QueryRowContext(ctx, query, args...)
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }
