package ledger

import (
	"context"
	"database/sql"
	"strings"

	"github.com/agent-bridge/agent-bridge/internal/pgschema"
)

// IsPostgresURL reports whether a --state value names a PostgreSQL
// database (postgres:// or postgresql://) rather than a SQLite file.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// conn is the ledger's database, SQLite or PostgreSQL, behind the
// database/sql methods the ledger uses. Queries are written once, with ?
// placeholders, in the SQL both dialects share; on PostgreSQL they are
// rebound to $1, $2 … (docs/storage.md, "The coordinator's ledger on
// PostgreSQL", says what else a query must avoid).
type conn struct {
	*sql.DB
	pg bool
	// owner is the coordinator id whose rows this connection reads and
	// writes (see DB).
	owner string
}

// txn is a transaction of a conn, rebinding like it.
type txn struct {
	*sql.Tx
	pg    bool
	owner string
}

// q is query in c's dialect.
func (c *conn) q(query string) string { return inDialect(c.pg, query) }

// ExecContext runs query, its placeholders rebound for the dialect.
func (c *conn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return c.DB.ExecContext(ctx, c.q(query), args...)
}

// QueryContext runs query, its placeholders rebound for the dialect.
func (c *conn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return c.DB.QueryContext(ctx, c.q(query), args...)
}

// QueryRowContext runs query, its placeholders rebound for the dialect.
func (c *conn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return c.DB.QueryRowContext(ctx, c.q(query), args...)
}

// PrepareContext prepares query, its placeholders rebound for the dialect.
func (c *conn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return c.DB.PrepareContext(ctx, c.q(query))
}

// BeginTx starts a transaction that rebinds like c.
func (c *conn) BeginTx(ctx context.Context, opts *sql.TxOptions) (*txn, error) {
	t, err := c.DB.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &txn{Tx: t, pg: c.pg, owner: c.owner}, nil
}

// q is query in t's dialect.
func (t *txn) q(query string) string { return inDialect(t.pg, query) }

// inDialect is query as written (SQLite's ? placeholders), or rebound for
// PostgreSQL when pg.
func inDialect(pg bool, query string) string {
	if !pg {
		return query
	}
	return pgschema.Rebind(query)
}

// ExecContext runs query, its placeholders rebound for the dialect.
func (t *txn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, t.q(query), args...)
}

// QueryContext runs query, its placeholders rebound for the dialect.
func (t *txn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.Tx.QueryContext(ctx, t.q(query), args...)
}

// QueryRowContext runs query, its placeholders rebound for the dialect.
func (t *txn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.Tx.QueryRowContext(ctx, t.q(query), args...)
}

// PrepareContext prepares query, its placeholders rebound for the dialect.
func (t *txn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.Tx.PrepareContext(ctx, t.q(query))
}
