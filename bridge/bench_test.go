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
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// BenchmarkHTTPAppend measures durable appends over real HTTP against real
// SQLite, with 1, 8 and 32 concurrent clients spread over 1 or 100 threads,
// and in the same run the floor: a trivial net/http handler that decodes
// the same JSON and answers 200. Each case runs on its own, which suits
// profiles and traces; BenchmarkHTTPAppendRatio measures the ratio.
func BenchmarkHTTPAppend(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("baseline/clients=%d", clients), func(b *testing.B) {
			runAppends(b, newFloor(b), clients, 1)
		})
		for _, threads := range []int{1, 100} {
			b.Run(fmt.Sprintf("bridge/clients=%d/threads=%d", clients, threads), func(b *testing.B) {
				ts := newAppendBridge(b, threads)
				before := ts.store.Stats()
				runAppends(b, ts.url, clients, threads)
				if st := ts.store.Stats(); st.Batches > before.Batches {
					b.ReportMetric(float64(st.Appends-before.Appends)/float64(st.Batches-before.Batches), "appends/commit")
				}
			})
		}
	}
}

// BenchmarkHTTPAppendRatio measures the target, the bridge's
// appends per second as a share of the floor's, with the three servers
// (the floor, the bridge with 1 thread, the bridge with 100 threads) taking
// turns: b.N appends each, in ratioRounds slices, each round starting with
// a different server. Run one after the other, the cases met the machine
// in different moods: its speed drifts by tens of percent over seconds,
// and the ratio of two cases measured a second apart swung by ±0.1.
func BenchmarkHTTPAppendRatio(b *testing.B) {
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			one, hundred := newAppendBridge(b, 1), newAppendBridge(b, 100)
			loads := []*appendLoad{
				newAppendLoad(b, newFloor(b), clients, 1),
				newAppendLoad(b, one.url, clients, 1),
				newAppendLoad(b, hundred.url, clients, 100),
			}
			per := max(b.N/ratioRounds, 1)
			b.ResetTimer()
			for round, done := 0, 0; done < b.N; round, done = round+1, done+per {
				n := min(per, b.N-done)
				for k := range loads {
					loads[(round+k)%len(loads)].run(b, n)
				}
			}
			b.StopTimer()
			rate := func(l *appendLoad) float64 { return float64(l.posted) / l.elapsed.Seconds() }
			floor := rate(loads[0])
			b.ReportMetric(floor, "floor-appends/s")
			b.ReportMetric(rate(loads[1])/floor, "ratio-1-thread")
			b.ReportMetric(rate(loads[2])/floor, "ratio-100-threads")
		})
	}
}

// ratioRounds is how many turns each server gets in
// BenchmarkHTTPAppendRatio.
const ratioRounds = 10

// newFloor starts the floor: a net/http handler that reads the body,
// decodes and validates it as the bridge does, and answers 200 with the
// event, storing nothing. It returns its URL.
func newFloor(b *testing.B) string {
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
		in, err := agentbridge.ParseEventInput(body)
		if err == nil {
			err = in.Validate()
		}
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		httpjson.Write(w, 200, appendAnswer{Received: true, Event: agentbridge.Event{Type: in.Type, From: in.From, To: in.To, Content: in.Content, Meta: in.Meta}})
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// newAppendBridge starts a bridge with threads t0..t{threads-1}.
func newAppendBridge(b *testing.B, threads int) *testServer {
	ts := newTestServer(b, Options{})
	for i := range threads {
		ts.newThread(fmt.Sprintf("t%d", i))
	}
	return ts
}

// runAppends posts b.N messages from clients goroutines, round-robin over
// threads t0..t{threads-1}, and reports the rate and the CPU they took.
func runAppends(b *testing.B, url string, clients, threads int) {
	l := newAppendLoad(b, url, clients, threads)
	cpu0 := testutil.ProcessCPU(b)
	b.ResetTimer()
	l.run(b, b.N)
	b.StopTimer()
	cpu := testutil.ProcessCPU(b) - cpu0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	// CPU per append and the share of the two cores kept busy separate
	// what an append costs from how long it waits: throughput alone moves
	// with both, and with the machine's load.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(100*cpu.Seconds()/b.Elapsed().Seconds(), "cpu-%")
}

// appendLoad is a set of concurrent clients posting messages to one
// server over keep-alive connections, round-robin over its threads.
type appendLoad struct {
	url              string
	clients, threads int
	client           *http.Client
	body             []byte
	next             int           // the next thread, across runs
	posted           int           // appends answered 200, across runs
	elapsed          time.Duration // time spent in run
}

func newAppendLoad(b *testing.B, url string, clients, threads int) *appendLoad {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	b.Cleanup(tr.CloseIdleConnections)
	body, _ := json.Marshal(map[string]any{"from": "user", "to": "all", "content": strings.Repeat("benchmark message ", 8), "meta": map[string]any{"tags": []string{"bench"}}})
	return &appendLoad{url: url, clients: clients, threads: threads, client: &http.Client{Transport: tr}, body: body}
}

// run posts n messages and waits for every answer.
func (l *appendLoad) run(b *testing.B, n int) {
	var mu sync.Mutex
	left := n
	start := time.Now()
	var wg sync.WaitGroup
	for range l.clients {
		wg.Go(func() {
			for {
				mu.Lock()
				if left == 0 {
					mu.Unlock()
					return
				}
				left--
				thread := l.next
				l.next = (l.next + 1) % l.threads
				mu.Unlock()
				resp, err := l.client.Post(fmt.Sprintf("%s/threads/t%d/events", l.url, thread), "application/json", strings.NewReader(string(l.body)))
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
				mu.Lock()
				l.posted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	l.elapsed += time.Since(start)
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
	h := ts.srv.handler
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
	h := ts.srv.handler
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
