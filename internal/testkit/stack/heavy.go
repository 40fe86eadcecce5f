package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// SlotsEnv sets how many heavy tests run at once on this machine (by
// default, as many as it has cores).
const SlotsEnv = "AGENT_BRIDGE_HEAVY_SLOTS"

// Heavy marks t as a heavy end-to-end test, one that starts the real
// binary as processes (a bridge, coordinators, their agents): it runs in
// parallel with the package's other tests, is skipped with -short, and
// holds one of the machine's heavy-test slots until it ends. go test runs
// each package's tests in a process of its own, several at once, so the
// slots are lock files under os.TempDir() that every test process (also a
// second `go test ./...` beside the first) takes turns on: on a busy
// 2-core machine, two such tests run at a time instead of every package's
// share, and each one's waits are not eaten by the others' CPU.
func Heavy(t *testing.T) {
	t.Helper()
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	n := runtime.NumCPU()
	if v, err := strconv.Atoi(os.Getenv(SlotsEnv)); err == nil && v > 0 {
		n = v
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("agent-bridge-heavy-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("heavy-test slots: %v", err)
	}
	start := time.Now()
	logged := false
	for {
		for i := range n {
			release, ok, err := takeSlot(filepath.Join(dir, fmt.Sprintf("slot-%d", i)))
			if err != nil {
				t.Fatalf("heavy-test slots: %v", err)
			}
			if ok {
				if logged {
					t.Logf("waited %v for a heavy-test slot", time.Since(start).Round(time.Millisecond))
				}
				t.Cleanup(release)
				return
			}
		}
		if !logged && time.Since(start) > 5*time.Second {
			t.Logf("waiting for one of %d heavy-test slots (%s: %s)", n, SlotsEnv, dir)
			logged = true
		}
		// A slot frees when a test ends; polling is how a test waits
		// for one of several locks held by other processes.
		time.Sleep(100 * time.Millisecond)
	}
}
