package sqlitex

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/agent-bridge/agent-bridge/internal/migration"
)

// rowQuerier reads one row: a pool (*sql.DB) or a transaction (*sql.Tx).
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// SchemaVersion returns the database's schema version (PRAGMA user_version;
// 0 for a new file), read through a pool or in a transaction.
func SchemaVersion(ctx context.Context, db rowQuerier) (int, error) {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Migrate brings db to the latest version among the numbered .sql files of
// dir in fsys with migration.Run, the version in PRAGMA user_version (which
// is transactional, so a step and its version bump commit together). A
// database whose version is newer than the newest file is refused with an
// error wrapping migration.ErrSchemaTooNew. db must be a read-write pool
// from Open (its transactions are BEGIN IMMEDIATE, so two processes
// migrating at once take turns and the second sees the first's version).
func Migrate(ctx context.Context, db *sql.DB, fsys fs.FS, dir string) error {
	return migration.Run(ctx, dialect{db}, fsys, dir)
}

// dialect is SQLite's migration.Dialect.
type dialect struct{ db *sql.DB }

func (d dialect) Begin(ctx context.Context) (*sql.Tx, error) { return d.db.BeginTx(ctx, nil) }

func (dialect) Version(ctx context.Context, tx *sql.Tx) (int, error) { return SchemaVersion(ctx, tx) }

func (dialect) SetVersion(ctx context.Context, tx *sql.Tx, v int) error {
	// PRAGMA takes no bound parameters; v is an integer.
	_, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(v))
	return err
}
