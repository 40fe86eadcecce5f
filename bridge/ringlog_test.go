package bridge

import (
	"slices"
	"testing"
)

// TestRingLog wakes a watcher on add, returns the changes after a version
// through the filter, and skips the oldest for a reader that fell more than
// the ring's size behind.
func TestRingLog(t *testing.T) {
	t.Parallel()
	r := newRingLog[int](3)
	wake, v := r.watch()
	r.add(1)
	select {
	case <-wake:
	default:
		t.Fatal("add did not wake the watcher")
	}
	r.add(2)
	if got, nv := r.since(v, nil); !slices.Equal(got, []int{1, 2}) || nv != 2 {
		t.Fatalf("since(%d) = %v, %d; want [1 2], 2", v, got, nv)
	}
	for _, x := range []int{3, 4, 5} {
		r.add(x)
	}
	if got, nv := r.since(0, nil); !slices.Equal(got, []int{3, 4, 5}) || nv != 5 {
		t.Fatalf("since(0) after a wrap = %v, %d; want [3 4 5], 5", got, nv)
	}
	odd := func(x int) bool { return x%2 == 1 }
	if got, _ := r.since(3, odd); !slices.Equal(got, []int{5}) {
		t.Fatalf("since(3, odd) = %v, want [5]", got)
	}
}
