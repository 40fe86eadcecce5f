package coordinator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// BenchmarkHundredTriggers posts one trigger to each of 100 threads at
// once, each answered by an adapter that takes 1 s, with max_concurrency
// 100, and reports the time from the first POST to the last reply seen on
// the global stream (issue 24: all replied within 1.2 s), and the floor:
// the same 100 adapters started at once without a bridge or coordinator.
func BenchmarkHundredTriggers(b *testing.B) {
	const n = 100
	s := startStack(b, func(c *config.Config) { c.MaxConcurrency, c.MaxInvocationsPerMinute = n, 0 })
	// The adapters keep no record of their runs (nothing here counts
	// them), as in the floor this is compared with.
	b.Setenv("FAKE_ADAPTER_DIR", "")
	threads := make([]string, n)
	for i := range threads {
		threads[i] = s.thread(fmt.Sprintf("hundred %d", i))
		s.invite(threads[i], "alice", agentbridge.Profile{})
	}
	ctx := context.Background()
	var worst, lastAppend, lastQueued, lastStart, lastEnd time.Duration
	var self, children time.Duration // CPU of this process (bridge, coordinator, client) and of the adapters
	b.ResetTimer()
	for range b.N {
		self0, children0 := testutil.ProcessCPU(b), testutil.ChildrenCPU(b)
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
				if ts, err := time.Parse(agentbridge.TimeLayout, e.TS); err == nil {
					lastAppend = max(lastAppend, ts.Sub(start))
				}
				mu.Unlock()
			}()
		}
		replied := 0
		for replied < n {
			it := testutil.Within(b, time.Minute, "the replies", func() { st.Close() }, st.Next)
			if it.Event == nil || it.Event.From != "alice" {
				continue
			}
			replied++
		}
		took := time.Since(start)
		wg.Wait()
		st.Close()
		self, children = self+testutil.ProcessCPU(b)-self0, children+testutil.ChildrenCPU(b)-children0
		if len(trig) != n {
			b.Fatalf("%d of %d triggers appended", len(trig), n)
		}
		worst = max(worst, took)
		lastQueued, lastStart, lastEnd = max(lastQueued, stageAfter(b, s, trig, start, "queued")), max(lastStart, stageAfter(b, s, trig, start, "started")), max(lastEnd, stageAfter(b, s, trig, start, "finished"))
	}
	b.ReportMetric(worst.Seconds(), "worst-s/100-triggers")
	// Where the time went: the last trigger stored, the last run queued, the last adapter started
	// and the last adapter ended, after the first POST (the ledger's
	// timestamps).
	b.ReportMetric(lastAppend.Seconds(), "last-appended-s")
	b.ReportMetric(lastQueued.Seconds(), "last-queued-s")
	b.ReportMetric(lastStart.Seconds(), "last-started-s")
	b.ReportMetric(lastEnd.Seconds(), "last-finished-s")
	// The CPU each round cost, the time that two cores share: the bridge,
	// the coordinator and this client in this process, and the adapters
	// (those reaped by the end of the round).
	b.ReportMetric(float64(self.Milliseconds())/float64(b.N), "cpu-ms/round")
	b.ReportMetric(float64(children.Milliseconds())/float64(b.N), "adapters-cpu-ms/round")
	b.StopTimer()
	b.ReportMetric(hundredFloor(b, n).Seconds(), "floor-s")
}

// hundredFloor is the least a round can take here: n of the same adapters,
// with the same request, started at once by adapters.Run (as the
// coordinator starts them) from this process, timed to the last one's end.
func hundredFloor(b *testing.B, n int) time.Duration {
	payload := []byte(`{"event_id":"floor","content":"fake:sleep=1s","participant":{"id":"alice"}}`)
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res := adapters.Run(context.Background(), adapters.Spec{Command: []string{fakePath}, Timeout: time.Minute}, payload, nil)
			if !res.OK() {
				b.Errorf("floor adapter: exit %d, %v: %s", res.ExitCode, res.StartErr, res.StderrTail)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// stageAfter is how long after start the last of the triggers' runs
// reached a stage, by the ledger's timestamps.
func stageAfter(b *testing.B, s *stack, trig map[string]bool, start time.Time, stage string) time.Duration {
	all, err := s.db.Invocations(context.Background(), ledger.Filter{Limit: 10000})
	if err != nil {
		b.Fatal(err)
	}
	var last time.Duration
	for _, inv := range all {
		if !trig[inv.TriggerID] {
			continue
		}
		ts := map[string]string{"queued": inv.QueuedAt, "started": inv.ProcessStartedAt, "finished": inv.FinishedAt}[stage]
		t, err := time.Parse(agentbridge.TimeLayout, ts)
		if err != nil {
			b.Fatalf("%s of invocation %d: %v", stage, inv.ID, err)
		}
		last = max(last, t.Sub(start))
	}
	return last
}
