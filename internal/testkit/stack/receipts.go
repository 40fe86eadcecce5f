package stack

import (
	"context"
	"sync"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// ReceiptLog is every receipt change of a thread's stream, in the order
// they came.
type ReceiptLog struct {
	mu  sync.Mutex
	all []agentbridge.Receipt
}

// FollowReceipts follows thread's stream from after (as client.Stream
// takes it) and records its receipts until the test ends.
func FollowReceipts(t testing.TB, cl *client.Client, thread string, after int64) *ReceiptLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := cl.Stream(ctx, thread, after)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	l := &ReceiptLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			it, err := st.Next()
			if err != nil {
				return
			}
			if it.Receipt != nil {
				l.mu.Lock()
				l.all = append(l.all, *it.Receipt)
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		st.Close()
		<-done
	})
	return l
}

// Of returns the receipts of one pair, in the order they changed.
func (l *ReceiptLog) Of(event, participant string) []agentbridge.Receipt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []agentbridge.Receipt
	for _, r := range l.all {
		if r.Event == event && r.Participant == participant {
			out = append(out, r)
		}
	}
	return out
}

// All returns every receipt change so far.
func (l *ReceiptLog) All() []agentbridge.Receipt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]agentbridge.Receipt(nil), l.all...)
}
