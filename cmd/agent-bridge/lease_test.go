package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestLeaseSurvivesPostgresRestarts restarts the coordinators' PostgreSQL
// ten times while triggers keep coming, with two real coordinators that
// share one status_addr (contract 6.3): each time, within 10 s exactly
// one holds the lease and serves the status address, neither process
// exits, and in the end every trigger has exactly one reply. Before, a
// coordinator that lost the lease exited 1, and a standby that took the
// lease while the old holder still had the status address exited on
// "address already in use", leaving none.
func TestLeaseSurvivesPostgresRestarts(t *testing.T) {
	stack.Heavy(t)
	srv := pgtest.New() // its own: it is restarted
	t.Cleanup(srv.Stop)
	bin, fake := buildCoordBinaries(t)
	e := newCoordEnv(t, fake)
	e.statePath = srv.Database(t)

	var procs []*stack.Proc
	procs = append(procs, e.startCoordProc(bin))
	procs = append(procs, e.startStandby(bin, "second coordinator"))

	// Load: triggers to alice in four threads, one every 100 ms.
	var threads []string
	for range 4 {
		threads = append(threads, e.threadWithAlice())
	}
	var (
		mu       sync.Mutex
		triggers []agentbridge.Event
		stop     = make(chan struct{})
		loaded   = make(chan struct{})
	)
	go func() {
		defer close(loaded)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ev := e.say(threads[i%len(threads)], "alice", fmt.Sprintf("fake:sleep=100ms n%d", i))
			mu.Lock()
			triggers = append(triggers, ev)
			mu.Unlock()
		}
	}()

	alive := func() {
		t.Helper()
		for i, p := range procs {
			select {
			case err := <-p.Done:
				close(stop)
				t.Fatalf("coordinator %d exited (%v); stderr:\n%s", i+1, err, p.Stderr.String())
			default:
			}
		}
	}
	var worst time.Duration
	for i := range 10 {
		srv.Halt(t, "fast")
		srv.Resume(t)
		back := time.Now()
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("restart %d: one lease holder following the log", i+1), func() bool {
			return pgtest.AdvisoryLocks(e.statePath) == 1 && stack.Following(e.statusURL)
		})
		worst = max(worst, time.Since(back))
		alive()
	}
	close(stop)
	<-loaded
	alive()
	t.Logf("%d triggers over 10 restarts; a lease holder followed the log at most %v after PostgreSQL was back", len(triggers), worst.Round(time.Millisecond))

	// A last trigger per thread, answered after every earlier one of its
	// thread (one FIFO per thread and participant), then exactly one reply
	// each.
	var last []agentbridge.Event
	for _, th := range threads {
		last = append(last, e.say(th, "alice", "last"))
	}
	// replies counts the replies per trigger in the four threads.
	replies := func() map[string]int {
		out := map[string]int{}
		for _, th := range threads {
			evs, err := e.cl.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: th, After: 0})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Meta.ReplyTo != "" {
					out[ev.Meta.ReplyTo]++
				}
			}
		}
		return out
	}
	// The deadline follows the replies as they come (the backlog of the
	// load drains first), not one wall time.
	testutil.WaitProgress(t, 2*time.Minute, "the last trigger's reply in each thread", func() (int, bool) {
		got := replies()
		for _, ev := range last {
			if got[ev.ID] == 0 {
				return len(got), false
			}
		}
		return len(got), true
	})
	got := replies()
	bad := 0
	for _, tr := range append(triggers, last...) {
		if got[tr.ID] != 1 {
			bad++
			if bad <= 5 {
				t.Errorf("trigger %q has %d replies, want 1", tr.Text(), got[tr.ID])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d triggers were not answered exactly once", bad, len(triggers)+len(last))
	}
	alive()
	for _, p := range procs {
		p.Terminate(t)
	}
}
