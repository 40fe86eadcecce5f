package bridge

import (
	"fmt"
	"testing"
)

// BenchmarkThreadHubWake is the hub's share of one commit to one thread
// while 2,000 other threads have streams open: it should not grow with
// the number of followed threads (docs/performance.md).
func BenchmarkThreadHubWake(b *testing.B) {
	h := &threadHub{threads: map[string]*threadWatch{}}
	for i := range 2000 {
		h.threads[fmt.Sprintf("t%d", i)] = &threadWatch{ch: make(chan struct{}), subs: 1}
	}
	seen := map[string]bool{"t7": true}
	for b.Loop() {
		h.wake(seen)
	}
}
