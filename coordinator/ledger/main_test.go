package ledger_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
)

// dialectEnv makes the test binary run every ledger test on PostgreSQL:
// TestMain runs the tests on SQLite, then runs itself again with it set,
// so that each test, present and future, covers both dialects.
const dialectEnv = "STATE_TEST_DIALECT"

var pg = pgtest.New()

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Stop()
	if code != 0 || os.Getenv(dialectEnv) != "" {
		os.Exit(code)
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), dialectEnv+"=postgres")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		os.Stderr.WriteString("ledger tests on PostgreSQL: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(0)
}

// ledgerPath returns where a test's ledger lives: a SQLite file in a
// temporary folder, or on the PostgreSQL run a fresh database's URL.
func ledgerPath(t *testing.T) string {
	t.Helper()
	if os.Getenv(dialectEnv) == "postgres" {
		return pg.Database(t)
	}
	return filepath.Join(t.TempDir(), "coordinator.db")
}

// TestMigrationsInBothDialects fails when a SQLite migration has no
// PostgreSQL twin of the same number (docs/storage.md).
func TestMigrationsInBothDialects(t *testing.T) {
	list := func(dir string) []string {
		var out []string
		entries, err := fs.ReadDir(os.DirFS("."), dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".sql") {
				out = append(out, e.Name()[:4])
			}
		}
		return out
	}
	lite, pgs := list("migrations"), list("migrations/postgres")
	if strings.Join(lite, ",") != strings.Join(pgs, ",") {
		t.Fatalf("SQLite migrations %v but PostgreSQL migrations %v: add the PostgreSQL twin in migrations/postgres/", lite, pgs)
	}
}
