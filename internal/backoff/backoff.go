// Package backoff is the one capped exponential backoff with jitter of the
// module: the client's follow loop and reconnects (client.Backoff is this
// type), the coordinator's calls to the bridge and the PostgreSQL store's
// commit listener pace their retries with it.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is capped exponential backoff with jitter. The zero value doubles
// from DefaultMin up to DefaultMax; Next gives a delay between half and all
// of the current step, so that many clients do not retry in step.
type Backoff struct {
	// Min and Max bound the step; zero means the default.
	Min, Max time.Duration
	n        int
}

// The zero Backoff's bounds.
const (
	DefaultMin = 100 * time.Millisecond
	DefaultMax = 10 * time.Second
)

// Next returns the delay before the next attempt and lengthens the step.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = DefaultMin
	}
	if hi <= 0 {
		hi = DefaultMax
	}
	d := min(lo<<min(b.n, 20), hi)
	b.n++
	return d/2 + rand.N(d/2+1)
}

// Reset starts the steps again from Min, after an attempt that worked.
func (b *Backoff) Reset() { b.n = 0 }

// Sleep waits for d or until ctx ends; it reports whether the full time
// passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
