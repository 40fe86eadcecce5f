package wakebench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/agent-bridge/agent-bridge/client"
)

// Floor is the p50 of n rounds of one fork/exec of the fake adapter at
// fake (payload on stdin, reply read) plus two loopback HTTP round trips
// to the bridge behind cl: the least a coordinator must spend on a
// trigger. Both wake benchmarks (this package's and coordinator's
// in-process one) report it beside their latency.
func Floor(ctx context.Context, fake string, cl *client.Client, n int) (time.Duration, error) {
	return FloorAfterGaps(ctx, fake, cl, make([]time.Duration, n))
}

// FloorAfterGaps is Floor with one round after each of gaps, idle before
// it: the floor under the conditions a trigger meets after an idle gap
// (processes and processors asleep), for a benchmark that measures its
// triggers after such gaps.
func FloorAfterGaps(ctx context.Context, fake string, cl *client.Client, gaps []time.Duration) (time.Duration, error) {
	payload, err := json.Marshal(map[string]any{"event_id": "bench", "content": "ping", "participant": map[string]any{"id": "alice"}})
	if err != nil {
		return 0, err
	}
	out := make([]time.Duration, 0, len(gaps))
	for _, gap := range gaps {
		time.Sleep(gap)
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, fake)
		cmd.Stdin = bytes.NewReader(payload)
		cmd.Env = append(os.Environ(), "FAKE_ADAPTER_DIR=")
		if _, err := cmd.Output(); err != nil {
			return 0, fmt.Errorf("fake adapter %s: %w", fake, err)
		}
		for range 2 {
			if _, err := cl.Head(ctx); err != nil {
				return 0, fmt.Errorf("bridge round trip: %w", err)
			}
		}
		out = append(out, time.Since(t0))
	}
	if len(out) == 0 {
		return 0, errors.New("floor: no rounds asked for")
	}
	slices.Sort(out)
	return out[len(out)/2], nil
}
