package coordinator

import (
	"fmt"
	"testing"
)

// TestThreadCachesDropLeastRecentlyUsed fills the cache past its bound and
// checks which threads it keeps: the ones read or written most recently.
func TestThreadCachesDropLeastRecentlyUsed(t *testing.T) {
	c := newThreadCaches(3)
	for i := range 3 {
		c.put(fmt.Sprintf("t%d", i), threadCache{seq: int64(i), name: fmt.Sprintf("thread %d", i)})
	}
	if _, ok := c.get("t0"); !ok { // t0 is now the most recently used
		t.Fatal("t0 missing before the cache was full")
	}
	c.put("t3", threadCache{seq: 3})                   // drops t1, the least recently used
	c.put("t0", threadCache{seq: 10, name: "renamed"}) // an update: no entry added
	c.put("t4", threadCache{seq: 4})                   // drops t2
	if n := c.lru.Len(); n != 3 {
		t.Fatalf("len = %d, want the bound 3", n)
	}
	for id, want := range map[string]bool{"t0": true, "t1": false, "t2": false, "t3": true, "t4": true} {
		if _, ok := c.get(id); ok != want {
			t.Errorf("%s cached = %v, want %v", id, ok, want)
		}
	}
	if tc, _ := c.get("t0"); tc.seq != 10 || tc.name != "renamed" {
		t.Errorf("t0 = %+v, want the updated state", tc)
	}
}
