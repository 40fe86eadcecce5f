package cache

import (
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Presence keeps the presence of the threads the coordinator has
// built a roster for, fed by the presence changes on the global stream it
// follows, so that building a payload does not wait for a presence read on
// the bridge (a loopback round trip on every trigger's way to its adapter).
//
// A thread is read from the bridge once, then kept current from the stream.
// The stream is the only feed, so everything is forgotten when it was not
// live: at each (re)connection, and for as long as the coordinator
// long-polls (which carries events only).
type Presence struct {
	mu   sync.Mutex
	live bool // an SSE connection is open, so changes arrive
	ttl  time.Duration
	// threads holds, per thread read since the connection opened, each
	// participant's last reported state and when it was reported.
	threads map[string]map[string]presenceSeen
	// pending holds the changes seen for a thread while it is being read
	// from the bridge: the stream may bring a change the read already
	// answered or one it missed, and applying them in order after the
	// read gives the latest either way.
	pending map[string][]agentbridge.Presence
	gen     int // counts connections, so that a read begun before one is dropped
	now     func() time.Time
}

// presenceSeen is one participant's last report in a thread.
type presenceSeen struct {
	state string
	at    time.Time
}

// maxPresenceThreads bounds the cache; past it the cache starts over, and
// threads are read from the bridge again as they are met.
const maxPresenceThreads = 512

// NewPresence returns an empty Presence on the clock now.
func NewPresence(now func() time.Time) *Presence {
	return &Presence{threads: map[string]map[string]presenceSeen{}, pending: map[string][]agentbridge.Presence{}, now: now}
}

// Opened forgets everything: changes may have been missed while no
// connection was open. stream says whether the new connection carries
// presence changes.
func (p *Presence) Opened(stream bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live = stream
	p.gen++
	clear(p.threads)
	clear(p.pending)
}

// Change applies a presence change from the stream to a thread the cache
// holds; the others are read when first needed.
func (p *Presence) Change(pr agentbridge.Presence) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.threads[pr.Thread]; ok {
		m[pr.ID] = presenceSeen{state: pr.State, at: p.now()}
	} else if q, ok := p.pending[pr.Thread]; ok {
		p.pending[pr.Thread] = append(q, pr)
	}
}

// Begin marks a thread as being read from the bridge and returns the token
// that Fill needs.
func (p *Presence) Begin(thread string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pending[thread]; !ok && p.live {
		p.pending[thread] = nil
	}
	return p.gen
}

// States returns the fresh states of a thread's participants, and false
// when the cache does not hold the thread (or the stream is not live).
func (p *Presence) States(thread string) (map[string]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.threads[thread]
	if !ok || !p.live || p.ttl <= 0 {
		return nil, false
	}
	now := p.now()
	out := make(map[string]string, len(m))
	for id, s := range m {
		if now.Sub(s.at) <= p.ttl {
			out[id] = s.state
		}
	}
	return out, true
}

// Fill stores a thread's presence as read from the bridge, with the
// bridge's TTL; a report's age is taken from its updated_at (both daemons
// share a clock on one machine; a report from the future counts as new).
// It is dropped when the stream is not live, since no change would reach
// it, and when a connection opened since Begin gave the token.
func (p *Presence) Fill(gen int, thread string, list []agentbridge.Presence, ttl time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	changes, ok := p.pending[thread]
	delete(p.pending, thread)
	if !ok || gen != p.gen || !p.live || ttl <= 0 {
		return
	}
	if len(p.threads) >= maxPresenceThreads {
		clear(p.threads)
	}
	p.ttl = ttl
	now := p.now()
	m := make(map[string]presenceSeen, len(list))
	for _, pr := range list {
		if pr.Stale {
			continue
		}
		at, err := agentbridge.ParseTime(pr.UpdatedAt)
		if err != nil || at.After(now) {
			at = now
		}
		m[pr.ID] = presenceSeen{state: pr.State, at: at}
	}
	for _, pr := range changes {
		m[pr.ID] = presenceSeen{state: pr.State, at: now}
	}
	p.threads[thread] = m
}
