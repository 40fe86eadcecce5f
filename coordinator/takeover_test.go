package coordinator

import (
	"testing"
	"time"
)

// TestTakeFailuresGiveUp: a claim whose take-over keeps failing is given
// up once the run retry budget is spent, by attempts or by time, and said
// so once; another claim has its own count.
func TestTakeFailuresGiveUp(t *testing.T) {
	var f takeFailures
	start := time.Now()
	for i := 1; i <= 3; i++ {
		spent, n, _ := f.failed(1, start.Add(time.Duration(i)*time.Second), 3, time.Hour)
		if spent != (i == 3) || n != i {
			t.Errorf("failure %d: spent %v, n %d", i, spent, n)
		}
	}
	if !f.givenUp(1) {
		t.Error("claim 1 is not given up after its budget")
	}
	if spent, _, _ := f.failed(1, start.Add(time.Minute), 3, time.Hour); spent {
		t.Error("the giving up was said twice")
	}
	if spent, _, _ := f.failed(2, start, 3, time.Minute); spent || f.givenUp(2) {
		t.Error("claim 2 is given up at its first failure")
	}
	if spent, _, since := f.failed(2, start.Add(2*time.Minute), 3, time.Minute); !spent || since != 2*time.Minute {
		t.Errorf("claim 2 past its window: spent %v after %s", spent, since)
	}
}
