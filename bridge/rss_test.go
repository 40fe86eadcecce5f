//go:build rss

package bridge

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestRSS measures the resident memory of a real `agent-bridge serve`
// holding 1M events with 1,000 idle SSE subscribers (500 global, 500
// per-thread). Run: go test -tags rss -run TestRSS -v ./bridge/
func TestRSS(t *testing.T) {
	t.Parallel()
	const threads, events, subscribers = 100, 1_000_000, 1000
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "bridge.db")
	buildFixture(t, db, threads, events)

	bin, err := testutil.GoBuild(ctx, "./cmd/agent-bridge", dir, false)
	if err != nil {
		t.Fatal(err)
	}
	// --open: the test measures memory; its clients send no token.
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", db, "--open")
	cmd.Env = append(os.Environ(), "BRIDGE_TOKEN=")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	url := ""
	sc := bufio.NewScanner(stderr)
	for url == "" && sc.Scan() {
		var line struct{ Msg, URL string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "agent-bridge serving" {
			url = line.URL
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	if url == "" {
		t.Fatal("serve did not start")
	}
	t.Logf("idle server, 1M events: %s", rss(t, cmd.Process.Pid))

	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: subscribers}
	client := &http.Client{Transport: tr}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range subscribers {
		path := "/events/stream"
		if i%2 == 1 {
			path = fmt.Sprintf("/threads/t%d/events/stream", i%threads)
		}
		req, _ := http.NewRequestWithContext(sctx, "GET", url+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("subscriber %d: %d", i, resp.StatusCode)
		}
		defer resp.Body.Close()
	}
	testutil.WaitFor(t, time.Minute, "1000 subscribers", func() bool {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var n float64
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "agent_bridge_stream_subscribers{") {
				f, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
				n += f
			}
		}
		return n >= subscribers
	})
	r := rss(t, cmd.Process.Pid)
	t.Logf("1M events, %d idle SSE subscribers: %s", subscribers, r)
}

// rss returns VmRSS and VmHWM of a process.
func rss(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS") || strings.HasPrefix(line, "VmHWM") {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(out, ", ")
}

// buildFixture creates threads through the store (so their state rows are
// right), then bulk-inserts events with one SQL statement, the way a
// restore would, since a million HTTP appends would take minutes.
func buildFixture(t *testing.T, path string, threads, events int) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range threads {
		if _, _, err := st.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: fmt.Sprintf("t%d", i), Name: "fixture"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=OFF")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stmts := []string{
		fmt.Sprintf(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i+1 < %d)
		INSERT INTO events (gseq, id, thread, seq, ts, type, sender, recipient, content, meta, hop)
		SELECT %d + i, printf('F%%025d', i), 't' || (i %% %d), 2 + i / %d,
		       printf('2027-01-%%02dT%%02d:%%02d:%%02d.%%06dZ', 1 + i / 86400, (i / 3600) %% 24, (i / 60) %% 60, i %% 60, i %% 1000000),
		       'message', 'user', 'all', '"fixture message number ' || i || ', long enough to look like a real line of chat"', '{}', 0
		FROM n`, events, threads+1, threads, threads),
		`UPDATE thread_state SET seq = (SELECT max(seq) FROM events WHERE thread = thread_state.thread)`,
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("fixture: %v", err)
		}
	}
}
