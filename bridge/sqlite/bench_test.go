package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// bulkFill appends n messages to thread directly through the writer's
// connection in one transaction, bypassing the writer goroutine (idle
// here) so that a 100k-event fixture takes a second, not minutes. It keeps
// the same invariants as the writer: gapless seq, increasing ts, and
// thread_state in step.
func bulkFill(b *testing.B, s *Store, thread string, n int) {
	b.Helper()
	ctx := context.Background()
	th, err := s.Thread(ctx, thread)
	if err != nil {
		b.Fatal(err)
	}
	err = s.inTx(ctx, func(tx *sql.Conn) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO events (id, thread, seq, ts, type, sender, recipient, content, meta, hop)
			VALUES (?, ?, ?, ?, 'message', ?, 'all', ?, '{}', ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		t := time.Now().UTC().Truncate(time.Microsecond)
		seq := th.LastSeq
		for i := range n {
			seq++
			t = t.Add(time.Microsecond)
			ts := agentbridge.FormatTime(t)
			from, hop := "user", 0
			if i%2 == 1 {
				from, hop = "codex", 1
			}
			id := ulid.MustNew(ulid.Timestamp(t), s.w.entropy).String()
			content := fmt.Sprintf("%q", fmt.Sprintf("message %d: a line of text of ordinary length for a chat between people and agents", i))
			if _, err := stmt.ExecContext(ctx, id, thread, seq, ts, from, content, hop); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE thread_state SET seq = ?, last_hop = ? WHERE thread = ?`, seq, n%2, thread)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	delete(s.w.heads, thread) // the writer's cache did not see this
}

// p50 reports the median of the recorded durations.
func reportP50(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkThreadEvents measures the queries a client makes all day — the
// last page (tail=25), catch-up from a cursor (after=head-10, and a v0
// client's since=<ts> of the same event) — and since's worst case, on one
// thread of 1k, 10k and 100k events. Fixtures are built once per size.
func BenchmarkThreadEvents(b *testing.B) {
	ctx := context.Background()
	s := openStore(b, Options{})
	fixtures := map[int]string{}
	for _, n := range []int{1_000, 10_000, 100_000} {
		thread := fmt.Sprintf("t%d", n)
		fixture := func(b *testing.B) {
			if _, ok := fixtures[n]; !ok {
				newThread(b, s, thread)
				bulkFill(b, s, thread, n-1)
				fixtures[n] = thread
			}
		}
		// sinceOf sets q.Since to the ts of event seq, once the fixture exists.
		sinceOf := func(seq int64) func(b *testing.B, q *agentbridge.ThreadEventsQuery) {
			return func(b *testing.B, q *agentbridge.ThreadEventsQuery) {
				evs, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: seq - 1, Limit: 1})
				if err != nil || len(evs) != 1 {
					b.Fatalf("ts of seq %d: %d events, %v", seq, len(evs), err)
				}
				q.Since = evs[0].TS
			}
		}
		for _, c := range []struct {
			name string
			q    agentbridge.ThreadEventsQuery
			prep func(*testing.B, *agentbridge.ThreadEventsQuery)
			want int
		}{
			{"tail=25", agentbridge.ThreadEventsQuery{Thread: thread, After: -1, Tail: 25}, nil, 25},
			{"after=head-10", agentbridge.ThreadEventsQuery{Thread: thread, After: int64(n - 10)}, nil, 10},
			// A v0 poller's cursor: the ts of the event 10 before the head.
			{"since=ts(head-10)", agentbridge.ThreadEventsQuery{Thread: thread, After: -1}, sinceOf(int64(n - 10)), 10},
			// The search's worst case: a ts before the whole thread.
			{"since=before-first/limit=25", agentbridge.ThreadEventsQuery{Thread: thread, After: -1, Since: "2000-01-01T00:00:00.000000Z", Limit: 25}, nil, 25},
		} {
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				fixture(b)
				if c.prep != nil {
					c.prep(b, &c.q)
				}
				durs := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					evs, err := s.ThreadEvents(ctx, c.q)
					durs = append(durs, time.Since(start))
					if err != nil || len(evs) != c.want {
						b.Fatalf("%d events, %v; want %d", len(evs), err, c.want)
					}
				}
				b.StopTimer()
				reportP50(b, durs)
			})
		}
	}
}

// BenchmarkThreads measures GET /threads' query, which since schema
// version 3 reads every thread's head and sorts them: the first page of 50
// and a page after a thread in the middle, with 100 and 1,000 threads of a
// few events each.
func BenchmarkThreads(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{100, 1_000} {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			s := openStore(b, Options{})
			for i := range n {
				th := newThread(b, s, fmt.Sprintf("t%04d", i)).ID
				mustAppend(b, s, th, msg("user", "hello"))
			}
			mid := fmt.Sprintf("t%04d", n/2)
			for _, c := range []struct{ name, after string }{{"first-page", ""}, {"after-middle", mid}} {
				b.Run(c.name, func(b *testing.B) {
					durs := make([]time.Duration, 0, b.N)
					b.ResetTimer()
					for range b.N {
						start := time.Now()
						ths, err := s.Threads(ctx, c.after, 50)
						durs = append(durs, time.Since(start))
						if err != nil || len(ths) != 50 {
							b.Fatalf("%d threads, %v; want 50", len(ths), err)
						}
					}
					b.StopTimer()
					reportP50(b, durs)
				})
			}
		})
	}
}

// BenchmarkAppend measures committed appends through the writer with 1, 8
// and 32 concurrent callers spread over 8 threads; appends/commit shows how
// much group commit batches.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	for _, g := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			s := openStore(b, Options{})
			threads := make([]string, 8)
			for i := range threads {
				threads[i] = newThread(b, s, fmt.Sprintf("t%d", i)).ID
			}
			before := s.Stats()
			var wg sync.WaitGroup
			cpu0 := testutil.ProcessCPU(b)
			b.ResetTimer()
			for w := range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += g {
						if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: threads[i%len(threads)], Input: msg("user", "benchmark message")}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64((testutil.ProcessCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			st := s.Stats()
			if batches := st.Batches - before.Batches; batches > 0 {
				b.ReportMetric(float64(st.Appends-before.Appends)/float64(batches), "appends/commit")
			}
		})
	}
}

// BenchmarkAppendReply appends agent replies, each to the event before it
// in its thread (two agents taking turns, as the coordinator posts them):
// the path of the server-assigned hop and its floor (contract 7.3), which
// BenchmarkAppend's human messages without reply_to do not take. Each
// goroutine chains in a thread of its own.
func BenchmarkAppendReply(b *testing.B) {
	ctx := context.Background()
	for _, g := range []int{1, 32} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			s := openStore(b, Options{})
			var wg sync.WaitGroup
			firsts := make([]agentbridge.Event, g)
			for w := range g {
				th := newThread(b, s, fmt.Sprintf("t%d", w)).ID
				firsts[w] = mustAppend(b, s, th, msg("user", "start"))
			}
			cpu0 := testutil.ProcessCPU(b)
			b.ResetTimer()
			for w := range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					prev := firsts[w]
					for i := w; i < b.N; i += g {
						in := msg([]string{"codex", "claude"}[i/g%2], "benchmark reply")
						in.Meta.ReplyTo = prev.ID
						res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: prev.Thread, Input: in})
						if err != nil {
							b.Error(err)
							return
						}
						prev = res.Event
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64((testutil.ProcessCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkPutReceipt writes receipts through the writer, one caller at a
// time: each a new state of its pair (changed), as a coordinator reports a
// run's queued, running and answered.
func BenchmarkPutReceipt(b *testing.B) {
	ctx := context.Background()
	s := openStore(b, Options{})
	th := newThread(b, s, "receipts").ID
	res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: msg("user", "receipts")})
	if err != nil {
		b.Fatal(err)
	}
	states := []string{agentbridge.ReceiptQueued, agentbridge.ReceiptRunning}
	b.ResetTimer()
	for i := range b.N {
		in := agentbridge.ReceiptInput{Thread: th, Event: res.Event.ID, Participant: fmt.Sprintf("p%d", i/2),
			From: "coordinator", State: states[i%2]}
		if _, changed, err := s.PutReceipt(ctx, in); err != nil || !changed {
			b.Fatalf("receipt %d: changed=%v %v", i, changed, err)
		}
	}
}
