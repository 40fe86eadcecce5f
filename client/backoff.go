package client

import (
	"context"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/backoff"
)

// Backoff is capped exponential backoff with jitter, for anything that
// retries the bridge: the coordinator's follow loop and posts, and tail's
// reconnects share it. The zero value doubles from DefaultBackoffMin up to
// DefaultBackoffMax; Next gives a delay between half and all of the
// current step, so that many clients do not retry in step. It is
// internal/backoff's type, which the bridge's PostgreSQL store uses too.
type Backoff = backoff.Backoff

// The zero Backoff's bounds.
const (
	DefaultBackoffMin = backoff.DefaultMin
	DefaultBackoffMax = backoff.DefaultMax
)

// Sleep waits for d or until ctx ends; it reports whether the full time
// passed.
func Sleep(ctx context.Context, d time.Duration) bool { return backoff.Sleep(ctx, d) }
