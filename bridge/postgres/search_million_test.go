package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
)

// TestSearchCorpus is the SQLite store's test of the same name on
// PostgreSQL: the previous release's database of storetest.CorpusEvents
// events is indexed by the migration at Open, then answers as a plain scan
// does; latencies are logged.
func TestSearchCorpus(t *testing.T) {
	c := storetest.Corpus{Events: storetest.CorpusEvents(20000), Threads: 1000}
	url := pg.Database(t)
	start := time.Now()
	storetest.BuildOldPostgres(t, url, SchemaTable, c)
	t.Logf("built %d events of the previous release's schema in %v", c.Events, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	s := openStore(t, url, Options{})
	t.Logf("migrated (indexed) in %v", time.Since(start).Round(time.Millisecond))
	var indexed int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM event_search`).Scan(&indexed); err != nil {
		t.Fatal(err)
	}
	if want := c.Events + c.Threads; indexed != want {
		t.Fatalf("%d events indexed, want %d", indexed, want)
	}
	if _, err := s.pool.Exec(context.Background(), `ANALYZE event_search`); err != nil {
		t.Fatal(err)
	}
	storetest.CheckCorpusSearch(t, s, c)
}
