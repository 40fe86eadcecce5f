package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// serveProc is a running `agent-bridge serve`.
type serveProc struct {
	cmd  *exec.Cmd
	url  string
	done chan error
}

// startServe starts serve on a free port with db (and extra flags) and
// waits until it logs its URL.
func startServe(t *testing.T, bin, db string, extra ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, extra...)...)
	cmd.Env = append(os.Environ(), "BRIDGE_TOKEN=", "BRIDGE_ADDR=", "BRIDGE_DB=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start serve: %v", err)
	}
	p := &serveProc{cmd: cmd, done: make(chan error, 1)}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct {
				Msg string `json:"msg"`
				URL string `json:"url"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "agent-bridge serving" {
				urls <- line.URL
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	select {
	case p.url = <-urls:
	case err := <-p.done:
		t.Fatalf("serve exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not log its URL within 30s")
	}
	return p
}

// TestServeCrash posts concurrently to a real server, kill -9s it mid-way,
// restarts it on the same database and checks that every acknowledged post
// is there exactly once, that nothing is half-written and that seq has no
// gaps; then SIGTERM must end it with exit code 0.
func TestServeCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildServeBinary(t)
	db := filepath.Join(t.TempDir(), "data", "bridge.db")
	p := startServe(t, bin, db)
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(url, path, body string) (int, error) {
		resp, err := client.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	if st, err := post(p.url, "/threads", `{"id":"crash"}`); err != nil || st != 200 {
		t.Fatalf("create thread: %d %v", st, err)
	}

	const total, workers, killAfter = 500, 16, 150
	var acked sync.Map
	var nacked atomic.Int64
	var killOnce sync.Once
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				st, err := post(p.url, "/threads/crash/events", fmt.Sprintf(`{"from":"user","content":"marker-%d"}`, i))
				if err == nil && st/100 == 2 {
					acked.Store(fmt.Sprintf("marker-%d", i), true)
					if nacked.Add(1) == killAfter {
						killOnce.Do(func() { _ = p.cmd.Process.Signal(syscall.SIGKILL) })
					}
				}
			}
		}()
	}
	for i := range total {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("server did not die after kill -9")
	}
	if nacked.Load() < killAfter {
		t.Fatalf("only %d posts acknowledged before the kill", nacked.Load())
	}

	p2 := startServe(t, bin, db)
	resp, err := client.Get(p2.url + "/threads/crash/events")
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Events []agentbridge.Event `json:"events"`
	}
	err = json.NewDecoder(resp.Body).Decode(&page)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("decode events after restart: %v", err)
	}
	seen := map[string]int{}
	for i, ev := range page.Events {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: gap or disorder", i, ev.Seq)
		}
		if i == 0 {
			continue
		}
		text := ev.Text()
		if ev.Type != "message" || !strings.HasPrefix(text, "marker-") || ev.From != "user" || ev.ID == "" || ev.TS == "" {
			t.Fatalf("half-written or foreign event: %+v", ev)
		}
		seen[text]++
	}
	missing := 0
	acked.Range(func(k, _ any) bool {
		if seen[k.(string)] != 1 {
			missing++
			t.Errorf("acknowledged %s found %d times", k, seen[k.(string)])
		}
		return true
	})
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s stored %d times", k, n)
		}
	}
	t.Logf("%d acknowledged before kill -9, %d stored, %d lost", nacked.Load(), len(seen), missing)

	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p2.done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit within 20s of SIGTERM")
	}
}

// TestServeUsage checks that flag mistakes exit 2 with one line naming the
// flag, before anything is opened.
func TestServeUsage(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty-token")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, "--addr"},
		{[]string{"--max-body", "lots"}, "--max-body"},
		{[]string{"--max-streams", "0"}, "--max-streams"},
		{[]string{"--humans", "a b"}, "--humans"},
		{[]string{"--token-file", empty}, "--token-file"},
		{[]string{"--cors-origin", "example.com"}, "CORS origin"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"extra"}, "no arguments"},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
		args := append([]string{"serve", "--db", filepath.Join(dir, "db", "b.db")}, c.args...)
		code := exitCode(&stderr, m.Run(context.Background(), args))
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 naming %s", c.args, code, stderr.String(), c.want)
		}
		if c.want == "--addr" {
			if _, err := os.Stat(filepath.Join(dir, "db")); err == nil {
				t.Errorf("serve %v created the database before refusing the address", c.args)
			}
		}
	}
}

// TestStartBridge checks the shared wiring in-process: the store and the
// UI are mounted, and Close stops both.
func TestStartBridge(t *testing.T) {
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	b, err := startBridge(ctx, bridgeConfig{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "b.db"), Humans: agentbridge.DefaultHumans}, logger)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(b.URL()+"/threads", "application/json", strings.NewReader(`{"id":"w"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("create thread: %d", resp.StatusCode)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.Close(cctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := http.Get(b.URL() + "/ping"); err == nil {
		t.Fatal("still answering after Close")
	}
}
