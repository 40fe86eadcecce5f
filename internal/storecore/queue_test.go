package storecore

import (
	"context"
	"errors"
	"testing"
)

// TestQueue: a closed store queues nothing, a done ctx queues nothing, and
// Await answers closed when the writer stopped without answering.
func TestQueue(t *testing.T) {
	t.Parallel()
	reqs := make(chan int, 1)
	done := make(chan struct{})
	if err := Enqueue(context.Background(), reqs, done, 1); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if got := Take(reqs, nil, 5); len(got) != 1 || got[0] != 1 {
		t.Fatalf("Take = %v, want [1]", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Enqueue(ctx, reqs, done, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("Enqueue with a done ctx = %v, want context.Canceled", err)
	}
	if err := DroppedBeforeCommit(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("DroppedBeforeCommit = %v", err)
	}
	close(done)
	if err := Enqueue(context.Background(), reqs, done, 3); !errors.Is(err, ErrClosed) {
		t.Errorf("Enqueue after Close = %v, want ErrClosed", err)
	}
	stopped := make(chan struct{})
	close(stopped)
	reply := make(chan string, 1)
	if got := Await(reply, stopped, "closed"); got != "closed" {
		t.Errorf("Await with no answer = %q", got)
	}
	reply <- "answer"
	if got := Await(reply, stopped, "closed"); got != "answer" {
		t.Errorf("Await with a buffered answer = %q", got)
	}
}

// TestRunWriterDrainsOnClose: after done, what is still queued is
// committed in batches of at most max, then stopped is closed.
func TestRunWriterDrainsOnClose(t *testing.T) {
	t.Parallel()
	reqs := make(chan int, 10)
	for i := range 5 {
		reqs <- i
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	close(done)
	var batches [][]int
	RunWriter(reqs, done, stopped, 2, func(first int) {
		batches = append(batches, Take(reqs, []int{first}, 2))
	}, func(b []int) { batches = append(batches, b) })
	<-stopped
	n := 0
	for _, b := range batches {
		if len(b) > 2 {
			t.Errorf("batch %v over the cap", b)
		}
		n += len(b)
	}
	if n != 5 {
		t.Errorf("committed %d requests, want 5 (%v)", n, batches)
	}
}

// TestNotifier: Wake closes the channel Notify gave out and installs a
// fresh one.
func TestNotifier(t *testing.T) {
	t.Parallel()
	n := NewNotifier()
	ch := n.Notify()
	n.Wake()
	select {
	case <-ch:
	default:
		t.Fatal("Wake did not close the channel")
	}
	select {
	case <-n.Notify():
		t.Fatal("the fresh channel is already closed")
	default:
	}
}
