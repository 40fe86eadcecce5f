package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/postgres"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// oldDB is a database of the previous release's schema, as serve's --db
// names it, and what the test reads of its search migration beside the
// running serve.
type oldDB struct {
	arg string
	// progress is the migration's stored progress (done, target); ok is
	// false before the migration made its table.
	progress func() (done, target int64, ok bool)
	// indexed is how many events the search index holds.
	indexed func() int64
}

// oldSQLite builds c into a SQLite file of the previous release's schema.
func oldSQLite(t *testing.T, c storetest.Corpus) oldDB {
	db := filepath.Join(t.TempDir(), "data", "bridge.db")
	if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
		t.Fatal(err)
	}
	storetest.BuildOldSQLite(t, db, c)
	query := func(q string, dest ...any) error {
		rdb, err := sql.Open("sqlite3", "file:"+db+"?mode=ro&_busy_timeout=5000")
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		return rdb.QueryRow(q).Scan(dest...)
	}
	return oldDB{arg: db,
		progress: func() (done, target int64, ok bool) {
			return done, target, query(`SELECT done, target FROM search_backfill`, &done, &target) == nil
		},
		indexed: func() (n int64) {
			if err := query(`SELECT count(*) FROM events_fts`, &n); err != nil {
				t.Fatal(err)
			}
			return n
		}}
}

// oldPostgres builds c into a PostgreSQL database of the previous
// release's schema.
func oldPostgres(t *testing.T, c storetest.Corpus) oldDB {
	url := pg.Database(t)
	storetest.BuildOldPostgres(t, url, postgres.SchemaTable, c)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return oldDB{arg: url,
		progress: func() (done, target int64, ok bool) {
			err := conn.QueryRow(t.Context(), `SELECT done, target FROM search_backfill`).Scan(&done, &target)
			return done, target, err == nil
		},
		indexed: func() (n int64) {
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM event_search`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}}
}

// migration is what serve logged of the search migration: where it
// started (from_gseq of of) and how many events it indexed when complete.
type migration struct {
	started          bool
	from, of, events int64
	complete         bool
}

// migrationLog gathers a migration from serve's log lines as they come.
type migrationLog struct {
	mu sync.Mutex
	m  migration
}

func (l *migrationLog) line(b []byte) {
	var line struct {
		Msg    string `json:"msg"`
		From   *int64 `json:"from_gseq"`
		Of     int64  `json:"of"`
		Events int64  `json:"events"`
	}
	if json.Unmarshal(b, &line) != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case line.From != nil && !l.m.started:
		l.m.started, l.m.from, l.m.of = true, *line.From, line.Of
	case line.Msg == "search index complete":
		l.m.complete, l.m.events = true, line.Events
	}
}

func (l *migrationLog) get() migration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m
}

// TestSearchMigrationResumesAfterKill: a database of the previous
// release's schema (storetest.BuildOldSQLite, 100,000 events;
// storetest.BuildOldPostgres, 20,000; or SEARCH_EVENTS) is indexed by the
// search migration in a real serve; a kill -9 halfway leaves the stored
// progress at a chunk's end, with the index holding exactly the events up
// to it; serve started again logs that it resumes from there, indexes only
// the rest, and then answers searches with the full, right index (the hits
// a plain scan of the corpus finds).
func TestSearchMigrationResumesAfterKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the real binary over a large database")
	}
	bin := buildServeBinary(t)
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testMigrationResumes(t, bin, storetest.Corpus{Events: storetest.CorpusEvents(100000), Threads: 1000}, oldSQLite)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testMigrationResumes(t, bin, storetest.Corpus{Events: storetest.CorpusEvents(20000), Threads: 1000}, oldPostgres)
	})
}

func testMigrationResumes(t *testing.T, bin string, c storetest.Corpus, build func(*testing.T, storetest.Corpus) oldDB) {
	start := time.Now()
	db := build(t, c)
	t.Logf("built %d events of the previous release's schema in %v", c.Events, time.Since(start).Round(time.Millisecond))
	total := int64(c.Events + c.Threads)

	// The first serve, killed once the migration is past half-way.
	var first migrationLog
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", db.arg)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "BRIDGE_TOKEN=", "BRIDGE_ADDR=", "BRIDGE_DB=")
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	testutil.WaitFor(t, 10*time.Minute, "the migration to pass half-way", func() bool {
		done, target, ok := db.progress()
		if ok && done >= target {
			t.Fatalf("the migration finished (%d of %d) before the test could kill it half-way", done, target)
		}
		return ok && done >= target/2
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	for _, line := range strings.Split(stderr.String(), "\n") {
		first.line([]byte(line))
	}
	if f := first.get(); !f.started || f.from != 0 || f.of != total {
		t.Fatalf("the first serve logged no start from gseq 0 of %d: %+v\n%s", total, f, stderr.String())
	}
	stopped, target, _ := db.progress()
	if stopped <= 0 || stopped >= target || target != total || stopped%5000 != 0 {
		t.Fatalf("after kill -9 the stored progress is %d of %d; want a chunk's end between 0 and %d", stopped, target, total)
	}
	if n := db.indexed(); n != stopped {
		t.Fatalf("after kill -9 the index holds %d events, the progress says %d", n, stopped)
	}
	t.Logf("killed with %d of %d indexed", stopped, target)

	// The second serve resumes where the first stopped.
	var second migrationLog
	start = time.Now()
	p := stack.ServeWith(t, bin, db.arg, stack.ServeOptions{Within: 15 * time.Minute, Each: second.line})
	s := second.get()
	if !s.started || s.from != stopped || s.of != total || !s.complete || s.events != total-stopped {
		t.Fatalf("the second serve logged %+v; want a start from gseq %d of %d and %d events indexed", s, stopped, total, total-stopped)
	}
	t.Logf("resumed at %d and finished in %v", stopped, time.Since(start).Round(time.Millisecond))
	if n := db.indexed(); n != total {
		t.Fatalf("the index holds %d events, want %d", n, total)
	}
	cl := client.New(p.URL, client.WithToken(p.Token))
	for _, q := range []struct {
		q    string
		want int
	}{
		{"rollout", c.Contains("", "", "rollout")},
		{"rollout orange", c.Contains("", "", "rollout", "orange")},
		{`"billing ledger to postgresql"`, 1},
	} {
		got, cursor := 0, ""
		for {
			page, err := cl.Search(t.Context(), client.SearchParams{Q: q.q, Limit: agentbridge.MaxSearchLimit, Cursor: cursor})
			if err != nil {
				t.Fatalf("search %q: %v", q.q, err)
			}
			got += len(page.Results)
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		if got != q.want || q.want == 0 {
			t.Errorf("search %q: %d hits, a plain scan finds %d", q.q, got, q.want)
		}
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.Done:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("serve did not stop within 30 s of SIGTERM")
	}
}
