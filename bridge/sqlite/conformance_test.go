package sqlite

import (
	"context"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
)

// TestConformance runs the behaviour every event store shares.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, humans agentbridge.Humans) agentbridge.EventStore {
		return openStore(t, Options{Humans: humans})
	})
}

// TestStats checks the counters /metrics reads: the shared suite knows
// nothing of them.
func TestStats(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	th := newThread(t, s, "t").ID
	req := agentbridge.AppendRequest{Thread: th, Input: msg("codex", "reply"), IdempotencyKey: "k"}
	for range 2 {
		if _, err := s.Append(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "missing", Input: msg("user", "x")}); err == nil {
		t.Fatal("append to a missing thread succeeded")
	}
	st := s.Stats()
	if st.Appends != 2 || st.Replayed != 1 || st.Rejected != 1 || st.Batches == 0 || st.Batches > 4 {
		t.Errorf("stats = %+v, want 2 appends, 1 replayed, 1 rejected", st)
	}
}
