package cache

import (
	"fmt"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

func recentEv(thread string, seq int64) agentbridge.Event {
	return agentbridge.Event{ID: fmt.Sprintf("%s-%d", thread, seq), Thread: thread, Seq: seq}
}

func seqsOf(evs []agentbridge.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func TestRecentEventsWindow(t *testing.T) {
	t.Parallel()
	r := NewRecent()
	for seq := int64(1); seq <= 10; seq++ {
		r.Add(recentEv("a", seq), 6)
	}
	r.Add(recentEv("a", 7), 6) // a replay changes nothing
	tests := []struct {
		name    string
		until   int64
		n       int
		trigger string
		want    []int64 // nil: not whole, ask the bridge
	}{
		{"the last events", 10, 3, "a-10", []int64{8, 9, 10}},
		{"up to an earlier trigger", 8, 3, "a-8", []int64{6, 7, 8}},
		{"all that is kept", 10, 6, "a-10", []int64{5, 6, 7, 8, 9, 10}},
		{"reaching before what is kept", 10, 7, "a-10", nil},
		{"a trigger not yet seen", 11, 3, "a-11", nil},
		{"a different event at the trigger's seq", 10, 3, "other", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := r.Window("a", tt.until, tt.n, tt.trigger)
			if tt.want == nil {
				if ok {
					t.Fatalf("window = %v, want none", seqsOf(got))
				}
				return
			}
			if !ok || fmt.Sprint(seqsOf(got)) != fmt.Sprint(tt.want) {
				t.Fatalf("window = %v, %v; want %v", seqsOf(got), ok, tt.want)
			}
		})
	}
	if _, ok := r.Window("b", 1, 3, "b-1"); ok {
		t.Error("a thread never seen has a window")
	}
}

func TestRecentEventsShortThreadAndGap(t *testing.T) {
	t.Parallel()
	r := NewRecent()
	r.Add(recentEv("a", 1), 10)
	r.Add(recentEv("a", 2), 10)
	if got, ok := r.Window("a", 2, 25, "a-2"); !ok || len(got) != 2 {
		t.Fatalf("a thread shorter than the window: %v, %v; want its 2 events", seqsOf(got), ok)
	}
	r.Add(recentEv("a", 5), 10) // a gap: 3 and 4 were not seen
	if got, ok := r.Window("a", 5, 3, "a-5"); ok {
		t.Fatalf("a window across a gap: %v", seqsOf(got))
	}
	if got, ok := r.Window("a", 5, 1, "a-5"); !ok || len(got) != 1 {
		t.Fatalf("after a gap the thread starts over: %v, %v", seqsOf(got), ok)
	}
}

func TestRecentEventsBounded(t *testing.T) {
	t.Parallel()
	r := NewRecent()
	for i := range recentThreads + 5 {
		r.Add(recentEv(fmt.Sprint("t", i), 1), 4)
	}
	if r.lru.Len() != recentThreads || len(r.byID) != recentThreads {
		t.Fatalf("kept %d threads (%d indexed), want %d", r.lru.Len(), len(r.byID), recentThreads)
	}
	if _, ok := r.Window("t0", 1, 1, "t0-1"); ok {
		t.Error("the least recently used thread is still kept")
	}
	for seq := int64(1); seq <= 100; seq++ {
		r.Add(recentEv("big", seq), 4)
	}
	el := r.byID["big"]
	if evs := el.Value.(*recentRing).evs; len(evs) != 4 || cap(evs) > 8 {
		t.Fatalf("a thread keeps %d events (capacity %d), want 4", len(evs), cap(evs))
	}
}
