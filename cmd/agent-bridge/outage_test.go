package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// logServe runs `agent-bridge serve` on db (stack.Serve), in a folder of
// its own where it keeps its person token (token), and keeps every stderr
// line.
func logServe(t *testing.T, bin, db string) (url, token string, logs *testutil.Buffer) {
	t.Helper()
	b := stack.Serve(t, bin, db)
	return b.URL, b.Token, b.Logs
}

// countLines counts the log lines whose msg starts with prefix.
func countLines(logs, prefix string) int {
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		var line struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && strings.HasPrefix(line.Msg, prefix) {
			n++
		}
	}
	return n
}

// TestPostgresOutage crashes the bridge's PostgreSQL (pg_ctl stop -m
// immediate) while writers post, and starts it again (contract 6.3):
// meanwhile every request is answered 503 unavailable with Retry-After
// (never 500), the outage is logged once when it starts and once when it
// ends, the bridge serves again without a restart, and every append it
// acknowledged is in the log exactly once.
func TestPostgresOutage(t *testing.T) {
	stack.Heavy(t)
	// A server of its own, since it is stopped; durable, so that what it
	// acknowledged survives the crash.
	srv := pgtest.NewDurable()
	t.Cleanup(srv.Stop)
	db := srv.Database(t)
	bin := buildServeBinary(t)
	url, token, logs := logServe(t, bin, db)
	cl := client.New(url, client.WithToken(token))
	ctx := context.Background()
	const writers = 8
	for w := range writers {
		if _, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: fmt.Sprintf("w%d", w)}); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu         sync.Mutex
		acked      = map[string]string{} // event id -> thread
		unavail    atomic.Int64
		noRetry    atomic.Int64
		okAfter    atomic.Int64 // 200s since the database came back
		back       atomic.Bool
		stop       = make(chan struct{})
		wg         sync.WaitGroup
		unexpected = make(chan string, 100)
	)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: bearer{token}}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			thread := fmt.Sprintf("w%d", w)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"from":"user","content":"post %d"}`, i)
				req, _ := http.NewRequest("POST", url+"/threads/"+thread+"/events", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					unexpected <- fmt.Sprintf("post: %v", err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					var a struct{ Event agentbridge.Event }
					if err := json.Unmarshal(b, &a); err != nil {
						unexpected <- fmt.Sprintf("decode answer %s: %v", b, err)
						return
					}
					mu.Lock()
					acked[a.Event.ID] = thread
					mu.Unlock()
					if back.Load() {
						okAfter.Add(1)
					}
				case http.StatusServiceUnavailable:
					unavail.Add(1)
					if resp.Header.Get("Retry-After") == "" || !bytes.Contains(b, []byte(`"unavailable"`)) {
						noRetry.Add(1)
					}
					time.Sleep(20 * time.Millisecond) // a client honouring Retry-After, briefly
				default:
					unexpected <- fmt.Sprintf("status %d: %s", resp.StatusCode, b)
					return
				}
			}
		}()
	}
	fail := func(format string, args ...any) {
		t.Helper()
		close(stop)
		wg.Wait()
		t.Fatalf(format+"\nserve log:\n%s", append(args, logs.String())...)
	}
	testutil.WaitFor(t, 30*time.Second, "appends before the outage", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 200
	})
	srv.Halt(t, "immediate")
	testutil.WaitFor(t, 30*time.Second, "503s during the outage", func() bool { return unavail.Load() >= 50 })
	// A read is refused the same way.
	resp, err := hc.Get(url + "/threads/w0/events")
	if err != nil {
		fail("read during the outage: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		fail("read during the outage: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	srv.Resume(t)
	returned := time.Now()
	back.Store(true)
	var servedAfter time.Duration
	testutil.WaitFor(t, 30*time.Second, "appends after the database's return", func() bool {
		if okAfter.Load() == 0 {
			return false
		}
		if servedAfter == 0 {
			servedAfter = time.Since(returned)
		}
		return okAfter.Load() >= 200
	})
	close(stop)
	wg.Wait()
	close(unexpected)
	for u := range unexpected {
		t.Errorf("unexpected answer: %s", u)
	}
	t.Logf("%d appends acknowledged, %d answered 503; serving again %v after pg_ctl start returned", len(acked), unavail.Load(), servedAfter.Round(time.Millisecond))
	if n := noRetry.Load(); n > 0 {
		t.Errorf("%d of the 503 answers had no Retry-After or no unavailable code", n)
	}

	// Every acknowledged append is there, once.
	seen := map[string]int{}
	for w := range writers {
		evs, err := cl.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: fmt.Sprintf("w%d", w), After: 0})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			seen[ev.ID]++
		}
	}
	lost := 0
	for id := range acked {
		if seen[id] != 1 {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged appends are missing or doubled", lost, len(acked))
	}

	// One line when the outage starts, one when it ends; no line per
	// request.
	l := logs.String()
	if n := countLines(l, "database unreachable"); n != 1 {
		t.Errorf("%d 'database unreachable' lines, want 1", n)
	}
	if n := countLines(l, "database reachable again"); n != 1 {
		t.Errorf("%d 'database reachable again' lines, want 1", n)
	}
	if n := countLines(l, "request failed") + countLines(l, "group commit failed"); n > 0 {
		t.Errorf("%d per-request error lines, want none", n)
	}
	if lines := strings.Count(l, "\n"); lines > 20 || t.Failed() || testing.Verbose() {
		t.Logf("serve log (%d lines):\n%s", lines, l)
		if lines > 20 {
			t.Errorf("the outage took %d log lines; want a handful", lines)
		}
	}
}
