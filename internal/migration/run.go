package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
)

// ErrSchemaTooNew is wrapped by Run (and so by sqlitex.Migrate and
// pgschema.Migrate) when the database was migrated by a newer agent-bridge
// than this binary: running an old binary on it could misread or damage
// data, so the store refuses to open it.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary")

// Dialect is what Run needs of a database: a transaction that holds
// whatever makes concurrent migrators take turns, and the schema version
// read and written inside it.
type Dialect interface {
	// Begin starts the transaction one step runs in. A second process
	// migrating the same database waits in Begin until the first's
	// transaction ends.
	Begin(ctx context.Context) (*sql.Tx, error)
	// Version reads the schema version inside tx (0 for a new database).
	Version(ctx context.Context, tx *sql.Tx) (int, error)
	// SetVersion records v inside tx.
	SetVersion(ctx context.Context, tx *sql.Tx, v int) error
}

// Run brings the database behind d to the latest version among the
// numbered .sql files of dir in fsys. Each step runs in its own transaction
// together with its version bump, so a crash leaves the database at a whole
// version, and a process that waited for another's step reads the new
// version and goes on from there. A database whose version is newer than
// the newest file is refused with an error wrapping ErrSchemaTooNew.
func Run(ctx context.Context, d Dialect, fsys fs.FS, dir string) error {
	migs, err := Read(fsys, dir)
	if err != nil {
		return err
	}
	for {
		done, err := step(ctx, d, migs)
		if err != nil || done {
			return err
		}
	}
}

// step applies the one migration after the database's version, and reports
// whether there was none left to apply.
func step(ctx context.Context, d Dialect, migs []File) (bool, error) {
	tx, err := d.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	cur, err := d.Version(ctx, tx)
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	if cur > len(migs) {
		return false, fmt.Errorf("%w: the database is at schema version %d, this binary knows up to %d; upgrade agent-bridge or restore a backup made by this version", ErrSchemaTooNew, cur, len(migs))
	}
	if cur == len(migs) {
		return true, nil
	}
	m := migs[cur]
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if err := d.SetVersion(ctx, tx, m.Version); err != nil {
		return false, fmt.Errorf("migration %s: set version: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %s: commit: %w", m.Name, err)
	}
	return false, nil
}
