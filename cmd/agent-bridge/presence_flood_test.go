package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
)

// TestPresenceFlood is the flood against a real serve: 300
// presence reports with 1 MB details are each refused (413
// details_too_large), then 300 reports of 4 KiB from 300 participants fill
// the thread's 256 places and the rest are refused (429
// too_many_presence); serve's resident memory stays under 100 MiB all
// through, and one GET of the thread's presence stays small.
func TestPresenceFlood(t *testing.T) {
	stack.Heavy(t)
	const limitMiB = 100
	bin := buildServeBinary(t)
	p := startServe(t, bin, filepath.Join(t.TempDir(), "bridge.db"), "--open")
	c := &http.Client{Timeout: 30 * time.Second}
	post := func(path, body string) int {
		t.Helper()
		resp, err := c.Post(p.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	maxRSS := 0
	sample := func() {
		if kb := vmRSSKiB(t, p.Cmd.Process.Pid); kb > maxRSS {
			maxRSS = kb
		}
	}
	if st := post("/threads", `{"id":"flood"}`); st != 200 {
		t.Fatalf("create thread: %d", st)
	}
	sample()
	start := maxRSS
	big := `{"pad":"` + strings.Repeat("x", 1_000_000) + `"}`
	for i := range 300 {
		if st := post("/threads/flood/presence", fmt.Sprintf(`{"from":"flood-%d","state":"thinking","details":%s}`, i, big)); st != http.StatusRequestEntityTooLarge {
			t.Fatalf("report %d with 1 MB details: %d, want 413", i, st)
		}
		if i%10 == 0 {
			sample()
		}
	}
	four := `{"pad":"` + strings.Repeat("x", 4000) + `"}`
	accepted := 0
	for i := range 300 {
		switch st := post("/threads/flood/presence", fmt.Sprintf(`{"from":"fill-%d","state":"idle","details":%s}`, i, four)); st {
		case 200:
			accepted++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("report %d with 4 KB details: %d", i, st)
		}
		if i%10 == 0 {
			sample()
		}
	}
	if accepted != 256 {
		t.Fatalf("%d of 300 participants were accepted, want the thread's 256", accepted)
	}
	resp, err := c.Get(p.URL + "/threads/flood/presence")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sample()
	t.Logf("serve RSS %d KiB at start, at most %d KiB through the flood; GET presence %d bytes", start, maxRSS, n)
	if maxRSS > limitMiB<<10 {
		t.Fatalf("serve's RSS reached %d KiB, over %d MiB", maxRSS, limitMiB)
	}
	if n > 2<<20 {
		t.Fatalf("GET presence answered %d bytes", n)
	}
}

// vmRSSKiB is the resident set size of process pid, from /proc.
func vmRSSKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}
