package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/pgtest"
	"github.com/agent-bridge/agent-bridge/internal/testutil"
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
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	srv := pgtest.New() // its own: it is restarted
	t.Cleanup(srv.Stop)
	bin, fake := buildCoordBinaries(t)
	e := newCoordEnv(t, fake)
	e.statePath = srv.Database(t)

	var procs []*coordProc
	procs = append(procs, e.startCoordProc(bin))
	cmd := exec.Command(bin, "coordinator", "--config", e.cfgPath, "--state", e.statePath, "--startup-mode", "resume")
	cmd.Env = append(os.Environ(), "FAKE_ADAPTER_DIR="+e.fakeDir, "BRIDGE_TOKEN=")
	second := &coordProc{cmd: cmd, stderr: &testutil.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = second.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { second.done <- cmd.Wait() }()
	procs = append(procs, second)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() || testing.Verbose() {
			t.Logf("second coordinator stderr:\n%s", second.stderr.String())
		}
	})
	testutil.WaitFor(t, 30*time.Second, "the second coordinator to stand by", func() bool {
		return strings.Contains(second.stderr.String(), "standby")
	})

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

	leases := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, e.statePath)
		if err != nil {
			return -1
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
			return -1
		}
		return n
	}
	following := func() bool {
		resp, err := http.Get(e.statusURL + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Following bool }
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Following
	}
	alive := func() {
		t.Helper()
		for i, p := range procs {
			select {
			case err := <-p.done:
				close(stop)
				t.Fatalf("coordinator %d exited (%v); stderr:\n%s", i+1, err, p.stderr.String())
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
			return leases() == 1 && following()
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
	for i, ev := range last {
		testutil.WaitFor(t, 120*time.Second, "the last trigger's reply", func() bool { return len(e.replies(threads[i], ev.ID)) >= 1 })
	}
	replies := map[string]int{}
	for _, th := range threads {
		evs, err := e.cl.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: th, After: 0})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Meta.ReplyTo != "" {
				replies[ev.Meta.ReplyTo]++
			}
		}
	}
	bad := 0
	for _, tr := range append(triggers, last...) {
		if replies[tr.ID] != 1 {
			bad++
			if bad <= 5 {
				t.Errorf("trigger %q has %d replies, want 1", tr.Text(), replies[tr.ID])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d triggers were not answered exactly once", bad, len(triggers)+len(last))
	}
	alive()
	for _, p := range procs {
		p.terminate(t)
	}
}
