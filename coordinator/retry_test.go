package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// TestRetry checks the one retry loop: transient errors are retried, a
// permanent one is returned at once, and the end of ctx stops it.
func TestRetry(t *testing.T) {
	c := deps{log: slog.New(slog.DiscardHandler)}
	transient := errors.New("connection refused")
	gone := &agentbridge.Error{Status: http.StatusNotFound, Code: agentbridge.ECodeNotFound}

	calls := 0
	err := c.retry(context.Background(), retrying{what: "test", permanent: client.Permanent}, func() error {
		calls++
		if calls < 3 {
			return transient
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("transient errors: err %v after %d calls, want nil after 3", err, calls)
	}

	calls = 0
	err = c.retry(context.Background(), retrying{what: "test", permanent: client.Permanent}, func() error {
		calls++
		return gone
	})
	if !errors.Is(err, gone) || calls != 1 {
		t.Errorf("permanent error: err %v after %d calls, want the 404 after 1", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = c.retry(ctx, retrying{what: "test"}, func() error {
		calls++
		cancel()
		return transient
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("ended ctx: err %v after %d calls, want context.Canceled after 1", err, calls)
	}
}
