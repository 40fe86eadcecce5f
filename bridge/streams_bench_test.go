package bridge

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkAppendIdleStreams measures the latency of one client's appends
// to a thread while 0 or 1,000 SSE streams follow other, quiet threads
// (issue 20: 400 posts took 8.1 s with 2,000 streams open, 0.05 s with
// none). The goal is a p50 within 2× of the case without streams: a
// stream that has nothing to send must cost an append nothing.
func BenchmarkAppendIdleStreams(b *testing.B) {
	for _, streams := range []int{0, 1000} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			ts := newTestServer(b, Options{})
			ts.newThread("t")
			const quiet = 100
			for i := range quiet {
				ts.newThread(fmt.Sprintf("q%d", i))
			}
			openIdleStreams(b, ts, streams, quiet)
			tr := &http.Transport{}
			b.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr}
			body := `{"from":"user","to":"all","content":"benchmark message"}`
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				resp, err := client.Post(ts.url+"/threads/t/events", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("append: %d", resp.StatusCode)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// openIdleStreams opens n thread streams spread over threads q0..q{quiet-1}
// on raw connections, each read to its end by a goroutine, and waits until
// the server counts them all.
func openIdleStreams(b *testing.B, ts *testServer, n, quiet int) {
	b.Helper()
	addr := strings.TrimPrefix(ts.url, "http://")
	for i := range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "GET /threads/q%d/events/stream HTTP/1.1\r\nHost: %s\r\n\r\n", i%quiet, addr)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("stream %d: %v %v", i, err, resp)
		}
		go func() { _, _ = io.Copy(io.Discard, br) }()
	}
	waitFor(b, 30*time.Second, "the streams to be counted", func() bool {
		return int(subscriberCount(ts.srv, "thread")) == n
	})
}
