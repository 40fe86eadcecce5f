package coordinator

import (
	"context"
	"errors"
	"testing"

	"github.com/agent-bridge/agent-bridge/adapters"
)

// A cancel that finds no run registered (its worker took the job but has
// not registered it yet) is kept for the registration; one that finds the
// run stops it. The registry keeps the last maxMissedCancels of them.
func TestRunRegistryKeepsMissedCancels(t *testing.T) {
	r := newRunRegistry()
	r.cancel(7)
	if !r.add(7, func(error) {}) {
		t.Error("run 7 registered after its cancel: not reported cancelled")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	if r.add(8, cancel) {
		t.Error("run 8 reported cancelled, never was")
	}
	r.cancel(8)
	if !errors.Is(context.Cause(ctx), adapters.ErrCancelled) {
		t.Errorf("registered run 8 not stopped by its cancel: cause %v", context.Cause(ctx))
	}
	for id := int64(100); id < 100+maxMissedCancels; id++ {
		r.cancel(id)
	}
	if r.add(7, func(error) {}) {
		t.Error("the oldest missed cancel is still kept past the bound")
	}
	if !r.add(100+maxMissedCancels-1, func(error) {}) {
		t.Error("the newest missed cancel is lost")
	}
	if len(r.missed) != maxMissedCancels || len(r.missedSet) != maxMissedCancels {
		t.Errorf("kept %d (%d indexed) missed cancels, want %d", len(r.missed), len(r.missedSet), maxMissedCancels)
	}
}
