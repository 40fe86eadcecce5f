package acp

import (
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestTurnClockPausesForAPerson: the adapter timeout does not run while a
// permission request waits (pauses nest), runs again after, and fires
// when the time is up.
func TestTurnClockPausesForAPerson(t *testing.T) {
	k := newTurnClock(time.Hour)
	k.pause()
	k.pause()
	if k.timer.Stop() {
		t.Error("the clock ran while a permission request waited")
	}
	k.resume()
	if k.timer.Stop() {
		t.Error("the clock ran while a second request still waited")
	}
	k.resume()
	if !k.timer.Stop() {
		t.Error("the clock did not run again once no request waited")
	}
	if k.left <= 0 || k.left > time.Hour {
		t.Errorf("left %v after the pauses", k.left)
	}

	done := newTurnClock(time.Millisecond)
	testutil.WaitFor(t, 5*time.Second, "the clock to fire", func() bool {
		select {
		case <-done.C():
			return true
		default:
			return false
		}
	})
	done.pause()
	done.resume() // after the time is up: stays fired, no panic
	done.stop()
	if never := newTurnClock(0); never.timer != nil {
		t.Error("a zero timeout has a timer")
	}
}
