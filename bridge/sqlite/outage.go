package sqlite

import (
	"errors"
	"fmt"
	"os"

	"github.com/mattn/go-sqlite3"
)

// unreachable reports whether err means the database file cannot be used
// right now, which the bridge answers with 503 unavailable (contract 6.3;
// docs/storage.md, "When the database is unreachable"): another process
// holds its lock past the busy timeout (SQLITE_BUSY, SQLITE_LOCKED), the
// disk fails or is full (SQLITE_IOERR, SQLITE_FULL), the file cannot be
// opened or was made read-only (SQLITE_CANTOPEN, SQLITE_READONLY,
// SQLITE_PERM), or it was removed or replaced under the open store
// (ErrFileGone, which lasts until a restart). A malformed database
// (SQLITE_CORRUPT, SQLITE_NOTADB) is no outage: waiting does not mend
// it, so it stays an internal error with an ERROR log line per request.
func unreachable(err error) bool {
	if errors.Is(err, ErrFileGone) {
		return true
	}
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked, sqlite3.ErrIoErr, sqlite3.ErrFull,
		sqlite3.ErrCantOpen, sqlite3.ErrReadonly, sqlite3.ErrPerm:
		return true
	}
	return false
}

// ErrFileGone is a commit refused because the database file was removed
// or replaced since the store opened it. SQLite itself goes on writing to
// the open, unlinked file, and every append it acknowledged would be gone
// at the next start; the store refuses instead, until it is restarted on
// the file that is there now.
var ErrFileGone = errors.New("the database file was removed or replaced since the store opened it; restart the bridge")

// checkFile reports ErrFileGone when the store's path no longer names the
// file it opened. The writer calls it in every commit (one stat).
func (s *Store) checkFile() error {
	fi, err := os.Stat(s.path)
	if err != nil || !os.SameFile(fi, s.file) {
		return fmt.Errorf("%w: %s", ErrFileGone, s.path)
	}
	return nil
}
