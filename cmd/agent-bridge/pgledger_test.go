package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestTwoCoordinatorsOnePostgresLedger runs one `serve` and two
// `coordinator` processes on one PostgreSQL ledger, as two machines
// sharing a database would: different coordinator ids (laptop serves
// alice, server serves bob), tokens, HOMEs and status ports. Both follow
// at once and answer their own agent's triggers (before, one held the
// database's only lease and the other's agent was never answered). Then
// PostgreSQL restarts ten times while triggers keep coming to both: each
// coordinator takes its own lease again (two advisory locks, one per id)
// and answers a trigger sent after the restart, and in the end every
// trigger has exactly one reply, from its addressee, and exactly one run
// (each machine's fake adapter logs its runs).
func TestTwoCoordinatorsOnePostgresLedger(t *testing.T) {
	stack.Heavy(t)
	srv := pgtest.New() // its own: it is restarted
	t.Cleanup(srv.Stop)
	ledgerURL := srv.Database(t)
	s := stack.New(t, bins, "")
	cl := s.Person
	ctx := context.Background()

	// Ten triggers a second in one thread: past the default per-thread
	// rate (30 a minute) the runs would wait for it.
	s.Ledger = ledgerURL
	ms := s.Machines(map[string]any{"max_invocations_per_minute": 10000}, "laptop=alice", "server=bob")
	laptop, server := ms[0], ms[1]
	machines := map[string]*stack.Machine{"alice": laptop, "bob": server}
	t.Cleanup(func() {
		// Runs before the processes are killed: what the database and
		// the coordinators were doing when the test failed.
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, ledgerURL)
		if err != nil {
			t.Logf("pg_stat_activity: %v", err)
			return
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT pid, coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, ''),
			coalesce(now() - query_start, '0'::interval)::text, left(query, 120) FROM pg_stat_activity WHERE datname = current_database()`)
		if err != nil {
			t.Logf("pg_stat_activity: %v", err)
			return
		}
		defer rows.Close()
		defer func() {
			for _, m := range []*stack.Machine{laptop, server} {
				_ = m.Proc.Cmd.Process.Signal(syscall.SIGQUIT)
				<-m.Proc.Done
			}
		}()
		for rows.Next() {
			var pid int
			var state, wt, we, age, q string
			if err := rows.Scan(&pid, &state, &wt, &we, &age, &q); err == nil {
				t.Logf("backend %d %s wait=%s/%s for %s: %s", pid, state, wt, we, age, q)
			}
		}
	})

	th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "one ledger"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"alice", "bob"} {
		b, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": p, "profile": map[string]any{"client": "fake-" + p, "model": "m"}}})
		if _, err := cl.Append(ctx, th.ID, agentbridge.EventInput{Type: "control", From: "user", Content: b}, ""); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu       sync.Mutex
		triggers []agentbridge.Event
	)
	say := func(to, text string) agentbridge.Event {
		t.Helper()
		b, _ := json.Marshal(text)
		ev, err := cl.Append(ctx, th.ID, agentbridge.EventInput{From: "user", To: to, Content: b}, "")
		if err != nil {
			t.Errorf("post to %s: %v", to, err)
			return ev
		}
		mu.Lock()
		triggers = append(triggers, ev)
		mu.Unlock()
		return ev
	}
	// replies counts the replies per trigger and sender.
	replies := func() map[string]map[string]int {
		evs, err := cl.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: th.ID, After: -1})
		if err != nil {
			return nil
		}
		out := map[string]map[string]int{}
		for _, ev := range evs {
			if ev.Meta.ReplyTo != "" {
				if out[ev.Meta.ReplyTo] == nil {
					out[ev.Meta.ReplyTo] = map[string]int{}
				}
				out[ev.Meta.ReplyTo][ev.From]++
			}
		}
		return out
	}
	// Both answer at once, on one ledger.
	first := []agentbridge.Event{say("alice", "hi alice"), say("bob", "hi bob")}
	testutil.WaitProgress(t, 30*time.Second, "both coordinators to answer their agent", answeredCount(replies, first))

	// Load: a trigger every 100 ms, to alice and bob in turn.
	stop, loaded := make(chan struct{}), make(chan struct{})
	var stopOnce sync.Once
	halt := func() {
		stopOnce.Do(func() { close(stop) })
		<-loaded
	}
	t.Cleanup(halt) // a failure stops the load before the test ends
	go func() {
		defer close(loaded)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			say([]string{"alice", "bob"}[i%2], fmt.Sprintf("fake:sleep=100ms n%d", i))
		}
	}()
	alive := func() {
		t.Helper()
		for _, m := range []*stack.Machine{laptop, server} {
			select {
			case err := <-m.Proc.Done:
				t.Fatalf("coordinator %s exited (%v); stderr:\n%s", m.ID, err, m.Proc.Stderr.String())
			default:
			}
		}
	}
	var worst time.Duration
	for i := range 10 {
		srv.Halt(t, "fast")
		srv.Resume(t)
		back := time.Now()
		// Both hold their lease again and answer a trigger sent after the
		// restart.
		after := []agentbridge.Event{say("alice", fmt.Sprintf("after restart %d", i+1)), say("bob", fmt.Sprintf("after restart %d", i+1))}
		// The deadline follows the restart's steps (each lease taken,
		// each coordinator following, each reply as the load's backlog
		// drains), not one wall time: a machine busy with other tests
		// slows them without failing them.
		answered := answeredCount(replies, after)
		testutil.WaitProgress(t, 2*time.Minute, fmt.Sprintf("restart %d: both leases held, both coordinators following and answering", i+1), func() (int, bool) {
			// One advisory lock per coordinator id: its lease.
			leases, following := pgtest.AdvisoryLocks(ledgerURL), 0
			for _, m := range []*stack.Machine{laptop, server} {
				if m.Following() {
					following++
				}
			}
			n, done := answered()
			return n + max(leases, 0) + following, done && leases == 2 && following == 2
		})
		worst = max(worst, time.Since(back))
		alive()
	}
	halt()
	last := []agentbridge.Event{say("alice", "last alice"), say("bob", "last bob")}
	testutil.WaitProgress(t, 2*time.Minute, "the last triggers' replies", answeredCount(replies, last))
	mu.Lock()
	all := append([]agentbridge.Event(nil), triggers...)
	mu.Unlock()
	testutil.WaitProgress(t, 2*time.Minute, "a reply to every trigger", answeredCount(replies, all))
	alive()
	t.Logf("%d triggers over 10 PostgreSQL restarts; both coordinators held their lease and answered at most %v after it was back", len(all), worst.Round(time.Millisecond))

	runs := map[string]map[string]int{} // trigger → machine → runs
	for _, m := range []*stack.Machine{laptop, server} {
		for trigger, n := range m.RunsOf() {
			if runs[trigger] == nil {
				runs[trigger] = map[string]int{}
			}
			runs[trigger][m.ID] += n
		}
	}
	got := replies()
	bad := 0
	for _, ev := range all {
		who := ev.To
		want := machines[who].ID
		ok := len(got[ev.ID]) == 1 && got[ev.ID][who] == 1 && len(runs[ev.ID]) == 1 && runs[ev.ID][want] == 1
		if !ok {
			bad++
			if bad <= 5 {
				t.Errorf("trigger %q to %s: replies %v, runs %v; want one reply from %s and one run on %s", ev.Text(), who, got[ev.ID], runs[ev.ID], who, want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d triggers were not answered and run exactly once", bad, len(all))
	}
	for _, m := range []*stack.Machine{laptop, server} {
		// Each took its own lease again and never stopped working.
		if logs := m.Proc.Stderr.String(); !strings.Contains(logs, "lease: taken again") || strings.Contains(logs, "lost the coordinator lease") {
			t.Errorf("coordinator %s: want the lease taken again after the restarts and never lost; stderr:\n%s", m.ID, logs)
		}
		m.Proc.Terminate(t)
	}
}

// answeredCount is a testutil.WaitProgress step: whether every one of
// triggers has a reply in replies (per trigger and sender), with the
// number of triggers of the thread answered so far as its progress, so
// that a wait behind a backlog follows the backlog's replies.
func answeredCount(replies func() map[string]map[string]int, triggers []agentbridge.Event) func() (int, bool) {
	return func() (int, bool) {
		got := replies()
		for _, ev := range triggers {
			if len(got[ev.ID]) == 0 {
				return len(got), false
			}
		}
		return len(got), true
	}
}
