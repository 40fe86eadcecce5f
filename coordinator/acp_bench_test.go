package coordinator_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// promptTimes returns the fake ACP agent's session/prompt arrival times,
// in order.
func (s *acpStack) promptTimes() []time.Time {
	var out []time.Time
	for _, c := range s.calls() {
		f := strings.Split(c, "|")
		if len(f) == 4 && f[1] == "session/prompt" {
			n, _ := strconv.ParseInt(f[3], 10, 64)
			out = append(out, time.Unix(0, n))
		}
	}
	return out
}

// BenchmarkACPTurnOverhead measures a turn's overhead on a warm ACP agent:
// from the trigger's append (its ts, stamped by the bridge before the
// commit) to the session/prompt written to the agent's stdin (warm-p50),
// and to its arrival in the fake agent (received-p50, the fake's clock, the
// same machine's). The first turn of each of a few threads is
// measured too: a cold start of the agent (process, initialize,
// session/new) on the same path.
func BenchmarkACPTurnOverhead(b *testing.B) {
	s := startACPStack(b, nil, func(c *config.Config) { c.MaxInvocationsPerMinute = 0 })
	var mu sync.Mutex
	var written []time.Time
	coordinator.SetACPPromptHook(s.coord, func(t time.Time) {
		mu.Lock()
		written = append(written, t)
		mu.Unlock()
	})
	ctx := context.Background()
	evs := s.events(s.thread)
	st, err := s.cl.Stream(ctx, s.thread, evs[len(evs)-1].Seq)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ask := func(text string) agentbridge.Event {
		trig := s.ask(text)
		for {
			it := testutil.Within(b, time.Minute, "a reply", func() { st.Close() }, st.Next)
			if it.Event != nil && it.Event.Meta.ReplyTo == trig.ID {
				return trig
			}
		}
	}
	ask("warm up")
	triggers := make([]agentbridge.Event, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		triggers = append(triggers, ask(fmt.Sprintf("turn %d", i)))
	}
	b.StopTimer()
	mu.Lock()
	times := slices.Clone(written[1:])
	mu.Unlock()
	recv := s.promptTimes()[1:]
	if len(times) != len(triggers) || len(recv) != len(triggers) {
		b.Fatalf("%d prompts written, %d received, for %d triggers", len(times), len(recv), len(triggers))
	}
	lat := make([]time.Duration, len(times))
	got := make([]time.Duration, len(times))
	for i, tr := range triggers {
		ts, err := time.Parse(agentbridge.TimeLayout, tr.TS)
		if err != nil {
			b.Fatal(err)
		}
		lat[i] = times[i].Sub(ts)
		got[i] = recv[i].Sub(ts)
	}
	slices.Sort(lat)
	slices.Sort(got)
	b.ReportMetric(float64(percentile(lat, 50).Microseconds())/1000, "warm-p50-ms")
	b.ReportMetric(float64(percentile(lat, 99).Microseconds())/1000, "warm-p99-ms")
	b.ReportMetric(float64(percentile(got, 50).Microseconds())/1000, "received-p50-ms")

	// Cold: a new thread's first trigger starts a process.
	var cold []time.Duration
	for i := range 10 {
		th := s.stack.thread(fmt.Sprintf("cold %d", i))
		s.invite(th, "acpy", agentbridge.Profile{Client: "fake-acp"})
		trig := s.say(th, "acpy", "cold start")
		s.waitReplies(th, trig.ID, 1)
		mu.Lock()
		last := written[len(written)-1]
		mu.Unlock()
		ts, _ := time.Parse(agentbridge.TimeLayout, trig.TS)
		cold = append(cold, last.Sub(ts))
	}
	slices.Sort(cold)
	b.ReportMetric(float64(percentile(cold, 50).Microseconds())/1000, "cold-p50-ms")
}

// BenchmarkACPIdleClose measures the time from an idle agent's deadline
// (its turn's end as the ledger has it + acp_idle_s; the idle timer starts
// just before that end) to its process being gone, polled every 100 µs.
func BenchmarkACPIdleClose(b *testing.B) {
	const idle = 200 * time.Millisecond
	s := startACPStack(b, nil, func(c *config.Config) { c.ACPIdle = idle; c.MaxInvocationsPerMinute = 0 })
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		trig := s.ask(fmt.Sprintf("turn %d", i))
		inv := s.waitStatus(trig.ID, "acpy", "succeeded")
		ended, err := time.Parse(agentbridge.TimeLayout, inv.FinishedAt)
		if err != nil {
			b.Fatal(err)
		}
		for alive(inv.PID) {
			time.Sleep(100 * time.Microsecond)
		}
		lat = append(lat, time.Since(ended)-idle)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 50).Microseconds())/1000, "close-p50-ms")
}

// BenchmarkACPWarmRSS reports the resident memory of the test process (an
// in-process bridge and coordinator) before any agent and with 8 warm fake
// ACP agents, and the agents' own.
func BenchmarkACPWarmRSS(b *testing.B) {
	for i := 0; i < b.N; i++ {
		s := startACPStack(b, nil, func(c *config.Config) { c.MaxInvocationsPerMinute = 0 })
		before := rssKB(b, os.Getpid())
		var pids []int
		for j := range 8 {
			th := s.stack.thread(fmt.Sprintf("warm %d", j))
			s.invite(th, "acpy", agentbridge.Profile{Client: "fake-acp"})
			trig := s.say(th, "acpy", "hi")
			r := s.waitReplies(th, trig.ID, 1)[0]
			pid, _, _, _, _ := parseReply(b, r)
			pids = append(pids, pid)
		}
		testutil.WaitFor(b, waitLong, "8 warm agents", func() bool {
			for _, p := range pids {
				if !alive(p) {
					return false
				}
			}
			return true
		})
		after := rssKB(b, os.Getpid())
		agents := 0
		for _, p := range pids {
			agents += rssKB(b, p)
		}
		b.ReportMetric(float64(before)/1024, "rss-before-MB")
		b.ReportMetric(float64(after)/1024, "rss-8warm-MB")
		b.ReportMetric(float64(agents)/1024/8, "agent-rss-MB")
		s.stopCoordinator()
	}
}

// rssKB reads VmRSS of pid from /proc.
func rssKB(tb testing.TB, pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}
