package cache

import (
	"fmt"
	"testing"
)

// threadState stands for the coordinator's cached thread state.
type threadState struct {
	seq  int64
	name string
}

// TestThreadCachesDropLeastRecentlyUsed fills the cache past its bound and
// checks which threads it keeps: the ones read or written most recently.
func TestThreadCachesDropLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	c := NewLRU[threadState](3)
	for i := range 3 {
		c.Put(fmt.Sprintf("t%d", i), threadState{seq: int64(i), name: fmt.Sprintf("thread %d", i)})
	}
	if _, ok := c.Get("t0"); !ok { // t0 is now the most recently used
		t.Fatal("t0 missing before the cache was full")
	}
	c.Put("t3", threadState{seq: 3})                   // drops t1, the least recently used
	c.Put("t0", threadState{seq: 10, name: "renamed"}) // an update: no entry added
	c.Put("t4", threadState{seq: 4})                   // drops t2
	if n := c.lru.Len(); n != 3 {
		t.Fatalf("len = %d, want the bound 3", n)
	}
	for id, want := range map[string]bool{"t0": true, "t1": false, "t2": false, "t3": true, "t4": true} {
		if _, ok := c.Get(id); ok != want {
			t.Errorf("%s cached = %v, want %v", id, ok, want)
		}
	}
	if tc, _ := c.Get("t0"); tc.seq != 10 || tc.name != "renamed" {
		t.Errorf("t0 = %+v, want the updated state", tc)
	}
	c.Reset()
	if _, ok := c.Get("t0"); ok || c.lru.Len() != 0 {
		t.Errorf("after Reset: t0 cached %v, %d kept; want none", ok, c.lru.Len())
	}
}
