package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// countHits pages through every hit of q (with req's filters) and returns
// how many there are, failing t on a hit without a snippet or marks.
func countHits(t testing.TB, ss agentbridge.SearchStore, q string, req agentbridge.SearchRequest) int {
	t.Helper()
	pq, err := agentbridge.ParseSearchQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	req.Query, req.Limit = pq, agentbridge.MaxSearchLimit
	n := 0
	for {
		hits, err := ss.Search(context.Background(), req)
		if err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
		for _, h := range hits {
			snip, marks := agentbridge.Snippet(agentbridge.SearchText(h.Event), pq)
			if snip == "" || len(marks) == 0 {
				t.Fatalf("search %q: hit %s has snippet %q marks %v", q, h.Event.ID, snip, marks)
			}
		}
		n += len(hits)
		if len(hits) < req.Limit {
			return n
		}
		req.Cursor = hits[len(hits)-1].Event.GSeq
	}
}

// CheckCorpusSearch checks the answers of ss over corpus c against a plain
// scan of it, and logs the latency of a first page (20 hits) of each kind
// of query, p50 and p99 over repeated runs.
func CheckCorpusSearch(t *testing.T, ss agentbridge.SearchStore, c Corpus) {
	t.Helper()
	th := c.Thread(c.Events / 2)
	for _, k := range []struct {
		q     string
		req   agentbridge.SearchRequest
		words []string
	}{
		{"rollout", agentbridge.SearchRequest{}, []string{"rollout"}},
		{"rollout orange", agentbridge.SearchRequest{}, []string{"rollout", "orange"}},
		{"scheduler", agentbridge.SearchRequest{}, []string{"scheduler"}},
		{"scheduler", agentbridge.SearchRequest{Threads: []string{"t0", "t2"}}, []string{"scheduler"}},
		{`"rollout is blocked"`, agentbridge.SearchRequest{}, []string{"rollout"}},
		{"rollo*", agentbridge.SearchRequest{}, []string{"rollout"}},
		{"rollout", agentbridge.SearchRequest{From: "codex"}, nil},
		{"rollout", agentbridge.SearchRequest{Threads: []string{"t0", "t2"}}, nil},
		{"billing ledger postgresql", agentbridge.SearchRequest{}, nil},
		{"billing ledger postgresql", agentbridge.SearchRequest{Threads: []string{th}}, nil},
		{"billing ledger postgresql", agentbridge.SearchRequest{Threads: []string{"t-none", c.Thread(c.Events/2 + 1)}}, nil},
	} {
		got := countHits(t, ss, k.q, k.req)
		var want int
		switch {
		case k.q == "billing ledger postgresql":
			want = 0
			if k.req.Threads == nil || k.req.Threads[0] == th {
				want = 1
			}
		case k.req.From != "":
			want = c.Contains("", k.req.From, "rollout")
		case k.req.Threads != nil:
			want = c.Contains("t0", "", k.q) + c.Contains("t2", "", k.q)
		default:
			want = c.Contains("", "", k.words...)
		}
		if got != want || (want == 0 && (k.q == "rollout" || k.q == "scheduler")) {
			t.Errorf("search %q %+v: %d hits, want %d", k.q, k.req, got, want)
		}
	}
	measureCorpusSearch(t, ss, th)
}

// measureCorpusSearch logs p50 and p99 of a first page of each kind of
// query over the corpus.
func measureCorpusSearch(t *testing.T, ss agentbridge.SearchStore, thread string) {
	queries := []struct {
		name, q string
		req     agentbridge.SearchRequest
	}{
		{"common word", "the", agentbridge.SearchRequest{}},
		{"two words", "deploy friday", agentbridge.SearchRequest{}},
		{"rare word", "rollout", agentbridge.SearchRequest{}},
		{"very rare word", "w12345", agentbridge.SearchRequest{}},
		{"phrase", `"the parser"`, agentbridge.SearchRequest{}},
		{"prefix", "migr*", agentbridge.SearchRequest{}},
		{"rare, one thread", "rollout", agentbridge.SearchRequest{Threads: []string{thread}}},
		{"common, one thread", "the", agentbridge.SearchRequest{Threads: []string{thread}}},
		{"common, one sender", "deploy", agentbridge.SearchRequest{From: "codex"}},
		{"absent word", "zyzzyva", agentbridge.SearchRequest{}},
	}
	var all []time.Duration
	var lines []string
	for _, q := range queries {
		pq, _ := agentbridge.ParseSearchQuery(q.q)
		req := q.req
		req.Query, req.Limit = pq, agentbridge.DefaultSearchLimit+1
		var ds []time.Duration
		for range 40 {
			start := time.Now()
			if _, err := ss.Search(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		all = append(all, ds...)
		lines = append(lines, fmt.Sprintf("%-20s p50 %8v  p99 %8v", q.name, Percentile(ds, 50).Round(time.Microsecond), Percentile(ds, 99).Round(time.Microsecond)))
	}
	t.Logf("search latency, first page of 20:\n%s\n%-20s p50 %8v  p99 %8v", strings.Join(lines, "\n"), "all", Percentile(all, 50).Round(time.Microsecond), Percentile(all, 99).Round(time.Microsecond))
}
