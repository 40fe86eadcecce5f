// Package pgschema versions a PostgreSQL schema from numbered .sql files
// with migration.Run, as internal/sqlitex does for SQLite: files
// NNNN_name.sql bring the database to version NNNN, each in one
// transaction with the version bump.
// Several processes may start at once against one database: a transaction
// advisory lock makes them take turns, and the later ones find the work
// done.
package pgschema

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"io/fs"
	"strconv"
	"strings"

	"github.com/agent-bridge/agent-bridge/internal/migration"
)

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
// dir in fsys with migration.Run, recording it in the one-row table named
// table (created if missing). A database at a newer version is refused with
// an error wrapping migration.ErrSchemaTooNew.
func Migrate(ctx context.Context, db *sql.DB, fsys fs.FS, dir, table string) error {
	h := fnv.New64a()
	_, _ = h.Write([]byte("agent-bridge schema " + table))
	return migration.Run(ctx, dialect{db: db, table: table, lockKey: int64(h.Sum64())}, fsys, dir)
}

// dialect is PostgreSQL's migration.Dialect: the version lives in a one-row
// table, and a transaction advisory lock on a key derived from the table's
// name makes migrators take turns.
type dialect struct {
	db      *sql.DB
	table   string
	lockKey int64
}

// Begin takes the lock, held until the transaction ends, and makes sure
// the version table and its row exist.
func (d dialect) Begin(ctx context.Context) (*sql.Tx, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if err := d.prepare(ctx, tx); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return tx, nil
}

func (d dialect) prepare(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, d.lockKey); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+quote(d.table)+` (
		one boolean PRIMARY KEY DEFAULT true CHECK (one), version integer NOT NULL)`); err != nil {
		return fmt.Errorf("create %s: %w", d.table, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+quote(d.table)+` (version) VALUES (0) ON CONFLICT DO NOTHING`); err != nil {
		return fmt.Errorf("init %s: %w", d.table, err)
	}
	return nil
}

func (d dialect) Version(ctx context.Context, tx *sql.Tx) (int, error) {
	var v int
	if err := tx.QueryRowContext(ctx, `SELECT version FROM `+quote(d.table)).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

func (d dialect) SetVersion(ctx context.Context, tx *sql.Tx, v int) error {
	_, err := tx.ExecContext(ctx, `UPDATE `+quote(d.table)+` SET version = $1`, v)
	return err
}

func quote(ident string) string { return `"` + ident + `"` }

// Rebind turns ? placeholders into $1, $2 …, leaving ? inside quoted
// strings and identifiers alone: queries written once for SQLite and
// PostgreSQL (the coordinator's ledger, the bridge's store engine) run on
// PostgreSQL through it.
func Rebind(query string) string {
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
