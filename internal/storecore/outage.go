package storecore

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Outage turns a store's "the database cannot be reached" errors into the
// client's unavailable error (HTTP 503 with Retry-After), and logs an
// outage once when it starts and once when it ends, however many requests
// fail in between (contract 6.3). Each store decides which of its errors
// mean an unreachable database (its Unreachable function). It is safe for
// concurrent use; its cost on a request while the database answers is one
// atomic load.
type Outage struct {
	log         *slog.Logger
	unreachable func(error) bool
	// onStart runs once when an outage begins (the PostgreSQL store drops
	// its pooled connections, which a restarted server no longer knows).
	onStart func()

	down atomic.Bool
	mu   sync.Mutex
	// since, ended and failed are guarded by mu: when the outage on
	// began, when the last one ended, how many requests it refused.
	since, ended time.Time
	failed       int
	// byWrite, guarded by mu, is set while the outage on was begun by a
	// write: reads that succeed meanwhile (a full disk still serves them)
	// do not end it, only a write does.
	byWrite bool
	// refused, guarded by mu, is the error of the last write refused for
	// an unreachable database, "" once a write succeeded since.
	refused string
}

// NewOutage returns a tracker that logs to log and asks unreachable which
// errors mean the database cannot be reached; onStart (may be nil) runs
// when an outage begins.
func NewOutage(log *slog.Logger, unreachable func(error) bool, onStart func()) *Outage {
	return &Outage{log: log, unreachable: unreachable, onStart: onStart}
}

// RetryAfterSeconds is what the bridge answers in Retry-After during an
// outage: the store notices the database's return on the next request, so
// a client retrying this soon is served within a second of it.
const RetryAfterSeconds = 1

// Unavailable is the client's error for an unreachable database.
func Unavailable() *agentbridge.Error {
	return agentbridge.Errorf(agentbridge.ECodeUnavailable,
		"The event store's database cannot be reached right now; nothing was stored. Try again in a moment.")
}

// Check passes err, the result of a request that started at started,
// through, except that an error meaning the database cannot be reached
// becomes Unavailable (and starts an outage if none is on). A nil err is a
// database that answered, which ends an outage. Only requests that started
// after an outage began end it, and only those that started after the last
// one ended start a new one: a slow request finishing across the edge
// must not log a second outage.
func (o *Outage) Check(started time.Time, err error) error {
	return o.check(started, err, false)
}

// CheckWrite is Check for a request that writes (an append, a receipt, a
// suggestion): a refusal also marks the store as refusing writes
// (WritesRefused) until a write succeeds, and an outage it begins is ended
// only by a write, since reads go on while writes fail (a full disk).
func (o *Outage) CheckWrite(started time.Time, err error) error {
	return o.check(started, err, true)
}

func (o *Outage) check(started time.Time, err error, write bool) error {
	if err == nil {
		if o.down.Load() || (write && o.refusing()) {
			o.end(started, write)
		}
		return nil
	}
	if !o.unreachable(err) {
		return err
	}
	o.start(started, err, write)
	return Unavailable()
}

// WritesRefused returns the error of the last write refused because the
// database could not be reached, and whether no write has succeeded since:
// GET /healthz answers 503 with it.
func (o *Outage) WritesRefused() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused, o.refused != ""
}

func (o *Outage) refusing() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused != ""
}

// Down reports whether an outage is on (for tests and status reports).
func (o *Outage) Down() bool { return o.down.Load() }

func (o *Outage) start(started time.Time, err error, write bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failed++
	if write {
		o.refused = err.Error()
	}
	if o.down.Load() || started.Before(o.ended) {
		return
	}
	o.since, o.failed, o.byWrite = time.Now(), 1, write
	o.down.Store(true)
	o.log.Error("database unreachable: answering 503 unavailable until it is back", "err", err)
	if o.onStart != nil {
		o.onStart()
	}
}

func (o *Outage) end(started time.Time, write bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if write {
		o.refused = ""
	}
	if !o.down.Load() || started.Before(o.since) || (o.byWrite && !write) {
		return
	}
	o.down.Store(false)
	o.ended = time.Now()
	o.log.Info("database reachable again: serving", "outage", time.Since(o.since).Round(time.Millisecond).String(), "refused_requests", o.failed)
}
