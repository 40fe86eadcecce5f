package bridge

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// countingStore counts the per-thread queries the streams make.
type countingStore struct {
	Store
	threadQueries atomic.Int64
}

func (c *countingStore) ThreadEvents(ctx context.Context, q agentbridge.ThreadEventsQuery) ([]agentbridge.Event, error) {
	c.threadQueries.Add(1)
	return c.Store.ThreadEvents(ctx, q)
}

// TestIdleThreadStreamsCostAppendsNothing: appends to one thread do not
// make the streams of other threads query the log (issue 20: each append
// cost one query per open stream), and a stream of the appended thread
// still gets its events, in order, none missed.
func TestIdleThreadStreamsCostAppendsNothing(t *testing.T) {
	t.Cleanup(testutil.CheckGoroutines(t))
	cs := &countingStore{Store: openStore(t)}
	ts := serve(t, cs, Options{})
	srv := ts.srv
	ts.newThread("busy")
	const idle = 40
	var quiet []*sseStream
	for i := range idle {
		ts.newThread(fmt.Sprintf("q%d", i))
		quiet = append(quiet, ts.openSSE(fmt.Sprintf("/threads/q%d/events/stream", i)))
	}
	busy := ts.openSSE("/threads/busy/events/stream")
	waitFor(t, 10*time.Second, "the streams to be counted", func() bool { return subscriberCount(srv, "thread") == idle+1 })
	before := cs.threadQueries.Load()
	const appends = 50
	for i := range appends {
		ts.post("busy", "user", fmt.Sprintf("m%d", i))
	}
	for i := range appends {
		_, ev := busy.nextEvent(t)
		if ev.Text() != fmt.Sprintf("m%d", i) {
			t.Fatalf("busy stream event %d: %q", i, ev.Text())
		}
	}
	// Only the busy stream queried: at most once per append (fewer when
	// commits came together), plus each stream's first query, which may
	// come after the count above (a stream is counted before it sends its
	// headers, and queries after). Before the thread hub every stream
	// queried on every commit: over 800 here.
	if n, most := cs.threadQueries.Load()-before, int64(appends+idle+1); n > most {
		t.Fatalf("%d thread queries for %d appends with %d idle streams, want at most %d", n, appends, idle, most)
	}
	// And an idle stream wakes for its own thread.
	ts.post("q7", "user", "now you")
	if _, ev := quiet[7].nextEvent(t); ev.Text() != "now you" {
		t.Fatalf("q7's stream got %q", ev.Text())
	}
}
