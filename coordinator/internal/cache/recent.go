package cache

import (
	"container/list"
	"sync"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// recentThreads bounds the threads whose last events are kept for context
// windows: the ones spoken in most recently, which are the ones whose
// triggers are being answered. A thread that falls out costs one GET. It
// is above the max_concurrency people run with: at 64, a burst of 100
// triggers at max_concurrency 100 makes a third of its runs ask the bridge
// for their window while the others start.
const recentThreads = 256

// RecentSlack is how many events beyond the context window each thread
// keeps, so that a window is still whole when a few events arrived between
// the trigger and the start of its invocation.
const RecentSlack = 32

// Recent keeps, per thread, the last events the follow loop
// processed, with contiguous seqs. An invocation's context window comes
// from here when it is whole, which saves a GET on the wake path; anything
// else (a recovered job, a window reaching further back, a gap) asks the
// bridge. The stream and the GET carry the same events (private ones
// included: visibility is applied after, to either), so the two agree.
type Recent struct {
	mu   sync.Mutex
	byID map[string]*list.Element // values are *recentRing
	lru  list.List                // front: most recently added to
}

// recentRing is one thread's last events, oldest first, seqs contiguous.
type recentRing struct {
	id  string
	evs []agentbridge.Event
}

// NewRecent returns an empty Recent.
func NewRecent() *Recent {
	return &Recent{byID: make(map[string]*list.Element)}
}

// Add appends e to its thread's events, keeping the last keep. An event
// that does not follow the last one kept starts the thread over (a gap, or
// a replay of what is already there).
func (r *Recent) Add(e agentbridge.Event, keep int) {
	if keep <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	el, ok := r.byID[e.Thread]
	if !ok {
		el = r.lru.PushFront(&recentRing{id: e.Thread})
		r.byID[e.Thread] = el
		for r.lru.Len() > recentThreads {
			old := r.lru.Back()
			r.lru.Remove(old)
			delete(r.byID, old.Value.(*recentRing).id)
		}
	}
	r.lru.MoveToFront(el)
	ring := el.Value.(*recentRing)
	if n := len(ring.evs); n > 0 && ring.evs[n-1].Seq != e.Seq-1 {
		if ring.evs[n-1].Seq >= e.Seq {
			return // already kept
		}
		ring.evs = ring.evs[:0]
	}
	if len(ring.evs) >= keep {
		// Shift in place: the backing array never grows past keep.
		drop := len(ring.evs) - keep + 1
		ring.evs = append(ring.evs[:0], ring.evs[drop:]...)
	}
	ring.evs = append(ring.evs, e)
}

// Window returns a copy of the thread's last n events up to and including
// seq until, whose last must be the event with id trigger; ok is false
// when the kept events do not cover all of them.
func (r *Recent) Window(thread string, until int64, n int, trigger string) ([]agentbridge.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	el, ok := r.byID[thread]
	if !ok {
		return nil, false
	}
	evs := el.Value.(*recentRing).evs
	if len(evs) == 0 {
		return nil, false
	}
	first, last := evs[0].Seq, evs[len(evs)-1].Seq
	from := max(until-int64(n)+1, 1)
	if from < first || until > last {
		return nil, false
	}
	out := append([]agentbridge.Event(nil), evs[from-first:until-first+1]...)
	if out[len(out)-1].ID != trigger {
		return nil, false
	}
	return out, true
}
