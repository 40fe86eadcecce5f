package sqlitex

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/agent-bridge/agent-bridge/internal/migration"
)

// SchemaVersion returns the database's schema version (PRAGMA user_version;
// 0 for a new file).
func SchemaVersion(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Migrate brings db to the latest version among the numbered .sql files of
// dir in fsys. Each step runs in its own transaction together with the
// version bump (PRAGMA user_version is transactional), so a crash leaves the
// database at a whole version. A database whose version is newer than the
// newest file is refused with an error wrapping ErrSchemaTooNew. db must be a
// read-write pool from Open (its transactions are BEGIN IMMEDIATE, so two
// processes migrating at once take turns and the second sees the first's
// version).
func Migrate(ctx context.Context, db *sql.DB, fsys fs.FS, dir string) error {
	migs, err := migration.Read(fsys, dir)
	if err != nil {
		return err
	}
	cur, err := SchemaVersion(ctx, db)
	if err != nil {
		return err
	}
	if cur > len(migs) {
		return fmt.Errorf("%w: the database is at schema version %d, this binary knows up to %d; upgrade agent-bridge or restore a backup made by this version", ErrSchemaTooNew, cur, len(migs))
	}
	for _, m := range migs[cur:] {
		if err := migrateOne(ctx, db, m); err != nil {
			return err
		}
	}
	return nil
}

func migrateOne(ctx context.Context, db *sql.DB, m migration.File) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.Name, err)
	}
	defer func() { _ = tx.Rollback() }()
	var cur int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&cur); err != nil {
		return fmt.Errorf("migration %s: read version: %w", m.Name, err)
	}
	if cur >= m.Version {
		// Another process applied it while we waited for the lock.
		return nil
	}
	if cur != m.Version-1 {
		return fmt.Errorf("migration %s: database is at version %d, expected %d", m.Name, cur, m.Version-1)
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	// PRAGMA takes no bound parameters; the version is an integer we parsed.
	if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(m.Version)); err != nil {
		return fmt.Errorf("migration %s: set version: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.Name, err)
	}
	return nil
}
