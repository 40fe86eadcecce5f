// Package testutil holds helpers shared by the tests of several packages:
// polling with a deadline, building the project's own programs, and the
// process CPU time benchmarks report.
package testutil

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TB is the part of testing.TB the helpers need.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// WaitFor polls cond every few milliseconds until it returns true or the
// timeout passes, then fails the test with the description. Tests
// synchronise with it instead of sleeping.
func WaitFor(t TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	delay := time.Millisecond
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
			return
		}
		time.Sleep(delay)
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// WaitProgress polls progress until it reports done, and fails only when
// the work it counts stands still for idle: a wait for a long stream of
// work (replies to a hundred triggers, a run through restarts) follows
// that work, so a machine busy with other tests slows it without failing
// it, while a stuck one still fails within idle of its last step.
func WaitProgress(t TB, idle time.Duration, what string, progress func() (n int, done bool)) {
	t.Helper()
	last, moved := -1, time.Now()
	delay := time.Millisecond
	for {
		n, done := progress()
		if done {
			return
		}
		if n != last {
			last, moved = n, time.Now()
		}
		if time.Since(moved) > idle {
			t.Fatalf("waiting for %s: no progress for %v (stuck at %d)", what, idle, last)
			return
		}
		time.Sleep(delay)
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// ModuleRoot returns the repository root (the folder holding go.mod),
// found from the working directory of the test.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// BuildTags are the build tags every build of agent-bridge needs: SQLite's
// full-text search, which the bridge's store refuses to open without
// (docs/storage.md "Search"). Tests that build a program pass them.
const BuildTags = "sqlite_fts5"

// GoBuild builds the package pkg (a path relative to the module root, such as
// "./cmd/agent-bridge") into dir and returns the binary's path. With race
// set, the binary is built with -race.
func GoBuild(ctx context.Context, pkg, dir string, race bool) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	name := filepath.Base(pkg)
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	out := filepath.Join(dir, name)
	args := []string{"build", "-tags", BuildTags, "-o", out}
	if race {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

// Buffer is a bytes.Buffer safe for concurrent use: a daemon or a running
// subcommand writes to it while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Reset discards everything written so far.
func (s *Buffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

// CheckGoroutines marks the calling goroutine (the test's) and returns a
// check to call once the test has shut everything down: it closes the
// default transport's idle connections (whose reader goroutines would
// otherwise linger) and waits until no more marked goroutines run than at
// the start, failing with their stacks if some never exit. Tests that start
// daemons end with it, so a shutdown path that forgets a goroutine fails a
// test.
//
// The mark is a pprof label, which every goroutine the test starts
// inherits, down to the goroutines those start: so only the test's own
// goroutines count, and tests that check run in parallel (t.Parallel)
// without counting each other's.
func CheckGoroutines(t TB) func() { return checkGoroutines(t, 10*time.Second) }

// goroutineMark is the pprof label key CheckGoroutines marks with.
const goroutineMark = "agent-bridge-check"

// checkGoroutines is CheckGoroutines with the time goroutines get to wind
// down.
func checkGoroutines(t TB, wait time.Duration) func() {
	// A fresh pointer, alive as long as the check: unique among the
	// checks running at once.
	mark := new(int)
	id := fmt.Sprintf("%p", mark)
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(goroutineMark, id)))
	base, _ := markedGoroutines(id)
	return func() {
		t.Helper()
		deadline := time.Now().Add(wait)
		for {
			if tr, ok := http.DefaultTransport.(*http.Transport); ok {
				tr.CloseIdleConnections()
			}
			n, stacks := markedGoroutines(id)
			if n <= base {
				runtime.KeepAlive(mark)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d goroutines of this test still running after shutdown, %d at the start:\n%s", n, base, stacks)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// markedGoroutines counts the goroutines labelled with mark id, from the
// goroutine profile (each record: "N @ pcs", then "# labels: {…}" when the
// goroutines carry labels, then the stack), and returns their records.
func markedGoroutines(id string) (int, string) {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	want := fmt.Sprintf("%q:%q", goroutineMark, id)
	var (
		n       int
		records []string
	)
	// The profile starts with a line of its own ("goroutine profile: …").
	_, profile, _ := strings.Cut(buf.String(), "\n")
	for _, rec := range strings.Split(profile, "\n\n") {
		lines := strings.SplitN(rec, "\n", 3)
		if len(lines) < 2 || !strings.HasPrefix(lines[1], "# labels: ") || !strings.Contains(lines[1], want) {
			continue
		}
		var count int
		if _, err := fmt.Sscanf(lines[0], "%d @", &count); err != nil {
			continue
		}
		n += count
		records = append(records, rec)
	}
	return n, strings.Join(records, "\n\n")
}

// ProcessCPU returns the user and system CPU time the calling process has
// used so far. Benchmarks report CPU per operation from two readings, which
// separates what an operation costs from how long it waits for a core.
func ProcessCPU(t TB) time.Duration { return cpu(t, syscall.RUSAGE_SELF) }

// ChildrenCPU is ProcessCPU for the calling process's children that have
// been waited for (the adapters a benchmark's runs started).
func ChildrenCPU(t TB) time.Duration { return cpu(t, syscall.RUSAGE_CHILDREN) }

func cpu(t TB, who int) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Within returns what next returns, failing the test when next has not
// returned within d: then stop is called (closing the stream next reads,
// say) so that next returns, and the test fails with the description. It
// bounds in time the loops of tests and benchmarks that wait on a stream.
func Within[T any](t TB, d time.Duration, what string, stop func(), next func() (T, error)) T {
	t.Helper()
	var expired atomic.Bool
	timer := time.AfterFunc(d, func() {
		expired.Store(true)
		stop()
	})
	v, err := next()
	timer.Stop()
	switch {
	case expired.Load():
		t.Fatalf("timed out after %s waiting for %s", d, what)
	case err != nil:
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return v
}

// FreeAddr returns a loopback address that was free a moment ago: for a
// child process told where to listen, or a URL where nothing answers.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
