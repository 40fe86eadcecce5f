package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// fakeLease is a ledger lease the test loses at will.
type fakeLease struct {
	lost     chan struct{}
	released chan struct{}
}

func newFakeLease() *fakeLease {
	return &fakeLease{lost: make(chan struct{}), released: make(chan struct{})}
}

func (l *fakeLease) Lost() <-chan struct{} { return l.lost }

func (l *fakeLease) Release() error { close(l.released); return nil }

// TestLeaseTermsBackOff runs the lease's term loop on a testing/synctest
// clock: terms that end in a fault are retried after a capped, growing
// backoff with jitter (each wait between half and all of 200 ms, 400 ms, …
// 5 s); a lost lease is released and retried too; a term longer than the
// cap starts the backoff again from its floor; an error of a coordinator
// that never worked and is no passing fault ends the loop at once; and
// the end of ctx ends the loop during a wait, with no further term.
func TestLeaseTermsBackOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		logs := &testutil.Buffer{}
		logger := slog.New(slog.NewTextHandler(logs, nil))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()

		var (
			starts []time.Time
			leases []*fakeLease
		)
		hold := func(ctx context.Context) (*heldLease, error) {
			starts = append(starts, time.Now())
			l := newFakeLease()
			leases = append(leases, l)
			return watchLease(ctx, l, logger), nil
		}
		const faults = 8
		work := func(h *heldLease) error {
			switch n := len(starts); {
			case n <= faults:
				return fmt.Errorf("%w: the ledger went away", errTermStarted)
			case n == faults+1:
				// A lost lease ends the term: the work sees its context end.
				close(leases[n-1].lost)
				<-h.ctx.Done()
				return nil
			case n == faults+2:
				time.Sleep(leaseRetryMax + time.Second) // a long term
				return fmt.Errorf("%w: stopped", errTermStarted)
			default:
				cancel() // the process stops during the next wait
				return fmt.Errorf("%w: stopped", errTermStarted)
			}
		}
		if err := leaseTerms(ctx, hold, logger, work); err != nil {
			t.Fatalf("leaseTerms = %v, want nil when ctx ends", err)
		}
		if len(starts) != faults+3 {
			t.Fatalf("%d terms, want %d (none after ctx ended)", len(starts), faults+3)
		}
		for i, l := range leases {
			select {
			case <-l.released:
			default:
				t.Errorf("lease %d was not released", i+1)
			}
		}
		step := leaseRetryMin
		for i := 1; i < len(starts); i++ {
			wait := starts[i].Sub(starts[i-1])
			if i == faults+2 {
				wait -= leaseRetryMax + time.Second // the long term itself
				step = leaseRetryMin                // starts again from the floor
			}
			if wait < step/2 || wait > step {
				t.Errorf("wait before term %d: %v, want between %v and %v", i+1, wait, step/2, step)
			}
			step = min(2*step, leaseRetryMax)
		}
		if n := strings.Count(logs.String(), "lost the coordinator lease"); n != 1 {
			t.Errorf("the lost lease is logged %d times, want once:\n%s", n, logs.String())
		}
	})
}

// TestLeaseTermsNeverWorked checks that a coordinator whose first term
// fails with an error that is no passing fault (a config that can never
// work) gets that error back at once, and releases its lease.
func TestLeaseTermsNeverWorked(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l := newFakeLease()
		terms := 0
		hold := func(ctx context.Context) (*heldLease, error) {
			terms++
			return watchLease(ctx, l, slog.New(slog.DiscardHandler)), nil
		}
		bad := errors.New("agents.x.command: must be set")
		err := leaseTerms(t.Context(), hold, slog.New(slog.DiscardHandler), func(*heldLease) error { return bad })
		if !errors.Is(err, bad) || terms != 1 {
			t.Fatalf("leaseTerms = %v after %d terms, want %v after 1", err, terms, bad)
		}
		<-l.released
	})
}
