//go:build unix

package stack

import (
	"path/filepath"
	"testing"
)

// TestSlotTakesTurns: a slot another holder has is refused without
// waiting, and taken once it is released; the lock is per open file, so
// two tests of one process take turns as two processes do.
func TestSlotTakesTurns(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "slot-0")
	release, ok, err := takeSlot(path)
	if err != nil || !ok {
		t.Fatalf("a free slot: ok %v, err %v", ok, err)
	}
	if _, ok, err := takeSlot(path); err != nil || ok {
		t.Fatalf("a held slot: ok %v, err %v; want refused", ok, err)
	}
	release()
	again, ok, err := takeSlot(path)
	if err != nil || !ok {
		t.Fatalf("a released slot: ok %v, err %v", ok, err)
	}
	again()
}
