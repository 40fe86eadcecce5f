package cache

import (
	"container/list"
	"sync"
)

// LRU holds values by string key, at most max of them, dropping the least
// recently used. The coordinator keeps the derived state of the threads it
// met most recently in one: only the follow loop writes it, and
// invocations read names from other goroutines.
type LRU[V any] struct {
	mu   sync.Mutex
	max  int
	byID map[string]*list.Element // values are *entry[V]
	lru  list.List                // front: most recently used
}

// entry is one cached value, keyed by its id.
type entry[V any] struct {
	id string
	v  V
}

// NewLRU returns an empty LRU of at most max values.
func NewLRU[V any](max int) *LRU[V] {
	return &LRU[V]{max: max, byID: make(map[string]*list.Element)}
}

// Get returns the value of id and marks it used.
func (t *LRU[V]) Get(id string) (V, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.byID[id]
	if !ok {
		var zero V
		return zero, false
	}
	t.lru.MoveToFront(el)
	return el.Value.(*entry[V]).v, true
}

// Put stores the value of id, dropping the least recently used values
// beyond max.
func (t *LRU[V]) Put(id string, v V) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.byID[id]; ok {
		el.Value.(*entry[V]).v = v
		t.lru.MoveToFront(el)
		return
	}
	t.byID[id] = t.lru.PushFront(&entry[V]{id: id, v: v})
	for t.lru.Len() > t.max {
		old := t.lru.Back()
		t.lru.Remove(old)
		delete(t.byID, old.Value.(*entry[V]).id)
	}
}

// Reset forgets every value. The coordinator resets its thread states
// after the bridge's log was rebased: what was cached may describe events
// that are no longer in it.
func (t *LRU[V]) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.byID)
	t.lru.Init()
}
