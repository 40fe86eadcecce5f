package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
)

// TestSearchCorpus: a database of the previous release with
// storetest.CorpusEvents events (20,000 here and in CI; SEARCH_EVENTS=1000000
// for docs/performance.md's numbers) is indexed by the migration at Open;
// then words, phrases and prefixes find exactly the events whose text has
// them, each with a snippet; the thread and sender filters and a
// credential's threads narrow them; the latencies are logged
// (docs/performance.md, "Search").
func TestSearchCorpus(t *testing.T) {
	c := storetest.Corpus{Events: storetest.CorpusEvents(20000), Threads: 1000}
	path := filepath.Join(t.TempDir(), "old.db")
	start := time.Now()
	storetest.BuildOldSQLite(t, path, c)
	t.Logf("built %d events of the previous release's schema in %v", c.Events, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Logf("migrated (indexed) in %v", time.Since(start).Round(time.Millisecond))
	var indexed int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM events_fts`).Scan(&indexed); err != nil {
		t.Fatal(err)
	}
	if want := c.Events + c.Threads; indexed != want {
		t.Fatalf("%d events indexed, want %d", indexed, want)
	}
	storetest.CheckCorpusSearch(t, s, c)
}
