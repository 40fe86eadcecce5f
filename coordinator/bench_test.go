package coordinator_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
	"github.com/agent-bridge/agent-bridge/internal/testkit/wakebench"
)

// percentile returns the p-th percentile (0..100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

// BenchmarkWakeLatency measures the time from the POST of a trigger to its
// reply arriving on a thread stream, with the compiled fake adapter. In the
// same run it measures the floor: one fork/exec of the fake adapter plus
// two loopback HTTP round trips to the bridge.
func BenchmarkWakeLatency(b *testing.B) {
	s := startStack(b, func(c *config.Config) { c.MaxInvocationsPerMinute = 0 })
	th := s.thread("latency")
	s.invite(th, "alice", agentbridge.Profile{})
	ctx := context.Background()
	evs := s.events(th)
	st, err := s.cl.Stream(ctx, th, evs[len(evs)-1].Seq)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		trig := s.say(th, "alice", fmt.Sprintf("ping %d", i))
		for {
			it := testutil.Within(b, time.Minute, "a reply", func() { st.Close() }, st.Next)
			if it.Event != nil && it.Event.Meta.ReplyTo == trig.ID {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	floor, err := wakebench.Floor(context.Background(), fakePath, s.cl, max(b.N, 20))
	if err != nil {
		b.Fatal(err)
	}
	p50 := percentile(lat, 50)
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(floor.Microseconds())/1000, "floor-p50-ms")
	b.ReportMetric(float64(p50)/float64(floor), "p50/floor")
}

// BenchmarkParallelTriggers posts one trigger to each of 10 threads whose
// adapter takes 1 s, and measures until all 10 replies are in
// (max_concurrency raised from its default 8 to 10, so all run at once).
func BenchmarkParallelTriggers(b *testing.B) {
	s := startStack(b, func(c *config.Config) { c.MaxConcurrency, c.MaxInvocationsPerMinute = 10, 0 })
	const n = 10
	threads := make([]string, n)
	for i := range threads {
		threads[i] = s.thread(fmt.Sprintf("parallel %d", i))
		s.invite(threads[i], "alice", agentbridge.Profile{})
	}
	var worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		trig := make([]agentbridge.Event, n)
		var wg sync.WaitGroup
		for j := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, err := s.cl.Append(context.Background(), threads[j], agentbridge.EventInput{From: "user", To: "alice", Content: jsonString("fake:sleep=1s")}, "")
				if err != nil {
					b.Error(err)
				}
				trig[j] = e
			}()
		}
		wg.Wait()
		for j, e := range trig {
			testutil.WaitFor(b, waitLong, "parallel reply", func() bool { return len(s.repliesTo(threads[j], e.ID)) > 0 })
		}
		worst = max(worst, time.Since(start))
	}
	b.ReportMetric(worst.Seconds(), "worst-s/10-triggers")
}

// BenchmarkCPUPerInvocation measures the coordinator's own CPU time per
// invocation (getrusage of this process before and after), with the
// bridge in a separate process so that its CPU is not counted; the fake
// adapter's CPU is reported apart (children).
func BenchmarkCPUPerInvocation(b *testing.B) {
	ensureFake(b)
	bin, err := testutil.GoBuild(context.Background(), "./cmd/agent-bridge", b.TempDir(), false)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	db := filepath.Join(b.TempDir(), "bridge.db")
	serve := exec.Command(bin, "serve", "--addr", addr, "--db", db)
	serve.Env = append(os.Environ(), "BRIDGE_TOKEN=")
	if err := serve.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
	}()
	url := "http://" + addr
	testutil.WaitFor(b, waitLong, "the bridge to answer", func() bool {
		_, err := client.New(url).Ping(context.Background())
		return err == nil
	})
	// The person token serve made next to its database.
	token, err := os.ReadFile(filepath.Join(filepath.Dir(db), "token"))
	if err != nil {
		b.Fatal(err)
	}
	cl := client.New(url, client.WithToken(strings.TrimSpace(string(token))))
	s := &stack{t: b, dir: b.TempDir(), cl: cl, cfg: testConfig(url)}
	s.cfg.BridgeToken = strings.TrimSpace(string(token))
	s.cfg.MaxInvocationsPerMinute = 0
	s.fakeDir = filepath.Join(s.dir, "fake")
	if err := os.MkdirAll(s.fakeDir, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Setenv("FAKE_ADAPTER_DIR", s.fakeDir)
	s.startCoordinator()
	defer s.stopCoordinator()
	th := s.thread("cpu")
	s.invite(th, "alice", agentbridge.Profile{})
	warm := s.say(th, "alice", "warm up")
	s.waitReplies(th, warm.ID, 1)
	var self0, kids0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids0)
	b.ResetTimer()
	var last agentbridge.Event
	for i := 0; i < b.N; i++ {
		last = s.say(th, "alice", fmt.Sprintf("cpu %d", i))
	}
	s.waitReplies(th, last.ID, 1)
	b.StopTimer()
	var self1, kids1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids1)
	cpu := func(a, z syscall.Rusage) time.Duration {
		return time.Duration(z.Utime.Nano()+z.Stime.Nano()-a.Utime.Nano()-a.Stime.Nano()) * time.Nanosecond
	}
	b.ReportMetric(float64(cpu(self0, self1).Microseconds())/float64(b.N)/1000, "coord-cpu-ms/inv")
	b.ReportMetric(float64(cpu(kids0, kids1).Microseconds())/float64(b.N)/1000, "adapter-cpu-ms/inv")
}
