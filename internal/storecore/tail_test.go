package storecore

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// evs returns events with the given gseqs, on thread "a" when even and
// "b" when odd.
func evs(gseqs ...int64) []agentbridge.Event {
	out := make([]agentbridge.Event, len(gseqs))
	for i, g := range gseqs {
		th := "a"
		if g%2 == 1 {
			th = "b"
		}
		out[i] = agentbridge.Event{GSeq: g, Thread: th, ID: fmt.Sprint("e", g)}
	}
	return out
}

func gseqs(evs []agentbridge.Event) []int64 {
	out := []int64{}
	for _, e := range evs {
		out = append(out, e.GSeq)
	}
	return out
}

func TestTail(t *testing.T) {
	t.Parallel()
	onA := func(e *agentbridge.Event) bool { return e.Thread == "a" }
	type since struct {
		after   int64
		limit   int
		keep    func(*agentbridge.Event) bool
		want    []int64
		through int64
		ok      bool
	}
	for _, tc := range []struct {
		name      string
		maxEvents int
		maxBytes  int
		batches   [][]int64
		head      int64
		headOK    bool
		since     []since
	}{
		{name: "empty covers nothing", maxEvents: 8, maxBytes: 1 << 20,
			since: []since{{after: 0, ok: false}}},
		{name: "first batch sets the base", maxEvents: 8, maxBytes: 1 << 20,
			batches: [][]int64{{5, 6}, {7}}, head: 7, headOK: true,
			since: []since{
				{after: 3, through: 3, ok: false}, // 4 may exist: the database's
				{after: 4, want: []int64{5, 6, 7}, through: 7, ok: true},
				{after: 5, want: []int64{6, 7}, through: 7, ok: true},
				{after: 7, want: []int64{}, through: 7, ok: true},
				{after: 9, want: []int64{}, through: 9, ok: true},
				{after: 4, keep: onA, want: []int64{6}, through: 7, ok: true},
				{after: 4, limit: 2, want: []int64{5, 6}, through: 6, ok: true},
				{after: 4, limit: 1, keep: onA, want: []int64{6}, through: 7, ok: true},
			}},
		{name: "count cap drops the oldest", maxEvents: 3, maxBytes: 1 << 20,
			batches: [][]int64{{1, 2}, {3, 4, 5}}, head: 5, headOK: true,
			since: []since{
				{after: 1, ok: false, through: 1},
				{after: 2, want: []int64{3, 4, 5}, through: 5, ok: true},
			}},
		{name: "a gap rebases", maxEvents: 8, maxBytes: 1 << 20,
			batches: [][]int64{{1, 2}, {5, 6}}, head: 6, headOK: true,
			since: []since{
				{after: 2, ok: false, through: 2}, // 3 and 4 were committed elsewhere
				{after: 4, want: []int64{5, 6}, through: 6, ok: true},
			}},
		{name: "size cap keeps at least the last", maxEvents: 8, maxBytes: 300,
			batches: [][]int64{{1, 2, 3}}, head: 3, headOK: true,
			since: []since{
				{after: 1, ok: false, through: 1},
				{after: 2, want: []int64{3}, through: 3, ok: true},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := NewTail(tc.maxEvents, tc.maxBytes)
			for _, b := range tc.batches {
				tl.Add(evs(b...))
			}
			if h, ok := tl.Head(); h != tc.head || ok != tc.headOK {
				t.Errorf("Head() = %d, %v; want %d, %v", h, ok, tc.head, tc.headOK)
			}
			for _, q := range tc.since {
				got, through, ok := tl.Since(q.after, q.limit, q.keep)
				if ok != q.ok || (ok && (!slices.Equal(gseqs(got), q.want) || through != q.through)) {
					t.Errorf("Since(%d, %d) = %v through %d, %v; want %v through %d, %v",
						q.after, q.limit, gseqs(got), through, ok, q.want, q.through, q.ok)
				}
			}
		})
	}
}

// A ring that has wrapped around many times still answers in order, from
// any cursor it covers.
func TestTailWraps(t *testing.T) {
	t.Parallel()
	tl := NewTail(5, 1<<20)
	for g := int64(1); g <= 23; g += 2 {
		tl.Add(evs(g, g+1))
	}
	for after := int64(19); after <= 24; after++ {
		got, through, ok := tl.Since(after, 0, nil)
		want := []int64{}
		for g := after + 1; g <= 24; g++ {
			want = append(want, g)
		}
		if !ok || through != 24 || !slices.Equal(gseqs(got), want) {
			t.Errorf("Since(%d) = %v through %d, %v; want %v through 24", after, gseqs(got), through, ok, want)
		}
	}
	if _, _, ok := tl.Since(18, 0, nil); ok {
		t.Error("Since(18) ok: event 19 was dropped")
	}
}

// A nil tail (a store that keeps none) sends every reader to the database.
func TestNilTail(t *testing.T) {
	t.Parallel()
	var tl *Tail
	if _, ok := tl.Head(); ok {
		t.Error("nil tail has a head")
	}
	if _, _, ok := tl.Since(0, 10, nil); ok {
		t.Error("nil tail answered Since")
	}
}

// The size estimate counts content and meta, so large replies push the
// base up sooner than small ones.
func TestTailCountsSize(t *testing.T) {
	t.Parallel()
	tl := NewTail(100, 10_000)
	big := evs(1, 2, 3)
	for i := range big {
		big[i].Content = []byte(`"` + strings.Repeat("x", 4000) + `"`)
	}
	tl.Add(big)
	if _, _, ok := tl.Since(0, 0, nil); ok {
		t.Error("three 4 kB events fit a 10 kB tail")
	}
	if got, _, ok := tl.Since(1, 0, nil); !ok || len(got) != 2 {
		t.Errorf("Since(1) = %d events, %v; want the last two", len(got), ok)
	}
}
