package pgschema

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"testing/fstest"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"

	"github.com/agent-bridge/agent-bridge/internal/migration"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
)

var srv = pgtest.New()

func TestMain(m *testing.M) { os.Exit(srv.Run(m)) }

// files is a migrations folder "m" holding one numbered file per SQL text.
func files(sqls ...string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for i, s := range sqls {
		fsys[fmt.Sprintf("m/%04d_step.sql", i+1)] = &fstest.MapFile{Data: []byte(s)}
	}
	return fsys
}

// TestMigrate: processes starting at once take turns and end at the newest
// version with every step applied once; a failing step leaves the database
// at the last whole version; a database newer than the files is refused
// with the one migration.ErrSchemaTooNew, which sqlitex wraps too.
func TestMigrate(t *testing.T) {
	url := srv.Database(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	ctx := t.Context()

	two := files(`CREATE TABLE a (n int)`, `CREATE TABLE b (n int)`)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = Migrate(ctx, db, two, "m", "schema_v") })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrator %d: %v", i, err)
		}
	}
	if v, err := Version(ctx, db, "schema_v"); err != nil || v != 2 {
		t.Fatalf("Version = %d, %v; want 2", v, err)
	}

	bad := files(`CREATE TABLE a (n int)`, `CREATE TABLE b (n int)`, `CREATE TABLE c (n int); SELECT no_such_function()`)
	if err := Migrate(ctx, db, bad, "m", "schema_v"); err == nil {
		t.Fatal("a failing step migrated")
	}
	var c bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('c') IS NOT NULL`).Scan(&c); err != nil || c {
		t.Fatalf("table c of the failed step exists: %v, %v", c, err)
	}
	if v, _ := Version(ctx, db, "schema_v"); v != 2 {
		t.Fatalf("after a failed step the version is %d, want 2", v)
	}

	one := files(`CREATE TABLE a (n int)`)
	if err := Migrate(ctx, db, one, "m", "schema_v"); !errors.Is(err, migration.ErrSchemaTooNew) {
		t.Fatalf("an older binary's Migrate = %v, want migration.ErrSchemaTooNew", err)
	}
}
