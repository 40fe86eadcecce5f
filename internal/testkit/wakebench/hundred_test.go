package wakebench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// BenchmarkHundredTriggersFromOutside is coordinator's
// BenchmarkHundredTriggers with serve and coordinator as the two processes
// a user runs: one trigger to each of 100 threads posted at once over
// HTTP, each answered by the fake adapter sleeping 1 s, max_concurrency
// 100, timed from the first POST to the last reply on the global stream
// (issue 24: all replied within 1.2 s).
func BenchmarkHundredTriggersFromOutside(b *testing.B) {
	const n = 100
	ctx := context.Background()
	d := startDaemons(b, map[string]any{"max_concurrency": n})
	threads := make([]string, n)
	for i := range threads {
		th, err := d.cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: fmt.Sprintf("hundred %d", i)})
		if err != nil {
			b.Fatal(err)
		}
		threads[i] = th.ID
		inviteAlice(b, d.cl, th.ID)
	}
	var worst time.Duration
	b.ResetTimer()
	for range b.N {
		head, err := d.cl.Head(ctx)
		if err != nil {
			b.Fatal(err)
		}
		st, err := d.cl.StreamAll(ctx, head)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for _, th := range threads {
			wg.Go(func() {
				if _, err := d.cl.Append(ctx, th, agentbridge.EventInput{From: "user", To: "alice", Content: []byte(`"fake:sleep=1s"`)}, ""); err != nil {
					b.Error(err)
				}
			})
		}
		for replied := 0; replied < n; {
			it := testutil.Within(b, time.Minute, "the replies", func() { st.Close() }, st.Next)
			if it.Event != nil && it.Event.From == "alice" {
				replied++
			}
		}
		worst = max(worst, time.Since(start))
		wg.Wait()
		st.Close()
	}
	b.ReportMetric(worst.Seconds(), "worst-s/100-triggers")
}
