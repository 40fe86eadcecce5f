package storetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// testPairCodes: a pairing code is taken once, by its hash, with its
// device name; an expired one is not given; the limit counts the codes
// still waiting (expired ones are dropped first); of callers taking one
// code at once, exactly one gets it.
func testPairCodes(t *testing.T, newStore Factory) {
	ps, ok := newStore(t, nil).(agentbridge.PairStore)
	if !ok {
		t.Skip("the store keeps no pairing codes")
	}
	ctx := context.Background()
	now := time.Now()
	hash := func(code string) []byte { h := sha256.Sum256([]byte(code)); return h[:] }
	add := func(code string, expires time.Time, limit int) bool {
		t.Helper()
		ok, err := ps.AddPairCode(ctx, hash(code), "phone "+code, now, expires, limit)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !add("a", now.Add(time.Minute), 2) || !add("b", now.Add(time.Millisecond), 2) {
		t.Fatal("a code under the limit was refused")
	}
	if add("c", now.Add(time.Minute), 2) {
		t.Error("a third code was stored with a limit of 2")
	}
	if name, ok, err := ps.TakePairCode(ctx, hash("a"), now); err != nil || !ok || name != "phone a" {
		t.Errorf("take a = %q, %v, %v; want phone a", name, ok, err)
	}
	if _, ok, err := ps.TakePairCode(ctx, hash("a"), now); err != nil || ok {
		t.Errorf("a taken twice: %v, %v", ok, err)
	}
	if _, ok, err := ps.TakePairCode(ctx, hash("b"), now.Add(time.Second)); err != nil || ok {
		t.Errorf("an expired code was given: %v, %v", ok, err)
	}
	later := now.Add(time.Hour)
	for i := range 2 {
		if ok, err := ps.AddPairCode(ctx, hash(fmt.Sprint("d", i)), "d", later, later.Add(time.Minute), 2); err != nil || !ok {
			t.Fatalf("with the old codes lapsed, code %d: %v, %v", i, ok, err)
		}
	}
	var wg sync.WaitGroup
	got := make(chan bool, 8)
	for range 8 {
		wg.Go(func() {
			_, ok, err := ps.TakePairCode(ctx, hash("d0"), later)
			if err != nil {
				t.Error(err)
			}
			got <- ok
		})
	}
	wg.Wait()
	close(got)
	n := 0
	for ok := range got {
		if ok {
			n++
		}
	}
	if n != 1 {
		t.Errorf("one code taken by %d of 8 callers at once, want 1", n)
	}
}
