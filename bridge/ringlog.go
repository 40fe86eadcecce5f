package bridge

import "sync"

// ringLog keeps the last size changes of one kind (presence, receipts) for
// stream subscribers and wakes them on each change with a close-and-replace
// channel, as the store does for commits. A subscriber grabs the channel and
// the version with watch before reading changes with since; one that falls
// more than size changes behind skips the oldest, because each change is the
// latest state of its key and the endpoint's GET gives the whole picture.
type ringLog[T any] struct {
	size    int
	mu      sync.Mutex
	log     []T
	version int64 // number of changes ever added
	notify  chan struct{}
}

func newRingLog[T any](size int) *ringLog[T] {
	return &ringLog[T]{size: size, notify: make(chan struct{})}
}

// add records a change and wakes subscribers.
func (r *ringLog[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.log) < r.size {
		r.log = append(r.log, v)
	} else {
		r.log[r.version%int64(r.size)] = v
	}
	r.version++
	close(r.notify)
	r.notify = make(chan struct{})
}

// watch returns the channel closed by the next change and the current
// version.
func (r *ringLog[T]) watch() (<-chan struct{}, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.notify, r.version
}

// since returns the changes after version v still in the ring for which
// keep is true (nil keeps all), oldest first, and the version they bring
// the caller to.
func (r *ringLog[T]) since(v int64, keep func(T) bool) ([]T, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v < r.version-int64(len(r.log)) {
		v = r.version - int64(len(r.log))
	}
	out := make([]T, 0, r.version-v)
	for i := v; i < r.version; i++ {
		if e := r.log[i%int64(r.size)]; keep == nil || keep(e) {
			out = append(out, e)
		}
	}
	return out, r.version
}
