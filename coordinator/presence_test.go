package coordinator

import (
	"sync"
	"testing"
	"time"
)

// TestPresenceChainWaitWhileReporting: wait runs while the availability
// loop keeps registering idle reports (as at shutdown) and returns once
// none is active. With a sync.WaitGroup, -race reported the reports' Add
// racing Wait (CI once, in three coordinator tests; here at once).
func TestPresenceChainWaitWhileReporting(t *testing.T) {
	var p presenceChain
	stop := make(chan struct{})
	var reporters sync.WaitGroup
	for i := range 4 {
		reporters.Add(1)
		go func() {
			defer reporters.Done()
			k := pairKey{thread: "t", participant: string(rune('a' + i))}
			for {
				select {
				case <-stop:
					return
				default:
				}
				if done, ok := p.nextIfIdle(k); ok {
					p.finish(k, done)
				}
				prev, done := p.next(k)
				<-prev
				p.finish(k, done)
			}
		}()
	}
	for range 5000 {
		p.wait()
	}
	close(stop)
	reporters.Wait()
	p.mu.Lock()
	active, pairs := p.active, len(p.last)
	p.mu.Unlock()
	if active != 0 || pairs != 0 {
		t.Fatalf("%d reporters active and %d pairs remembered after all finished", active, pairs)
	}
	// A reporter still running holds wait until it finishes.
	k := pairKey{thread: "t", participant: "slow"}
	_, done := p.next(k)
	waited := make(chan struct{})
	go func() { p.wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("wait returned while a reporter was active")
	case <-time.After(50 * time.Millisecond):
	}
	p.finish(k, done)
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("wait did not return after the last reporter finished")
	}
}
