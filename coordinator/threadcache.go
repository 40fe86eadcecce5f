package coordinator

import (
	"container/list"
	"sync"
)

// maxCachedThreads bounds the threads whose folded state the coordinator
// keeps. Threads are never deleted, so a cache of every thread met would
// grow for the daemon's whole life; a thread that falls out costs two
// reads from the bridge (its state and its name) when it speaks again.
const maxCachedThreads = 1024

// threadCaches holds the derived state of the threads met most recently,
// at most max of them, dropping the least recently used. Only the follow
// loop writes it; invocations read names from other goroutines.
type threadCaches struct {
	mu   sync.Mutex
	max  int
	byID map[string]*list.Element // values are *threadEntry
	lru  list.List                // front: most recently used
}

// threadEntry is one thread's cached state, keyed by its id.
type threadEntry struct {
	id string
	tc threadCache
}

func newThreadCaches(max int) *threadCaches {
	return &threadCaches{max: max, byID: make(map[string]*list.Element)}
}

// get returns the cached state of thread id and marks it used.
func (t *threadCaches) get(id string) (threadCache, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.byID[id]
	if !ok {
		return threadCache{}, false
	}
	t.lru.MoveToFront(el)
	return el.Value.(*threadEntry).tc, true
}

// put stores the state of thread id, dropping the least recently used
// threads beyond max.
func (t *threadCaches) put(id string, tc threadCache) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.byID[id]; ok {
		el.Value.(*threadEntry).tc = tc
		t.lru.MoveToFront(el)
		return
	}
	t.byID[id] = t.lru.PushFront(&threadEntry{id: id, tc: tc})
	for t.lru.Len() > t.max {
		old := t.lru.Back()
		t.lru.Remove(old)
		delete(t.byID, old.Value.(*threadEntry).id)
	}
}

// reset forgets every thread, after the bridge's log was rebased: what was
// cached may describe events that are no longer in it.
func (t *threadCaches) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.byID)
	t.lru.Init()
}
