package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// retrying says how one call to the bridge is retried: what it is (for the
// log line), the attributes naming its subject, the level of the line
// (Warn when zero), a cap on the wait (client.Backoff's when zero) and
// which errors no retry can help (none when nil).
type retrying struct {
	what      string
	attrs     []any
	level     slog.Level
	maxWait   time.Duration
	permanent func(error) bool
}

// retry calls f until it returns nil, an error r.permanent accepts, or ctx
// ends, waiting a capped, jittered backoff between attempts and logging
// each failure. It returns nil, the permanent error, or ctx's error. Every
// retry loop of the coordinator goes through it, so they back off, log and
// give up alike.
func (d deps) retry(ctx context.Context, r retrying, f func() error) error {
	var b client.Backoff
	level := r.level
	if level == 0 {
		level = slog.LevelWarn
	}
	for {
		err := f()
		if err == nil {
			return nil
		}
		if r.permanent != nil && r.permanent(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := b.Next()
		if r.maxWait > 0 {
			wait = min(wait, r.maxWait)
		}
		args := append(append([]any{}, r.attrs...), "err", err, "retry_in", wait.Round(time.Millisecond))
		d.log.Log(ctx, level, "cannot "+r.what+"; retrying", args...)
		if !client.Sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// bridgeStatus reports whether err is the bridge answering with status.
func bridgeStatus(err error, status int) bool {
	var ae *agentbridge.Error
	return errors.As(err, &ae) && ae.Status == status
}
