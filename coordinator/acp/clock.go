package acp

import (
	"sync"
	"time"
)

// turnClock is an ACP turn's adapter timeout, stopped while the turn waits
// for a person's answer to a permission request: that wait has its own
// bound (permission_timeout_s, an hour by default, for a person away from
// the desk), and the agent, busy in its turn, stays warm meanwhile.
type turnClock struct {
	fired chan struct{} // closed when the time is up

	mu      sync.Mutex
	left    time.Duration // what remains when the clock was last stopped
	since   time.Time     // when it last started running
	waiting int           // permission requests being waited for
	timer   *time.Timer
	once    sync.Once
}

// newTurnClock starts a clock of d; d ≤ 0 never fires.
func newTurnClock(d time.Duration) *turnClock {
	k := &turnClock{fired: make(chan struct{}), left: d, since: time.Now()}
	if d > 0 {
		k.timer = time.AfterFunc(d, k.fire)
	}
	return k
}

func (k *turnClock) fire() { k.once.Do(func() { close(k.fired) }) }

// C is closed when the turn's time is up.
func (k *turnClock) C() <-chan struct{} { return k.fired }

// pause stops the clock while a permission request waits; pauses nest.
func (k *turnClock) pause() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.waiting++
	if k.waiting == 1 && k.timer != nil && k.timer.Stop() {
		k.left -= time.Since(k.since)
	}
}

// resume runs the clock again once no request waits.
func (k *turnClock) resume() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.waiting--
	if k.waiting == 0 && k.timer != nil {
		select {
		case <-k.fired:
			return
		default:
		}
		k.since = time.Now()
		k.timer.Reset(max(k.left, 0))
	}
}

// stop releases the timer.
func (k *turnClock) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.timer != nil {
		k.timer.Stop()
	}
}
