package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/mattn/go-sqlite3"
)

// ErrInUse is returned by Restore when another connection (a running
// server, most likely) has the target database open: replacing the file
// under it would leave the server writing to a deleted file.
var ErrInUse = errors.New("database is in use")

// Backup writes a consistent snapshot of the database at srcPath to dstPath
// with SQLite's online backup API, while a server may be appending to it: the
// copy is taken in one step under a single read transaction, so it holds
// exactly the events committed before that moment (not a torn file copy).
// The snapshot is written to a temporary file next to dstPath, switched out
// of WAL mode so that it is one self-contained file, checked with
// integrity_check, and only then renamed to dstPath (replacing it).
func Backup(ctx context.Context, srcPath, dstPath string) error {
	if _, err := os.Stat(srcPath); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tmp, err := copyToTemp(ctx, srcPath, dstPath)
	if err != nil {
		return fmt.Errorf("backup %s: %w", srcPath, err)
	}
	if err := os.Rename(tmp, dstPath); err != nil {
		removeTemp(tmp)
		return fmt.Errorf("backup: %w", err)
	}
	return syncDir(filepath.Dir(dstPath))
}

// Restore replaces the database at dstPath with the backup at srcPath. It
// refuses (ErrInUse) when dstPath is open elsewhere, which is the case while
// a server runs on it; it verifies the backup's integrity and that it is an
// agent-bridge database before touching dstPath. The previous database, if
// any, is kept beside it as dstPath.pre-restore-<UTC time>, with its WAL
// folded in; stale -wal and -shm files are removed so SQLite cannot replay
// them over the restored file.
func Restore(ctx context.Context, srcPath, dstPath string) error {
	if err := IntegrityCheck(ctx, srcPath); err != nil {
		return fmt.Errorf("restore: the backup cannot be used: %w", err)
	}
	if _, err := CountEvents(ctx, srcPath); err != nil {
		return fmt.Errorf("restore: %s is not an agent-bridge database: %w", srcPath, err)
	}
	exists := true
	if _, err := os.Stat(dstPath); errors.Is(err, os.ErrNotExist) {
		exists = false
	} else if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if exists {
		// Opening and closing the database as its only user also folds a
		// crashed server's WAL into it, so the copy kept aside is complete.
		if err := checkNotInUse(ctx, dstPath); err != nil {
			return fmt.Errorf("restore to %s: %w", dstPath, err)
		}
	} else if err := sqlitex.MakeFolder(filepath.Dir(dstPath)); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	tmp, err := copyToTemp(ctx, srcPath, dstPath)
	if err != nil {
		return fmt.Errorf("restore from %s: %w", srcPath, err)
	}
	if err := newEpoch(ctx, tmp); err != nil {
		removeTemp(tmp)
		return fmt.Errorf("restore from %s: %w", srcPath, err)
	}
	if exists {
		aside := dstPath + ".pre-restore-" + time.Now().UTC().Format("20060102T150405.000000Z")
		if err := os.Rename(dstPath, aside); err != nil {
			removeTemp(tmp)
			return fmt.Errorf("restore: keep the previous database: %w", err)
		}
		// A -wal left beside the old file belongs to it: keep it with it.
		if err := os.Rename(dstPath+"-wal", aside+"-wal"); err != nil && !errors.Is(err, os.ErrNotExist) {
			removeTemp(tmp)
			return fmt.Errorf("restore: keep the previous database's WAL: %w", err)
		}
		// The copy kept aside holds what the database held: a file an
		// older release made 0644 is made private here.
		if err := sqlitex.KeepPrivate(aside, aside+"-wal"); err != nil {
			removeTemp(tmp)
			return fmt.Errorf("restore: %w", err)
		}
	}
	if err := os.Remove(dstPath + "-shm"); err != nil && !errors.Is(err, os.ErrNotExist) {
		removeTemp(tmp)
		return fmt.Errorf("restore: remove the stale shared-memory file: %w", err)
	}
	if err := os.Rename(tmp, dstPath); err != nil {
		removeTemp(tmp)
		return fmt.Errorf("restore: %w", err)
	}
	return syncDir(filepath.Dir(dstPath))
}

// newEpoch starts a new epoch of the log in the restored copy at path, based
// at its last event, so that a coordinator whose cursor went past that point
// in the old log knows to go back to it. A backup older than the log_epoch
// table gets one when the server opens it, by the migration, with the same
// base.
func newEpoch(ctx context.Context, path string) error {
	db, err := openRaw(path, false)
	if err != nil {
		return err
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'log_epoch'`).Scan(&n); err != nil {
		return fmt.Errorf("start a new epoch: %w", err)
	}
	if n == 0 {
		return nil
	}
	if _, err := db.ExecContext(ctx, `UPDATE log_epoch SET id = abs(random() % 9007199254740991) + 1,
		base = (SELECT coalesce(max(gseq), 0) FROM events)`); err != nil {
		return fmt.Errorf("start a new epoch: %w", err)
	}
	return db.Close()
}

// IntegrityCheck runs PRAGMA integrity_check on the database at path,
// read-only, and returns an error listing the problems it reports (or
// saying the file is not a database).
func IntegrityCheck(ctx context.Context, path string) error {
	db, err := openRaw(path, true)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return fmt.Errorf("integrity check of %s: %w", path, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("integrity check of %s: %w", path, err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("integrity check of %s: %w", path, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity check of %s failed: %s", path, strings.Join(problems, "; "))
	}
	return nil
}

// CountEvents returns the number of events stored in the database at path,
// read-only: how backup and restore tell a person what a file holds.
func CountEvents(ctx context.Context, path string) (int64, error) {
	db, err := openRaw(path, true)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n); err != nil {
		return 0, fmt.Errorf("count events in %s: %w", path, err)
	}
	return n, nil
}

// openRaw opens path without the store's pragmas (a backup is not in WAL
// mode, and must not be switched to it by a read). A read-only open of a
// missing file fails instead of creating it.
func openRaw(path string, readOnly bool) (*sql.DB, error) {
	if readOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
	}
	dsn := "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path) + "?_busy_timeout=5000"
	if readOnly {
		dsn += "&mode=ro"
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// copyToTemp snapshots srcPath into a new temporary file beside dstPath,
// turns it into a single rollback-journal file and checks its integrity. It
// returns the temporary file's path; the caller renames or removes it.
//
// It first removes what a backup or restore to dstPath that was killed (kill
// -9, a power cut) left beside it: its temporary file and that file's
// journal.
func copyToTemp(ctx context.Context, srcPath, dstPath string) (path string, err error) {
	if err := removeLeftovers(dstPath); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(dstPath), filepath.Base(dstPath)+tempInfix+"*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	if err := f.Close(); err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			removeTemp(tmp)
		}
	}()
	if err := onlineCopy(ctx, srcPath, tmp); err != nil {
		return "", err
	}
	if err := IntegrityCheck(ctx, tmp); err != nil {
		return "", fmt.Errorf("the copy is damaged: %w", err)
	}
	return tmp, nil
}

// tempInfix is what names a temporary copy beside its destination:
// <destination>.tmp-<random digits>, with SQLite's -journal, -wal and -shm
// beside it while it is written.
const tempInfix = ".tmp-"

// removeTemp removes a temporary copy and SQLite's files beside it.
func removeTemp(tmp string) {
	for _, p := range []string{tmp, tmp + "-journal", tmp + "-wal", tmp + "-shm"} {
		_ = os.Remove(p)
	}
}

// removeLeftovers removes the temporary copies, and their SQLite files,
// that an earlier backup or restore to dstPath left when it was killed.
// A backup to the same destination running at the same moment would lose
// its copy and fail (rename finds nothing), never leave a torn file.
func removeLeftovers(dstPath string) error {
	dir, base := filepath.Dir(dstPath), filepath.Base(dstPath)+tempInfix
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look for an earlier run's temporary files: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, base)
		if !ok || e.IsDir() {
			continue
		}
		for _, suffix := range []string{"-journal", "-wal", "-shm"} {
			rest = strings.TrimSuffix(rest, suffix)
		}
		if rest == "" || strings.Trim(rest, "0123456789") != "" {
			continue // not a name os.CreateTemp made
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove an earlier run's temporary file: %w", err)
		}
	}
	return nil
}

// onlineCopy runs the backup API from srcPath into the (empty) file dstPath.
func onlineCopy(ctx context.Context, srcPath, dstPath string) error {
	src, err := openRaw(srcPath, true)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openRaw(dstPath, false)
	if err != nil {
		return err
	}
	defer dst.Close()
	sc, err := src.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open %s: %w", srcPath, err)
	}
	defer sc.Close()
	dc, err := dst.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open %s: %w", dstPath, err)
	}
	defer dc.Close()
	err = dc.Raw(func(d any) error {
		return sc.Raw(func(s any) error {
			return step(ctx, d.(*sqlite3.SQLiteConn), s.(*sqlite3.SQLiteConn))
		})
	})
	if err != nil {
		return fmt.Errorf("online backup: %w", err)
	}
	// The pages copied include the source's WAL flag; a backup file must
	// stand alone, without -wal and -shm companions.
	if _, err := dc.ExecContext(ctx, "PRAGMA journal_mode=DELETE"); err != nil {
		return fmt.Errorf("switch the copy out of WAL mode: %w", err)
	}
	return nil
}

// step copies every page in one step: one read transaction on the source,
// so writers committing meanwhile (WAL mode lets them) neither restart nor
// tear the copy.
func step(ctx context.Context, dst, src *sqlite3.SQLiteConn) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := dst.Backup("main", src, "main")
	if err != nil {
		return err
	}
	done, err := b.Step(-1)
	if ferr := b.Finish(); err == nil {
		err = ferr
	}
	if err == nil && !done {
		err = errors.New("the backup did not complete in one step")
	}
	return err
}

// checkNotInUse takes an exclusive lock on path without waiting. In WAL mode
// every open connection holds a shared lock on the file, so this fails
// while any other connection, in this process or another, has it open.
func checkNotInUse(ctx context.Context, path string) error {
	dsn := "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path) +
		"?_busy_timeout=0&_locking_mode=EXCLUSIVE&_txlock=exclusive"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	// BEGIN EXCLUSIVE in exclusive locking mode asks for the exclusive
	// lock on the database file itself.
	tx, err := db.BeginTx(ctx, nil)
	if err == nil {
		err = tx.Commit()
	}
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked) {
		return fmt.Errorf("%w: stop the server (agent-bridge service stop serve, or Ctrl-C) and try again", ErrInUse)
	}
	if err != nil {
		return fmt.Errorf("check whether %s is in use: %w", path, err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
