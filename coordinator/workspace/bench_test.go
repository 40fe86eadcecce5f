package workspace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testbridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// BenchmarkRunChange measures what a workspace adds to a run (contract
// 8.1): after an agent changed 10 files of a 10,000-file repository's
// warm worktree, the commit (add, write-tree, commit-tree, update-ref),
// the change's files and +/−, its unified diff, and its upload as an
// attachment to a real bridge (SQLite) over HTTP. "tracked" is what the
// coordinator does: the Tracker watching the worktree, only the changed
// paths staged; "whole" stages the whole worktree (git add --all stats
// every file), as when the tracker cannot vouch for its list. Each
// reports the p50 and p90 of one run's share in ms (wall clock), and the
// CPU time its git processes and the benchmark's own process spent per
// run (cpu-ms: what the wall clock comes to on an idle machine, less the
// disk's waits); the goal is ≤ 100 ms p50. upload-cpu-ms is the upload's
// share of cpu-ms (the bridge runs in the benchmark's process).
func BenchmarkRunChange(b *testing.B) {
	ctx := context.Background()
	files := map[string]string{}
	for i := range 10_000 {
		files[fmt.Sprintf("src/d%02d/f%05d.go", i%100, i)] = fmt.Sprintf("package d\n\n// file %d\nvar X%d = %d\n", i, i, i)
	}
	repo := testutil.GitRepo(b, files)
	var g Git
	tr := Tree{Repo: repo, Path: filepath.Join(b.TempDir(), "wt"), Branch: "agent-bridge/bench/claude", Base: "main"}
	if err := g.Ensure(ctx, tr); err != nil {
		b.Fatal(err)
	}
	trk, err := NewTracker(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer trk.Close()
	if err := trk.Watch(tr); err != nil {
		b.Fatal(err)
	}
	br := testbridge.New(b, "")
	cl := client.New(br.URL())
	th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	// Warm the worktree's index (a first status after checkout stats
	// every file), as the worktree of an agent's earlier runs is; it is
	// the tracker's first commit, which stages everything.
	if _, err := g.CommitTracked(ctx, trk, tr, Commit{Author: "claude", Thread: th.ID, Event: "warm", When: time.Now()}); err != nil {
		b.Fatal(err)
	}
	run := 0
	for _, mode := range []struct {
		name string
		trk  *Tracker
	}{{"tracked", trk}, {"whole", nil}} {
		b.Run(mode.name, func(b *testing.B) {
			var took []time.Duration
			var upCPU time.Duration
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				run++
				for k := range 10 {
					p := filepath.Join(tr.Path, fmt.Sprintf("src/d%02d/f%05d.go", k, k*100+k))
					if err := os.WriteFile(p, []byte(fmt.Sprintf("package d\n\n// run %d changed it\nvar X = %d\n", run, run)), 0o644); err != nil {
						b.Fatal(err)
					}
				}
				parent, err := g.Head(ctx, tr.Path)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				commit, err := g.CommitTracked(ctx, mode.trk, tr, Commit{Author: "claude", Subject: "a run", Thread: th.ID, Event: fmt.Sprint("e", run), When: time.Now()})
				if err != nil {
					b.Fatal(err)
				}
				fs, _, _, err := g.Files(ctx, tr.Path, parent, commit)
				if err != nil || len(fs) != 10 {
					b.Fatalf("files %d, %v", len(fs), err)
				}
				diff, _, err := g.Diff(ctx, tr.Path, parent, commit, agentbridge.MaxDiffBytes)
				if err != nil {
					b.Fatal(err)
				}
				up := cpuTime()
				if _, err := cl.UploadAttachment(ctx, th.ID, "change.diff", bytes.NewReader(diff)); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
				upCPU += cpuTime() - up
			}
			b.StopTimer()
			cpu := cpuTime() - cpu0
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
			b.ReportMetric(ms(took[len(took)*9/10]), "p90-ms")
			b.ReportMetric(ms(cpu)/float64(b.N), "cpu-ms")
			b.ReportMetric(ms(upCPU)/float64(b.N), "upload-cpu-ms")
		})
	}
}

// cpuTime is the CPU time (user and system) this process and its waited-for
// children have used. It counts the benchmark's file writes between the
// timed parts too, which are small next to git's.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}
