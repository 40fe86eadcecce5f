// Package sqlitex opens SQLite databases the way both agent-bridge stores
// need them and runs their schema migrations.
//
// Per-connection settings (WAL, busy timeout, foreign keys, synchronous,
// transaction locking) go in the DSN, not in PRAGMA statements: a
// database/sql pool opens connections lazily, and a PRAGMA run once reaches
// only the connection it happened to run on. Open reads journal_mode back and
// refuses a database that is not in WAL mode, because the stores rely on WAL
// to let readers proceed while the writer commits.
package sqlitex

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	// The mattn driver registers itself as "sqlite3".
	_ "github.com/mattn/go-sqlite3"
)

// Options chooses the kind of pool Open returns.
type Options struct {
	// ReadOnly opens the file with mode=ro, so a bug in a reader can never
	// write. The file must already exist (open the writer first).
	ReadOnly bool
	// MaxOpen caps the pool's connections; 0 leaves database/sql's default
	// (unlimited). A store's writer uses 1, so that every write goes through
	// one connection and BEGIN IMMEDIATE never waits on itself.
	MaxOpen int
}

// stmtCacheSize is how many prepared statements each connection keeps
// (mattn's _stmt_cache_size): the stores run a few dozen distinct queries,
// and re-preparing them on every call was a third of an append's CPU.
const stmtCacheSize = 64

// DSN returns the mattn data source name Open uses for path: a file: URI
// with every per-connection pragma as a parameter. Connections open without
// SQLite's per-connection mutex (_mutex=no, SQLITE_OPEN_NOMUTEX):
// database/sql never lets two goroutines use one connection at once, so
// the mutex would only cost every SQLite call a lock and an unlock (~5% of
// an append's writer time). Read-write pools use
// BEGIN IMMEDIATE (_txlock=immediate), so a write transaction takes the
// write lock up front instead of failing with SQLITE_BUSY when it upgrades
// from a read; read-only pools use deferred transactions, since a read-only
// connection cannot take the write lock.
func DSN(path string, o Options) string {
	params := "_journal_mode=WAL&_busy_timeout=5000&_foreign_keys=on&_synchronous=NORMAL&_mutex=no&_stmt_cache_size=" + strconv.Itoa(stmtCacheSize)
	if o.ReadOnly {
		params += "&_txlock=deferred&mode=ro"
	} else {
		params += "&_txlock=immediate"
	}
	return "file:" + escapePath(path) + "?" + params
}

// escapePath percent-encodes the characters that would end the path part of
// a SQLite URI, so a folder named "a?b" or "50%" still opens the right file.
func escapePath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// Open opens the SQLite database at path (creating it unless o.ReadOnly,
// private to its owner: MakePrivate) and checks that it is in WAL mode. The
// caller closes the returned pool.
func Open(path string, o Options) (*sql.DB, error) {
	if !o.ReadOnly {
		if err := MakePrivate(path); err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
	}
	db, err := sql.Open("sqlite3", DSN(path, o))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if o.MaxOpen > 0 {
		db.SetMaxOpenConns(o.MaxOpen)
		db.SetMaxIdleConns(o.MaxOpen)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open sqlite %s: read journal_mode: %w", path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		_ = db.Close()
		return nil, fmt.Errorf("open sqlite %s: journal_mode is %q, want wal (is the file on a filesystem without shared memory?)", path, mode)
	}
	return db, nil
}
