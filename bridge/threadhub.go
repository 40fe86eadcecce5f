package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// threadHub wakes a thread's streams only when that thread got events.
// Without it every thread stream would run its own query after every
// commit, so an append would cost one query per open stream, whatever its
// thread (with 2,000 idle streams, 400 appends take 8.1 s that way instead
// of 0.05 s). Instead one goroutine (run) reads the log after each commit, as a global
// stream does (from the store's tail when it holds the new events), and
// closes the channels of the threads it saw.
//
// Gap-free like the store's own notify (style lesson 6): a stream takes
// its thread's channel (watch) before it queries; an event committed after
// the query is read by run after the commit, which then closes that
// channel (or a later one the stream took after it).
type threadHub struct {
	mu      sync.Mutex
	threads map[string]*threadWatch
	// started is set once run is running; its cursor was read before any
	// stream could query, so run misses no event a stream waits for.
	started bool
	// closed is set by close: no reader starts after it.
	closed bool
	wg     sync.WaitGroup
}

// close stops the hub from starting its reader and waits for the reader
// to end (the server's context, cancelled before, ends it).
func (h *threadHub) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.wg.Wait()
}

// threadWatch is one thread's channel and how many streams follow it.
type threadWatch struct {
	ch   chan struct{}
	subs int
}

// subscribeThread registers a stream of thread; it starts the hub's reader on
// the first call (reading the head first, hence the error). unsubscribe
// must be called when the stream ends.
func (s *Server) subscribeThread(ctx context.Context, thread string) (unsubscribe func(), err error) {
	h := s.threadHub
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		// Close waits for the reader, which must not start now.
		return nil, errors.New("stream: the server is closing")
	}
	if !h.started {
		head, err := s.store.Head(ctx)
		if err != nil {
			return nil, fmt.Errorf("stream head: %w", err)
		}
		h.started = true
		h.wg.Add(1)
		go s.dispatchThreads(head)
	}
	w := h.threads[thread]
	if w == nil {
		w = &threadWatch{ch: make(chan struct{})}
		h.threads[thread] = w
	}
	w.subs++
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if w.subs--; w.subs == 0 {
			delete(h.threads, thread)
		}
	}, nil
}

// watch returns the channel closed at thread's next events; the thread
// must have a subscriber (the caller).
func (h *threadHub) watch(thread string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.threads[thread].ch
}

// wake closes the channels of the given threads, giving each a fresh one.
// It looks up the threads of the batch rather than walking every followed
// thread: a commit to one thread costs the same with 2,000 streams open.
func (h *threadHub) wake(threads map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range threads {
		if w := h.threads[id]; w != nil {
			close(w.ch)
			w.ch = make(chan struct{})
		}
	}
}

// dispatchRetry is how long the reader waits after a failed read before it
// tries again (a commit wakes it sooner).
const dispatchRetry = time.Second

// dispatchThreads follows the log from cursor until the server closes: one
// read of the tail, or else one query, per commit (per batch), whatever the
// number of streams. A failed
// read is retried from the same cursor (the streams wait meanwhile, as
// they would for a commit), logged once when it starts failing and once
// when it reads again.
func (s *Server) dispatchThreads(cursor int64) {
	h := s.threadHub
	defer h.wg.Done()
	ctx := s.ctx
	seen := map[string]bool{}
	failing := false
	for {
		wake := s.store.Notify()
		evs, _, ok := s.tail.Since(cursor, streamBatch, nil)
		var err error
		if !ok {
			evs, err = s.store.Events(ctx, cursor, streamBatch)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				failing = true
				s.log.Warn("thread streams cannot read the log; retrying", "err", err)
			}
			t := time.NewTimer(dispatchRetry)
			select {
			case <-wake:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			t.Stop()
			continue
		}
		if failing {
			failing = false
			s.log.Info("thread streams read the log again")
		}
		if len(evs) > 0 {
			clear(seen)
			for _, ev := range evs {
				seen[ev.Thread] = true
			}
			cursor = evs[len(evs)-1].GSeq
			h.wake(seen)
			if len(evs) == streamBatch {
				continue
			}
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}
