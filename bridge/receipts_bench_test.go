package bridge

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkReceiptToSubscriber measures how long a receipt change takes
// from the PUT's start until a thread-stream subscriber has read it
// (contract 5.5's target: 50 ms p99), over real HTTP on 127.0.0.1 and a
// real SQLite file. Each iteration changes one pair's state, so every PUT
// writes and is streamed. Reported: p50 and p99 in ms.
//
//	go test ./bridge -run '^$' -bench BenchmarkReceiptToSubscriber -benchtime 2000x
func BenchmarkReceiptToSubscriber(b *testing.B) {
	ts := newTestServer(b, Options{})
	ts.newThread("bench")
	ev := ts.post("bench", "user", "hello @codex")
	sub := ts.openSSE("/threads/bench/events/stream")
	testutilWaitSubscribers(b, ts, "thread", 1)
	path := ts.url + "/threads/bench/receipts/" + ev.ID + "/codex"
	states := []string{"queued", "running"}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body := `{"from":"bridge-coordinator","state":"` + states[i%2] + `","invocation":"` + strconv.Itoa(i) + `"}`
		start := time.Now()
		req, _ := http.NewRequest(http.MethodPut, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("PUT: %d", resp.StatusCode)
		}
		m := sub.next(b)
		if m.event != "receipt" || !strings.Contains(m.data, `"invocation":"`+strconv.Itoa(i)+`"`) {
			b.Fatalf("got %+v, want receipt %d", m, i)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
