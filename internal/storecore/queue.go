package storecore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// The writer queue both stores use: callers queue a request and wait for
// its answer; one goroutine takes the queued requests in batches and
// commits each batch in one transaction. What a batch does is the store's.

// ErrClosed is returned by writes attempted after a store's Close.
var ErrClosed = errors.New("event store is closed")

// Enqueue queues r on reqs, unless ctx is done or done (the store's Close)
// is closed first: then r is not queued and the error says why. It tries
// without waiting first: the queue almost always has room, and only
// waiting needs ctx.Done, whose channel a request's context allocates on
// first use.
func Enqueue[R any](ctx context.Context, reqs chan<- R, done <-chan struct{}, r R) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write not queued: %w", err)
	}
	select {
	case <-done:
		return ErrClosed
	default:
	}
	select {
	case reqs <- r:
		return nil
	default:
	}
	select {
	case reqs <- r:
		return nil
	case <-done:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("write not queued: %w", ctx.Err())
	}
}

// Await waits for the answer to a queued request. The writer answers every
// request it took before it stops, so once stopped is closed an answer is
// either buffered in reply or will never come (closed is returned then).
func Await[T any](reply <-chan T, stopped <-chan struct{}, closed T) T {
	select {
	case resp := <-reply:
		return resp
	case <-stopped:
		select {
		case resp := <-reply:
			return resp
		default:
			return closed
		}
	}
}

// Take appends queued requests to batch without blocking, up to max.
func Take[R any](reqs <-chan R, batch []R, max int) []R {
	for len(batch) < max {
		select {
		case r := <-reqs:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// RunWriter is a writer goroutine's loop: it blocks for one request and
// hands it to next, which gathers a batch around it and commits it. Once
// done is closed it commits (with commit) what is still queued, in batches
// of at most max, then closes stopped and returns.
func RunWriter[R any](reqs <-chan R, done <-chan struct{}, stopped chan<- struct{}, max int, next func(first R), commit func([]R)) {
	defer close(stopped)
	for {
		select {
		case first := <-reqs:
			next(first)
		case <-done:
			for {
				batch := Take(reqs, nil, max)
				if len(batch) == 0 {
					return
				}
				commit(batch)
			}
		}
	}
}

// DroppedBeforeCommit is the answer to a request whose ctx ended before
// its batch began: nothing of it is written.
func DroppedBeforeCommit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write dropped before commit: %w", err)
	}
	return nil
}

// KeepLive appends to live the requests of reqs whose ctx is still live
// and answers each of the others, through drop, with
// DroppedBeforeCommit's error: nothing of them is written.
func KeepLive[R any](live, reqs []R, ctxOf func(R) context.Context, drop func(R, error)) []R {
	for _, r := range reqs {
		if err := DroppedBeforeCommit(ctxOf(r)); err != nil {
			drop(r, err)
			continue
		}
		live = append(live, r)
	}
	return live
}

// CommitFailed wraps the error of a failed group commit of n requests and
// logs it: at debug level when unreachable says the database cannot be
// used (the store's outage tracker logs an outage once), as an error
// otherwise. Every request of the batch gets the returned error.
func CommitFailed(log *slog.Logger, unreachable func(error) bool, err error, n int) error {
	err = fmt.Errorf("group commit: %w", err)
	if unreachable(err) {
		log.Debug("group commit failed: database unusable", "requests", n, "err", err)
	} else {
		log.Error("group commit failed", "requests", n, "err", err)
	}
	return err
}

// Notifier wakes a store's readers after a commit: Notify returns a
// channel that the next Wake closes. Readers grab it before querying, so a
// commit between their query and their wait still wakes them. The zero
// value is not usable; use NewNotifier. It is safe for concurrent use.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewNotifier returns a Notifier whose channel is open.
func NewNotifier() *Notifier { return &Notifier{ch: make(chan struct{})} }

// Notify returns the channel the next Wake closes.
func (n *Notifier) Notify() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

// Wake closes the current channel and installs a fresh one.
func (n *Notifier) Wake() {
	n.mu.Lock()
	close(n.ch)
	n.ch = make(chan struct{})
	n.mu.Unlock()
}
