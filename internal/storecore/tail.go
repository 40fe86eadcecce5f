package storecore

import (
	"sync"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Tail keeps the log's latest committed events in memory, in gseq order,
// for the readers that follow the log: an SSE stream woken by a commit
// takes the new events from here instead of querying the database, which
// took a read transaction on every hop of a trigger's way (the trigger to
// the coordinator's stream, the reply to the asker's).
//
// Only a store whose one writer sees every commit in gseq order may fill a
// Tail (the SQLite store); PostgreSQL's bridges share a log and commit out
// of sequence order, so its readers query. The writer adds each committed
// batch before it wakes the readers, so a reader that grabs its wake-up
// channel, then reads the tail, misses nothing.
//
// A Tail covers every event after its base that this store committed:
// Since answers only a cursor at or after the base, and anything older is
// read from the database. The base moves up as old events are dropped
// (past a count or a size), and jumps to just before a batch that does not
// follow the last event held: events committed by another process, or a
// batch whose failed commit landed after all, are then left to the
// database, never skipped. Events another process commits past the head
// are unknown to the tail until this store's next batch, so a reader
// reads the database first and the tail only on a wake-up from this
// store's commits. A new Tail covers nothing until its first batch. It is
// safe for concurrent use; the events it hands out are shared and must not
// be modified.
type Tail struct {
	mu sync.RWMutex
	// ring holds the events, oldest at start, n of them.
	ring     []agentbridge.Event
	start, n int
	// base is the gseq every held event follows; valid is false until the
	// first batch.
	base  int64
	valid bool
	// size is the estimated bytes held, maxSize its cap.
	size, maxSize int
}

// Default tail caps: a burst of a few thousand events, or a few large
// replies, stay in memory; a few MB at most.
const (
	DefaultTailEvents = 4096
	DefaultTailBytes  = 8 << 20
)

// NewTail returns a Tail holding at most maxEvents events and about
// maxBytes bytes of them.
func NewTail(maxEvents, maxBytes int) *Tail {
	return &Tail{ring: make([]agentbridge.Event, max(maxEvents, 1)), maxSize: maxBytes}
}

// eventSize estimates the memory an event holds beyond its struct.
func eventSize(e *agentbridge.Event) int {
	n := 256 + len(e.Content) + len(e.ID) + len(e.Thread) + len(e.From) + len(e.To) + len(e.TS)
	for k, v := range e.Meta.Extra {
		n += len(k) + len(v)
	}
	return n
}

// Add appends a committed batch, in gseq order.
func (t *Tail) Add(evs []agentbridge.Event) {
	if len(evs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.valid || evs[0].GSeq != t.headLocked()+1 {
		// A gap (or the first batch): what came before is the database's.
		t.dropAll(evs[0].GSeq - 1)
	}
	for i := range evs {
		if t.n == len(t.ring) {
			t.dropOldest()
		}
		t.ring[(t.start+t.n)%len(t.ring)] = evs[i]
		t.n++
		t.size += eventSize(&evs[i])
	}
	for t.n > 1 && t.size > t.maxSize {
		t.dropOldest()
	}
}

// dropAll empties the tail, which then covers every event after base.
func (t *Tail) dropAll(base int64) {
	clear(t.ring)
	t.start, t.n, t.size = 0, 0, 0
	t.base, t.valid = base, true
}

// dropOldest drops the oldest event held; the base moves up to it.
func (t *Tail) dropOldest() {
	e := &t.ring[t.start]
	t.base = e.GSeq
	t.size -= eventSize(e)
	*e = agentbridge.Event{}
	t.start = (t.start + 1) % len(t.ring)
	t.n--
}

func (t *Tail) headLocked() int64 {
	if t.n == 0 {
		return t.base
	}
	return t.ring[(t.start+t.n-1)%len(t.ring)].GSeq
}

// Head returns the gseq of the last event committed through the tail, and
// false when the tail covers nothing yet. Every event up to it is
// committed, so a reader that takes Head before querying the database
// has read at least that far.
func (t *Tail) Head() (int64, bool) {
	if t == nil {
		return 0, false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.headLocked(), t.valid
}

// Since returns the events after gseq after that keep accepts (nil keeps
// all), in gseq order, at most limit of them (no cap when limit ≤ 0), and the gseq up to which it
// looked: the last event it returned when it stopped at limit, else the
// tail's head (or after, when that is further). ok is false when the tail
// does not hold every event after after: read the database then. A nil
// Tail holds nothing.
func (t *Tail) Since(after int64, limit int, keep func(*agentbridge.Event) bool) (evs []agentbridge.Event, through int64, ok bool) {
	if t == nil {
		return nil, after, false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if !t.valid || after < t.base {
		return nil, after, false
	}
	through = max(after, t.headLocked())
	if limit <= 0 {
		limit = t.n + 1
	}
	// Held gseqs ascend from base+1, mostly without gaps: start the scan
	// at after's position when it is where a gapless ring puts it.
	i := 0
	if k := after - t.base; k > 0 && k <= int64(t.n) && t.at(int(k)-1).GSeq == after {
		i = int(k)
	}
	for ; i < t.n; i++ {
		e := t.at(i)
		if e.GSeq <= after || (keep != nil && !keep(e)) {
			continue
		}
		if len(evs) == limit {
			return evs, evs[len(evs)-1].GSeq, true
		}
		evs = append(evs, *e)
	}
	return evs, through, true
}

func (t *Tail) at(i int) *agentbridge.Event { return &t.ring[(t.start+i)%len(t.ring)] }
