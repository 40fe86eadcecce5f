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
