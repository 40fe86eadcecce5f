package bridge

import (
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/fakepush"
)

// BenchmarkPushLatency: from a permission request's append to its Web
// Push arriving at the push service (encrypted, VAPID-signed, over
// loopback HTTP), one at a time; ns/op is that latency (the append's
// answer included). The contract asks for 2 s.
func BenchmarkPushLatency(b *testing.B) {
	fp := fakepush.Start()
	defer fp.Close()
	ts := newTestServer(b, privatePush)
	ts.newThread("t1")
	sub, err := fp.Subscribe()
	if err != nil {
		b.Fatal(err)
	}
	ts.must(200, "POST", "/push/subscriptions", `{"endpoint":"`+sub.Endpoint+`","keys":{"p256dh":"`+sub.P256dh+`","auth":"`+sub.Auth+`"},"categories":{"permission":true}}`)
	var worst time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		ts.must(200, "POST", "/threads/t1/events", permissionRequest)
		select {
		case <-fp.Received():
		case <-time.After(10 * time.Second):
			b.Fatal("no push within 10 s")
		}
		worst = max(worst, time.Since(start))
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
}
