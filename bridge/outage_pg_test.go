package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/postgres"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestThreadStreamThroughPostgresOutage stops a real PostgreSQL (a crash:
// pg_ctl stop -m immediate, three times) while a client posts messages addressed to an
// invited agent, each under its own Idempotency-Key and retried on 503,
// and starts it again. An open thread stream must stay open through the
// outage (the thread hub's reader retries; the stream waits) and then
// deliver every message, once and in order; the thread must hold each key
// once (a commit whose answer was lost is replayed, not doubled).
func TestThreadStreamThroughPostgresOutage(t *testing.T) {
	// Its own server, since this test halts it; durable, since a crash of
	// one with synchronous_commit off loses commits it acknowledged.
	pg := pgtest.NewDurable()
	t.Cleanup(pg.Stop)
	dbURL := pg.Database(t)
	t.Cleanup(testutil.CheckGoroutines(t))
	st, err := postgres.Open(context.Background(), dbURL, postgres.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ts := serve(t, st, Options{})
	ts.newThread("t")
	ts.must(http.StatusOK, "POST", "/threads/t/events", `{"type":"control","from":"user","content":{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m"}}}}`)
	stream := ts.openSSE("/threads/t/events/stream?after=0")

	var (
		mu       sync.Mutex
		acked    []agentbridge.Event
		unavail  atomic.Int64
		problems = make(chan string, 16)
		stop     = make(chan struct{})
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			body := fmt.Sprintf(`{"from":"user","to":"codex","content":"post %d"}`, i)
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", ts.url+"/threads/t/events", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprintf("k%d", i))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					problems <- fmt.Sprintf("post %d: %v", i, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" {
					unavail.Add(1)
					time.Sleep(10 * time.Millisecond) // a client honouring Retry-After, briefly
					continue
				}
				var a appendAnswer
				if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &a) != nil || a.Ignored != nil {
					problems <- fmt.Sprintf("post %d: status %d: %s", i, resp.StatusCode, b)
					return
				}
				mu.Lock()
				acked = append(acked, a.Event)
				mu.Unlock()
				break
			}
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitFor(t, 30*time.Second, "posts before the outage", func() bool { return count() >= 50 })
	// Three outages: a stream fetching when the database goes away is a
	// race with the crash, which one outage loses about half the time.
	for range 3 {
		refused := unavail.Load()
		pg.Halt(t, "immediate")
		waitFor(t, 30*time.Second, "503s during the outage", func() bool { return unavail.Load() >= refused+20 })
		before := count()
		pg.Resume(t)
		waitFor(t, 30*time.Second, "posts after the outage", func() bool { return count() >= before+50 })
	}
	close(stop)
	<-done
	close(problems)
	for p := range problems {
		t.Error(p)
	}

	// The stream, open throughout, delivers the invite and every post, once,
	// in order.
	seqs := map[int64]bool{}
	for _, ev := range acked {
		seqs[ev.Seq] = true
	}
	last := int64(0)
	for len(seqs) > 0 {
		_, ev := stream.nextEvent(t)
		if ev.Seq <= last {
			t.Fatalf("stream delivered seq %d after %d", ev.Seq, last)
		}
		last = ev.Seq
		delete(seqs, ev.Seq)
	}

	// Each key once: as many messages to codex as posts acknowledged.
	a := ts.must(http.StatusOK, "GET", "/threads/t/events?after=0&limit=1000", "")
	var page eventsPage
	if err := json.Unmarshal(a.body, &page); err != nil {
		t.Fatalf("decode events: %v", err)
	}
	n := 0
	for _, ev := range page.Events {
		if ev.Type == agentbridge.TypeMessage && ev.To == "codex" {
			n++
		}
	}
	if n != len(acked) {
		t.Errorf("%d messages stored for %d acknowledged posts (one key each)", n, len(acked))
	}
	t.Logf("%d posts acknowledged, %d answers 503 during the outage", len(acked), unavail.Load())
}
