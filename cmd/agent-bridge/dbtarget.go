package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for doctor

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/bridge/postgres"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
)

// closingStore is a bridge store the command owns and closes.
type closingStore interface {
	bridge.Store
	Close() error
}

// isPostgres reports whether a --db or --state value names a PostgreSQL
// database. Any other scheme:// is a usage error naming the supported ones:
// such a value once silently became a SQLite file named after the scheme.
func isPostgres(flag, value string) (bool, error) {
	if postgres.IsURL(value) {
		return true, nil
	}
	if scheme, _, ok := strings.Cut(value, "://"); ok && scheme != "" && !strings.ContainsAny(scheme, `/\`) {
		return false, usagef("--%s: the scheme %q is not supported; use a SQLite file path or a postgres:// (or postgresql://) URL", flag, scheme+"://")
	}
	return false, nil
}

// openEventStore opens the bridge's store named by --db: PostgreSQL for a
// postgres:// URL, else a SQLite file.
func openEventStore(ctx context.Context, db string, humans agentbridge.Humans, logger *slog.Logger) (closingStore, error) {
	pg, err := isPostgres("db", db)
	if err != nil {
		return nil, err
	}
	if pg {
		s, err := postgres.Open(ctx, db, postgres.Options{Humans: humans, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", maskURL(db), err)
		}
		return s, nil
	}
	if err := checkWritableFolder(db); err != nil {
		return nil, err
	}
	s, err := sqlite.Open(ctx, db, sqlite.Options{Humans: humans, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", db, err)
	}
	return s, nil
}

// checkWritableFolder makes the folder of a SQLite file and checks that
// it can be written, so that a bad --db is named as such rather than as
// SQLite's "unable to open database file".
func checkWritableFolder(path string) error {
	dir := filepath.Dir(path)
	if err := sqlitex.MakeFolder(dir); err != nil {
		return usagef("--db: cannot create the folder for %s: %v; choose another path (--db or BRIDGE_DB)", path, err)
	}
	f, err := os.CreateTemp(dir, ".agent-bridge-write-check-*")
	if err != nil {
		return usagef("--db: cannot write in %s: %v; choose a folder you can write (--db or BRIDGE_DB)", dir, err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// pgDumpAdvice is the sentence backup and restore give for a PostgreSQL
// target.
const pgDumpAdvice = "the bridge database is PostgreSQL: back it up with pg_dump and restore it with pg_restore (agent-bridge backup/restore handle SQLite files only)"

// checkPostgres is doctor's check of a PostgreSQL target: reachable, the
// server's version, and the schema version against this binary's.
func checkPostgres(ctx context.Context, name, url string, versions func(context.Context, *sql.DB) (int, int, error)) checkResult {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	shown := maskURL(url)
	db, err := sql.Open("pgx", url)
	if err != nil {
		return checkResult{Name: name, Status: checkFail, Detail: fmt.Sprintf("%s: %v", shown, err), Fix: "check the URL"}
	}
	defer func() { _ = db.Close() }()
	var server string
	if err := db.QueryRowContext(ctx, "SHOW server_version").Scan(&server); err != nil {
		return checkResult{Name: name, Status: checkFail, Detail: fmt.Sprintf("%s unreachable: %v", shown, err),
			Fix: "start PostgreSQL or fix host, port, user, password and database in the URL"}
	}
	have, want, err := versions(ctx, db)
	if err != nil {
		return checkResult{Name: name, Status: checkFail, Detail: fmt.Sprintf("%s (PostgreSQL %s): %v", shown, server, err)}
	}
	detail := fmt.Sprintf("%s: PostgreSQL %s, schema version %d of %d", shown, server, have, want)
	switch {
	case have > want:
		return checkResult{Name: name, Status: checkFail, Detail: detail + " (written by a newer agent-bridge)", Fix: "upgrade agent-bridge"}
	case have < want:
		return checkResult{Name: name, Status: checkWarn, Detail: detail + " (the daemon migrates it on start)"}
	}
	return checkResult{Name: name, Status: checkOK, Detail: detail}
}

// ledgerVersions is the coordinator ledger's schema check for doctor
// (runDoctor's --state flag shadows the package name).
func ledgerVersions(ctx context.Context, db *sql.DB) (int, int, error) {
	return ledger.SchemaVersions(ctx, db)
}
