package testutil

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a TB that records a failure instead of stopping the test.
type recorder struct{ failed string }

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestCheckGoroutinesCatchesALeak(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	check := checkGoroutines(r, 100*time.Millisecond)
	stop := make(chan struct{})
	go func() { <-stop }()
	check()
	close(stop)
	if !strings.Contains(r.failed, "still running after shutdown") {
		t.Fatalf("a leaked goroutine was not reported: %q", r.failed)
	}
}

func TestCheckGoroutinesPassesWhenAllExit(t *testing.T) {
	r := &recorder{}
	check := CheckGoroutines(r)
	done := make(chan struct{})
	go func() { close(done) }()
	<-done
	check()
	if r.failed != "" {
		t.Fatalf("reported a leak where none is: %s", r.failed)
	}
}

// TestCheckGoroutinesCountsOnlyItsTest: a goroutine started by a goroutine
// the test started counts, one started by another test (here: before the
// mark, from a goroutine without it) does not.
func TestCheckGoroutinesCountsOnlyItsTest(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	defer close(stop)
	other := make(chan struct{})
	go func() { close(other); <-stop }()
	<-other

	r := &recorder{}
	check := checkGoroutines(r, 100*time.Millisecond)
	check()
	if r.failed != "" {
		t.Fatalf("counted another test's goroutine: %s", r.failed)
	}

	r = &recorder{}
	check = checkGoroutines(r, 100*time.Millisecond)
	started := make(chan struct{})
	go func() {
		go func() { close(started); <-stop }()
	}()
	<-started
	check()
	if !strings.Contains(r.failed, "still running after shutdown") {
		t.Fatalf("a goroutine's goroutine that leaked was not reported: %q", r.failed)
	}
}

// TestWaitProgressFollowsTheWork: a wait that takes longer than its idle
// bound passes while the work moves, and fails once it stands still.
func TestWaitProgressFollowsTheWork(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	start := time.Now()
	n := 0
	WaitProgress(r, 60*time.Millisecond, "steps", func() (int, bool) {
		// A step every 30 ms, for three times the idle bound.
		n = int(time.Since(start) / (30 * time.Millisecond))
		return n, time.Since(start) > 180*time.Millisecond
	})
	if r.failed != "" {
		t.Fatalf("a wait whose work moved failed: %s", r.failed)
	}
	WaitProgress(r, 60*time.Millisecond, "steps", func() (int, bool) { return 7, false })
	if !strings.Contains(r.failed, "no progress for 60ms (stuck at 7)") {
		t.Fatalf("a stuck wait did not fail as such: %q", r.failed)
	}
}
