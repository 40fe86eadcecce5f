package bridge

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

// BenchmarkHTTPAppend measures durable appends over real HTTP against real
// SQLite, with 1, 8 and 32 concurrent clients spread over 1 or 100 threads,
// and in the same run the floor: a trivial net/http handler that decodes
// the same JSON and answers 200. docs/performance.md reports the ratio.
func BenchmarkHTTPAppend(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("baseline/clients=%d", clients), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, DefaultMaxBody))
				if err != nil {
					http.Error(w, err.Error(), 400)
					return
				}
				in, err := agentbridge.DecodeEventInput(body)
				if err != nil {
					http.Error(w, err.Error(), 400)
					return
				}
				writeJSON(w, 200, appendAnswer{Received: true, Event: agentbridge.Event{Type: in.Type, From: in.From, To: in.To, Content: in.Content, Meta: in.Meta}})
			})}
			go func() { _ = srv.Serve(ln) }()
			defer srv.Close()
			runAppends(b, "http://"+ln.Addr().String(), clients, 1)
		})
		for _, threads := range []int{1, 100} {
			b.Run(fmt.Sprintf("bridge/clients=%d/threads=%d", clients, threads), func(b *testing.B) {
				ts := newTestServer(b, Options{})
				for i := range threads {
					ts.newThread(fmt.Sprintf("t%d", i))
				}
				before := ts.store.Stats()
				runAppends(b, ts.url, clients, threads)
				if st := ts.store.Stats(); st.Batches > before.Batches {
					b.ReportMetric(float64(st.Appends-before.Appends)/float64(st.Batches-before.Batches), "appends/commit")
				}
			})
		}
	}
}

// runAppends posts b.N messages from clients goroutines, round-robin over
// threads t0..t{threads-1}.
func runAppends(b *testing.B, url string, clients, threads int) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	body, _ := json.Marshal(map[string]any{"from": "user", "to": "all", "content": strings.Repeat("benchmark message ", 8), "meta": map[string]any{"tags": []string{"bench"}}})
	var next sync.Mutex
	n := 0
	cpu0 := testutil.ProcessCPU(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				i := n
				n++
				next.Unlock()
				if i >= b.N {
					return
				}
				resp, err := client.Post(fmt.Sprintf("%s/threads/t%d/events", url, i%threads), "application/json", strings.NewReader(string(body)))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpu := testutil.ProcessCPU(b) - cpu0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	// CPU per append and the share of the two cores kept busy separate
	// what an append costs from how long it waits: throughput alone moves
	// with both, and with the machine's load.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(100*cpu.Seconds()/b.Elapsed().Seconds(), "cpu-%")
}

// BenchmarkLongPollWake measures how long after an append is acknowledged
// a waiting global long-poll answers with it (the contract: within
// milliseconds).
func BenchmarkLongPollWake(b *testing.B) {
	ts := newTestServer(b, Options{})
	ts.newThread("t")
	var total time.Duration
	for range b.N {
		head := ts.head()
		done := make(chan time.Time, 1)
		go func() {
			resp, err := http.Get(fmt.Sprintf("%s/events?after=%d&wait=60", ts.url, head))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			done <- time.Now()
		}()
		waitFor(b, 10*time.Second, "poll waiting", func() bool { return subscriberCount(ts.srv, "poll") >= 1 })
		ts.post("t", "user", "wake")
		acked := time.Now()
		total += (<-done).Sub(acked)
		waitFor(b, 10*time.Second, "poll done", func() bool { return subscriberCount(ts.srv, "poll") == 0 })
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/wake")
}

// BenchmarkHTTPLayer measures what the bridge's HTTP layer costs per
// request on its own — instrumentation, the security gate, routing, the
// handler adapter and writeJSON — by serving GET /ping in process, so that
// changes to the per-request path show up without the store's or the
// network's noise.
func BenchmarkHTTPLayer(b *testing.B) {
	ts := newTestServer(b, Options{})
	h := ts.srv.Handler()
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:5111/ping", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkEventsGet measures a page of 200 stored events read through
// GET /threads/{id}/events in process, where encoding every event's meta
// dominates what the bridge itself adds.
func BenchmarkEventsGet(b *testing.B) {
	ts := newTestServer(b, Options{})
	ts.newThread("t")
	for i := range 200 {
		ts.must(200, "POST", "/threads/t/events", fmt.Sprintf(`{"from":"user","content":"message %d","meta":{"tags":["bench"]}}`, i))
	}
	h := ts.srv.Handler()
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:5111/threads/t/events?limit=200", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}
