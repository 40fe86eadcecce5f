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

// BenchmarkWakeFromOutside posts b.N triggers (default 60 with
// -benchtime 60x), each after an idle gap of 0–50 ms, to a participant whose
// adapter is the compiled fake adapter, and reports the p50 and p99 of POST
// → reply seen on the thread's SSE stream, the floor's p50 and their ratio,
// and the same for the floor measured after the same idle gaps.
func BenchmarkWakeFromOutside(b *testing.B) {
	ctx := context.Background()
	d := startDaemons(b, nil)
	cl, fake := d.cl, d.fake

	th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "wake"})
	if err != nil {
		b.Fatal(err)
	}
	st, err := cl.Stream(ctx, th.ID, inviteAlice(b, cl, th.ID))
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
	post := func(i int) string {
		e, err := cl.Append(ctx, th.ID, agentbridge.EventInput{From: "user", To: "alice",
			Content: json.RawMessage(fmt.Sprintf("%q", fmt.Sprintf("ping %d", i)))}, "")
		if err != nil {
			b.Fatal(err)
		}
		return e.ID
	}
	// One trigger first, so that the coordinator is following and the
	// adapter's binary is in the page cache.
	awaitReply(post(-1))

	rng := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, b.N)
	gaps := make([]time.Duration, b.N)
	for i := range gaps {
		gaps[i] = time.Duration(rng.IntN(51)) * time.Millisecond
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		time.Sleep(gaps[i]) // the idle gap is the point of the benchmark
		b.StartTimer()
		t0 := time.Now()
		awaitReply(post(i))
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	floor, err := Floor(context.Background(), fake, cl, max(b.N, 30))
	if err != nil {
		b.Fatal(err)
	}
	// The same rounds after the triggers' idle gaps, to compare like with
	// like: a trigger after a gap wakes sleeping processes (and, on a VM,
	// processors) at every hop, which the floor's back-to-back rounds
	// never do.
	idleFloor, err := FloorAfterGaps(context.Background(), fake, cl, gaps)
	if err != nil {
		b.Fatal(err)
	}
	p50 := lat[len(lat)/2]
	b.ReportMetric(float64(idleFloor.Microseconds())/1000, "floor-after-gaps-p50-ms")
	b.ReportMetric(float64(p50)/float64(idleFloor), "p50/floor-after-gaps")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)-1)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(floor.Microseconds())/1000, "floor-p50-ms")
	b.ReportMetric(float64(p50)/float64(floor), "p50/floor")
	reportStages(b, cl, th.ID, d.coord)
}
