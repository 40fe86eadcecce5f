package backoff

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestNextDoublesWithinBounds: each step doubles from Min up to Max, the
// delay is between half and all of the step, and Reset starts again.
func TestNextDoublesWithinBounds(t *testing.T) {
	t.Parallel()
	b := Backoff{Min: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	steps := []time.Duration{10, 20, 40, 80, 80, 80}
	for round := 0; round < 2; round++ {
		for i, step := range steps {
			step *= time.Millisecond
			if d := b.Next(); d < step/2 || d > step {
				t.Fatalf("round %d, attempt %d: Next = %v, want within [%v, %v]", round, i, d, step/2, step)
			}
		}
		b.Reset()
	}
	var zero Backoff
	if d := zero.Next(); d < DefaultMin/2 || d > DefaultMin {
		t.Fatalf("zero Backoff's first Next = %v, want within [%v, %v]", d, DefaultMin/2, DefaultMin)
	}
}

// TestSleep waits the whole delay on the bubble's clock, and returns false
// as soon as its context ends.
func TestSleep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Sleep(t.Context(), time.Hour) {
			t.Fatal("Sleep returned false with a live context")
		}
		if got := time.Since(start); got != time.Hour {
			t.Fatalf("Sleep(1h) returned after %v", got)
		}

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan bool)
		start = time.Now()
		go func() { done <- Sleep(ctx, time.Hour) }()
		synctest.Wait()
		cancel()
		if <-done {
			t.Fatal("Sleep returned true after its context ended")
		}
		if got := time.Since(start); got != 0 {
			t.Fatalf("a cancelled Sleep returned after %v of bubble time", got)
		}
	})
}

// TestRetryLoopPacing runs a retry loop the way its users do (Next, then
// Sleep) on the bubble's clock: ten failures with a step capped at one
// second take between half and all of the sum of the steps.
func TestRetryLoopPacing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := Backoff{Min: 50 * time.Millisecond, Max: time.Second}
		start := time.Now()
		var lo, hi time.Duration
		for i := range 10 {
			step := min(b.Min<<i, b.Max)
			lo, hi = lo+step/2, hi+step
			if !Sleep(t.Context(), b.Next()) {
				t.Fatal("Sleep returned false with a live context")
			}
		}
		if got := time.Since(start); got < lo || got > hi {
			t.Fatalf("ten retries took %v of bubble time, want within [%v, %v]", got, lo, hi)
		}
	})
}
