// Package pgschema versions a PostgreSQL schema from numbered .sql files,
// as internal/sqlitex does for SQLite: files NNNN_name.sql bring the
// database to version NNNN, each in one transaction with the version bump.
// Several processes may start at once against one database: a transaction
// advisory lock makes them take turns, and the later ones find the work
// done.
package pgschema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"

	"github.com/agent-bridge/agent-bridge/internal/migration"
)

// ErrSchemaTooNew is wrapped by Migrate when the database was migrated by
// a newer binary than this one.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary")

// Latest returns the version the files of dir bring a database to.
func Latest(fsys fs.FS, dir string) (int, error) {
	migs, err := migration.Read(fsys, dir)
	return len(migs), err
}

// Version returns the schema version recorded in table (0 when the table
// does not exist yet).
func Version(ctx context.Context, db *sql.DB, table string) (int, error) {
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := db.QueryRowContext(ctx, `SELECT version FROM `+quote(table)).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Migrate brings db to the latest version among the numbered .sql files of
// dir in fsys, recording it in the one-row table named table (created if
// missing). A database at a newer version is refused with an error wrapping
// ErrSchemaTooNew.
func Migrate(ctx context.Context, db *sql.DB, fsys fs.FS, dir, table string) error {
	migs, err := migration.Read(fsys, dir)
	if err != nil {
		return err
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte("agent-bridge schema " + table))
	lockKey := int64(h.Sum64())

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// Held until this transaction ends: a second process waits here and
	// then finds the schema current.
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+quote(table)+` (
		one boolean PRIMARY KEY DEFAULT true CHECK (one), version integer NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: create %s: %w", table, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+quote(table)+` (version) VALUES (0) ON CONFLICT DO NOTHING`); err != nil {
		return fmt.Errorf("migrate: init %s: %w", table, err)
	}
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT version FROM `+quote(table)).Scan(&cur); err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	if cur > len(migs) {
		return fmt.Errorf("%w: the database is at schema version %d, this binary knows up to %d; upgrade agent-bridge", ErrSchemaTooNew, cur, len(migs))
	}
	// All pending steps in the one transaction: PostgreSQL's DDL is
	// transactional, so a crash leaves the database at the old version.
	for _, m := range migs[cur:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+quote(table)+` SET version = $1`, len(migs)); err != nil {
		return fmt.Errorf("migrate: set version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

func quote(ident string) string { return `"` + ident + `"` }
