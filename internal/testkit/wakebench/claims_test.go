package wakebench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// BenchmarkWakeTwoCoordinators measures what claiming a run at the bridge
// (contract 7.1) adds to a trigger's wake, from outside: serve and two
// coordinator processes, laptop and server, each with its own HOME, state
// file, status port and coordinator token. b.N triggers, each after an
// idle gap of 0–50 ms, go to alice and bob in turn, and the benchmark
// reports the p50 and p99 of the wake (the trigger's POST to its
// adapter's start, read from the record of the coordinator that ran it),
// the p50 of POST → reply on the thread's stream, and the floor of
// BenchmarkWakeFromOutside.
//
// With "one-each", laptop serves alice and server bob: each trigger is one
// coordinator's, as it was before claims, so a build without claims
// ($WAKEBENCH_BIN) runs the same triggers. With "both", both serve both
// agents and race for each claim, the loser ending its record elsewhere;
// before claims both would run every trigger, so that case has no
// "before".
func BenchmarkWakeTwoCoordinators(b *testing.B) {
	for _, layout := range []struct {
		name   string
		agents [2][]string // of laptop, of server
	}{
		{"one-each", [2][]string{{"alice"}, {"bob"}}},
		{"both", [2][]string{{"alice", "bob"}, {"alice", "bob"}}},
	} {
		b.Run(layout.name, func(b *testing.B) {
			br := startBridge(b)
			coords := []coordinator{
				br.startCoordinator("laptop", layout.agents[0], nil),
				br.startCoordinator("server", layout.agents[1], nil),
			}
			wakeTwo(b, br, coords)
		})
	}
}

// wakeTwo runs BenchmarkWakeTwoCoordinators's triggers against br, whose
// coordinators coords serve alice and bob.
func wakeTwo(b *testing.B, br *bridge, coords []coordinator) {
	ctx := context.Background()
	cl := br.cl
	th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "wake, two coordinators"})
	if err != nil {
		b.Fatal(err)
	}
	invite(b, cl, th.ID, "alice")
	st, err := cl.Stream(ctx, th.ID, invite(b, cl, th.ID, "bob"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	awaitReply := func(trig string) {
		for {
			it := testutil.Within(b, time.Minute, "a reply", func() { st.Close() }, st.Next)
			if it.Event != nil && it.Event.Meta.ReplyTo == trig {
				return
			}
		}
	}
	agents := []string{"alice", "bob"}
	post := func(i int) string {
		e, err := cl.Append(ctx, th.ID, agentbridge.EventInput{From: "user", To: agents[(i+2)%2],
			Content: json.RawMessage(fmt.Sprintf("%q", fmt.Sprintf("ping %d", i)))}, "")
		if err != nil {
			b.Fatal(err)
		}
		return e.ID
	}
	// A trigger to each agent first, so that both coordinators follow and
	// the adapter's binary is in the page cache.
	awaitReply(post(-2))
	awaitReply(post(-1))

	rng := rand.New(rand.NewPCG(1, 2))
	gaps := make([]time.Duration, b.N)
	for i := range gaps {
		gaps[i] = time.Duration(rng.IntN(51)) * time.Millisecond
	}
	posted := make(map[string]time.Time, b.N) // trigger id → its POST began
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		time.Sleep(gaps[i]) // the idle gap is the point of the benchmark
		b.StartTimer()
		t0 := time.Now()
		id := post(i)
		awaitReply(id)
		lat = append(lat, time.Since(t0))
		posted[id] = t0
	}
	b.StopTimer()
	var wake []time.Duration
	for _, c := range coords {
		for _, inv := range invocations(b, c, th.ID) {
			t0, ok := posted[inv.TriggerID]
			started, err := agentbridge.ParseTime(inv.ProcessStartedAt)
			if ok && err == nil {
				wake = append(wake, started.Sub(t0))
			}
		}
	}
	if len(wake) != b.N {
		b.Fatalf("%d started runs recorded for %d triggers", len(wake), b.N)
	}
	slices.Sort(wake)
	slices.Sort(lat)
	floor, err := Floor(ctx, br.fake, cl, max(b.N, 30))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(wake[len(wake)/2].Microseconds())/1000, "wake-p50-ms")
	b.ReportMetric(float64(wake[(len(wake)-1)*99/100].Microseconds())/1000, "wake-p99-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(floor.Microseconds())/1000, "floor-p50-ms")
	reportStages(b, cl, th.ID, coords...)
}
