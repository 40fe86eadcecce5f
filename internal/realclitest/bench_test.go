package realclitest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkTurn measures one turn of each real CLI against the instant
// fake model, cold (a new process and a new session every time), three
// ways: the bare CLI ("cli"), the shipped adapter script around it
// ("adapter": agent-bridge prompt and adapter-stream added), and a post
// answered through the real serve + coordinator processes ("thread": the
// trigger followed, the run recorded, the reply posted and read back).
// thread − adapter is the coordinator's share; docs/performance.md has the
// numbers.
//
//	eval "$(.ci/install-clis)"
//	go test ./internal/realclitest/ -run '^$' -bench Turn -benchtime 10x
func BenchmarkTurn(b *testing.B) {
	if skipWhy != "" {
		b.Skip(skipWhy)
	}
	for _, cli := range []string{"claude", "codex"} {
		b.Run(cli+"/cli", func(b *testing.B) {
			a := newAgent(b, cli, cli)
			args := []string{"-p", "--output-format", "stream-json", "--verbose"}
			if cli == "codex" {
				args = []string{"exec", "--json", "--skip-git-repo-check", "-"}
			}
			for b.Loop() {
				cmd := a.command(b.Context(), b, args...)
				cmd.Stdin = strings.NewReader("hello")
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v\n%s", err, out)
				}
			}
		})
		b.Run(cli+"/adapter", func(b *testing.B) {
			a := newAgent(b, cli, cli)
			for b.Loop() {
				res := a.runAdapter(context.Background(), b)
				if !res.OK() {
					b.Fatalf("exit %d: %s", res.ExitCode, res.StderrTail)
				}
			}
		})
		b.Run(cli+"/thread", func(b *testing.B) {
			a := newAgent(b, cli, cli)
			s := newStack(b, a)
			i := 0
			var waited, coord time.Duration
			for b.Loop() {
				i++
				// A new thread each time: a new session, as the
				// other two measure.
				thread := s.thread(fmt.Sprintf("bench %d", i))
				start := time.Now()
				trig := s.ask(thread, a, "hello")
				// Polled tightly: the wait is what is measured.
				for len(s.answers(thread, trig.ID)) == 0 {
					if time.Since(start) > replyTimeout {
						b.Fatal("no reply")
					}
					time.Sleep(2 * time.Millisecond)
				}
				took := time.Since(start)
				waited += took
				// The run's own time, as the coordinator measured
				// it; the rest is the coordinator's share.
				b.StopTimer()
				inv := s.finished(thread, a.id, 1)
				coord += took - time.Duration(inv.DurationMS)*time.Millisecond
				b.StartTimer()
			}
			b.ReportMetric(float64(waited.Milliseconds())/float64(i), "ms/reply")
			b.ReportMetric(float64(coord.Milliseconds())/float64(i), "coordinator-ms/reply")
		})
	}
}
