package storecore

import (
	"encoding/json"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestStateCache: a snapshot is decoded once, normalized, and told apart
// by thread and seq; the cache starts afresh past its bound.
func TestStateCache(t *testing.T) {
	var c StateCache
	raw := []byte(`{"paused":true}`)
	st, err := c.Decode("t", 3, raw)
	if err != nil || !st.Paused || st.Muted == nil {
		t.Fatalf("Decode = %+v %v, want paused and normalized", st, err)
	}
	if st, err := c.Decode("t", 3, []byte(`not json`)); err != nil || !st.Paused {
		t.Errorf("a second Decode of the same snapshot read its bytes: %+v %v", st, err)
	}
	if _, err := c.Decode("u", 3, []byte(`not json`)); err == nil {
		t.Error("another thread's snapshot came from the cache")
	}
	for i := range maxCachedStates + 1 {
		b, _ := json.Marshal(agentbridge.ThreadState{})
		if _, err := c.Decode("bulk", int64(i), b); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.m); n > maxCachedStates {
		t.Errorf("%d states cached, want at most %d", n, maxCachedStates)
	}
}
