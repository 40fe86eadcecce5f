package sqlitex

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agent-bridge/agent-bridge/internal/migration"
)

func TestPragmasOnEveryPooledConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a?b#c%d.db")
	rw, err := Open(path, Options{MaxOpen: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.Exec("CREATE TABLE t (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(path, Options{ReadOnly: true, MaxOpen: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()

	for name, db := range map[string]*sql.DB{"rw": rw, "ro": ro} {
		// Hold four connections at once so the pool must open four.
		var conns []*sql.Conn
		for range 4 {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for i, c := range conns {
			var mode string
			var busy, fk, sync int
			if err := c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
				t.Fatal(err)
			}
			if mode != "wal" || busy != 5000 || fk != 1 || sync != 1 {
				t.Errorf("%s conn %d: journal_mode=%s busy_timeout=%d foreign_keys=%d synchronous=%d; want wal 5000 1 1(NORMAL)",
					name, i, mode, busy, fk, sync)
			}
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}
	if _, err := ro.Exec("INSERT INTO t VALUES (1)"); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("write through the read-only pool: err = %v, want a readonly error", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.db"), Options{ReadOnly: true}); err == nil {
		t.Error("read-only open of a missing file succeeded")
	}
}

func migrationsFS(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, body := range files {
		fsys["m/"+name] = &fstest.MapFile{Data: []byte(body)}
	}
	return fsys
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := Open(path, Options{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	v1 := migrationsFS(map[string]string{
		"0001_init.sql": "CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);",
		"README.md":     "not a migration",
	})
	if err := Migrate(ctx, db, v1, "m"); err != nil {
		t.Fatalf("fresh: %v", err)
	}
	if v, _ := SchemaVersion(ctx, db); v != 1 {
		t.Fatalf("version after fresh migrate = %d, want 1", v)
	}
	// Reopening at the same version is a no-op (the insert does not rerun).
	if err := Migrate(ctx, db, v1, "m"); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM a").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in a = %d (%v), want 1: migration 1 ran twice", n, err)
	}

	// A failing step is rolled back whole and leaves the version alone.
	bad := migrationsFS(map[string]string{
		"0001_init.sql": "unused",
		"0002_b.sql":    "CREATE TABLE b (y INTEGER); THIS IS NOT SQL;",
	})
	if err := Migrate(ctx, db, bad, "m"); err == nil || !strings.Contains(err.Error(), "0002_b.sql") {
		t.Fatalf("bad migration: err = %v, want an error naming 0002_b.sql", err)
	}
	if v, _ := SchemaVersion(ctx, db); v != 1 {
		t.Fatalf("version after failed migration = %d, want 1", v)
	}
	if _, err := db.Exec("SELECT * FROM b"); err == nil {
		t.Fatal("table b exists: the failed step was not rolled back")
	}

	v2 := migrationsFS(map[string]string{
		"0001_init.sql": "unused",
		"0002_b.sql":    "CREATE TABLE b (y INTEGER);",
	})
	if err := Migrate(ctx, db, v2, "m"); err != nil {
		t.Fatalf("forward to 2: %v", err)
	}
	if v, _ := SchemaVersion(ctx, db); v != 2 {
		t.Fatalf("version = %d, want 2", v)
	}

	// The v1 binary must refuse the v2 database.
	err = Migrate(ctx, db, v1, "m")
	if !errors.Is(err, migration.ErrSchemaTooNew) {
		t.Fatalf("old binary on new db: err = %v, want migration.ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), "version 2") {
		t.Errorf("error %q does not name the database's version", err)
	}
}

// TestOpenMakesFilesPrivate: a database an older release left 0644, with a
// -wal and -shm of the same mode, is 0600 once opened for writing; a
// missing folder is created 0700, an existing one left as it is and named
// by FolderOpen when others may list it.
func TestOpenMakesFilesPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(shared, "bridge.db")
	db, err := Open(old, Options{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{old, old + "-wal", old + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defer db.Close()
	again, err := Open(old, Options{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	fresh := filepath.Join(dir, "new", "deeper", "coordinator.db")
	db2, err := Open(fresh, Options{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if _, err := db2.Exec("CREATE TABLE t (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		old: 0o600, old + "-wal": 0o600, old + "-shm": 0o600, shared: 0o755,
		fresh: 0o600, fresh + "-wal": 0o600, fresh + "-shm": 0o600,
		filepath.Dir(fresh): 0o700, filepath.Join(dir, "new"): 0o700,
	} {
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else if st.Mode().Perm() != want {
			t.Errorf("%s is %#o, want %#o", p, st.Mode().Perm(), want)
		}
	}
	if mode, open := FolderOpen(old); !open || mode != 0o755 {
		t.Errorf("FolderOpen(%s) = %#o, %v; want 0755, true", old, mode, open)
	}
	if _, open := FolderOpen(fresh); open {
		t.Errorf("FolderOpen(%s) says open", fresh)
	}
}
