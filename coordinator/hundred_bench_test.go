package coordinator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator"
)

// BenchmarkHundredTriggers posts one trigger to each of 100 threads at
// once, each answered by an adapter that takes 1 s, with max_concurrency
// 100, and reports the time from the first POST to the last reply seen on
// the global stream (issue 24: all replied within 1.2 s).
func BenchmarkHundredTriggers(b *testing.B) {
	const n = 100
	s := startStack(b, func(c *coordinator.Config) { c.MaxConcurrency, c.MaxInvocationsPerMinute = n, 0 })
	threads := make([]string, n)
	for i := range threads {
		threads[i] = s.thread(fmt.Sprintf("hundred %d", i))
		s.invite(threads[i], "alice", agentbridge.Profile{})
	}
	ctx := context.Background()
	var worst time.Duration
	b.ResetTimer()
	for range b.N {
		head, err := s.cl.Head(ctx)
		if err != nil {
			b.Fatal(err)
		}
		st, err := s.cl.StreamAll(ctx, head)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var mu sync.Mutex
		trig := map[string]bool{}
		var wg sync.WaitGroup
		for _, th := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, err := s.cl.Append(ctx, th, agentbridge.EventInput{From: "user", To: "alice", Content: jsonString("fake:sleep=1s")}, "")
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				trig[e.ID] = true
				mu.Unlock()
			}()
		}
		replied := 0
		for replied < n {
			it, err := st.Next()
			if err != nil {
				b.Fatal(err)
			}
			if it.Event == nil || it.Event.From != "alice" {
				continue
			}
			replied++
		}
		took := time.Since(start)
		wg.Wait()
		st.Close()
		if len(trig) != n {
			b.Fatalf("%d of %d triggers appended", len(trig), n)
		}
		worst = max(worst, took)
	}
	b.ReportMetric(worst.Seconds(), "worst-s/100-triggers")
}
