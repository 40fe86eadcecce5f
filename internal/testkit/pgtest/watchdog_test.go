package pgtest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// childEnv makes the test binary, run again by
// TestKilledProcessLeavesNoServer, the process that starts a server and is
// killed.
const childEnv = "PGTEST_WATCHDOG_CHILD"

// TestKilledProcessLeavesNoServer kills -9 a process that started a test
// server: its watchdog must stop the server and remove its folder.
func TestKilledProcessLeavesNoServer(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		runChild()
		return
	}
	if testing.Short() {
		t.Skip("starts PostgreSQL; -short leaves it out")
	}
	if _, err := binDir(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL for tests: %v", err)
		}
		t.Skipf("PostgreSQL tests skipped: %v", err)
	}
	cmd, out := testutil.StartSelf(t, "TestKilledProcessLeavesNoServer", childEnv+"=1")
	var port int
	var dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if n, _ := fmt.Sscanf(sc.Text(), "started %d %s", &port, &dir); n == 2 {
			break
		}
	}
	if dir == "" {
		t.Fatal("the child process never reported its server")
	}
	if !accepts(port) {
		t.Fatalf("the child's server on port %d accepts no connection", port)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(2 * time.Minute)
	for accepts(port) || exists(dir) {
		if time.Now().After(deadline) {
			t.Fatalf("2 minutes after kill -9, the server on port %d still runs (%v) or its folder %s is still there (%v)",
				port, accepts(port), dir, exists(dir))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runChild starts a server, reports its port and folder, and waits to be
// killed (at most a minute, should the parent die first).
func runChild() {
	s := New()
	if err := s.start(); err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		os.Exit(2)
	}
	fmt.Println("started", strconv.Itoa(s.port), s.dir)
	time.Sleep(time.Minute)
	s.Stop()
}

func accepts(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
