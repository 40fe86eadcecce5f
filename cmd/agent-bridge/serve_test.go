package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
)

// startServe starts serve on a free port with db, in a folder of its own
// (a postgres:// db keeps its token in ./data/ there), and waits until it
// logs its URL (stack.ServeWith).
func startServe(t *testing.T, bin, db string, args ...string) *stack.Bridge {
	t.Helper()
	return stack.ServeWith(t, bin, db, stack.ServeOptions{Args: args})
}

// TestServeCrash posts concurrently to a real server, kill -9s it mid-way,
// restarts it on the same database and checks that every acknowledged post
// is there exactly once, that nothing is half-written and that seq has no
// gaps; then SIGTERM must end it with exit code 0.
func TestServeCrash(t *testing.T) {
	stack.Heavy(t)
	bin := buildServeBinary(t)
	db := filepath.Join(t.TempDir(), "data", "bridge.db")
	p := startServe(t, bin, db)
	client := &http.Client{Timeout: 10 * time.Second, Transport: bearer{p.Token}}
	post := func(url, path, body string) (int, error) {
		resp, err := client.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	if st, err := post(p.URL, "/threads", `{"id":"crash"}`); err != nil || st != 200 {
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
				st, err := post(p.URL, "/threads/crash/events", fmt.Sprintf(`{"from":"user","content":"marker-%d"}`, i))
				if err == nil && st/100 == 2 {
					acked.Store(fmt.Sprintf("marker-%d", i), true)
					if nacked.Add(1) == killAfter {
						killOnce.Do(func() { _ = p.Cmd.Process.Signal(syscall.SIGKILL) })
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
	case <-p.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("server did not die after kill -9")
	}
	if nacked.Load() < killAfter {
		t.Fatalf("only %d posts acknowledged before the kill", nacked.Load())
	}

	p2 := startServe(t, bin, db)
	if p2.Token != p.Token {
		t.Fatal("the restarted serve made another person token")
	}
	resp, err := client.Get(p2.URL + "/threads/crash/events")
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

	if err := p2.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p2.Done:
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
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty-token")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--open", "--addr", "0.0.0.0:0"}, "--open: 0.0.0.0:0 is reachable from other machines"},
		{[]string{"--open", "--tailnet"}, "--open with --tailnet"},
		{[]string{"--max-body", "lots"}, "--max-body"},
		{[]string{"--max-streams", "0"}, "--max-streams"},
		{[]string{"--humans", "a b"}, "--humans"},
		{[]string{"--token-file", empty}, "--token-file"},
		{[]string{"--cors-origin", "example.com"}, "CORS origin"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"extra"}, "no arguments"},
		{[]string{"--funnel"}, "--funnel is an option of --tailnet: add --tailnet"},
		{[]string{"--tailnet-hostname", "phone"}, "--tailnet-hostname is an option of --tailnet"},
		{[]string{"--tailnet", "--tailnet-hostname", "My_Bridge"}, `--tailnet-hostname: "My_Bridge" is not a node name`},
		{[]string{"--tailnet", "--tailnet-control-url", "headscale.lan"}, "--tailnet-control-url"},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
		args := append([]string{"serve", "--db", filepath.Join(dir, "db", "b.db")}, c.args...)
		code := exitCode(&stderr, m.Run(context.Background(), args))
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want 2 naming %s", c.args, code, stderr.String(), c.want)
		}
		if c.args[0] == "--open" {
			if _, err := os.Stat(filepath.Join(dir, "db")); err == nil {
				t.Errorf("serve %v created the database before refusing the address", c.args)
			}
		}
	}
}

// TestStartBridge checks the shared wiring in-process: the person token
// is made on the first start, next to the database and readable by its
// owner only, and a request needs it; a second start keeps it; the store
// and the UI are mounted, and Close stops both.
func TestStartBridge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	cfg := bridgeConfig{Addr: "127.0.0.1:0", DB: filepath.Join(dir, "b.db"), Humans: agentbridge.DefaultHumans}
	b, err := startBridge(ctx, cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "token"))
	if err != nil || fi.Mode().Perm() != 0o600 || b.TokenPath != filepath.Join(dir, "token") || !strings.HasPrefix(b.PersonToken, agentbridge.TokenPrefix) {
		t.Fatalf("the person token: %v, %v, %s, %q", fi, err, b.TokenPath, b.PersonToken)
	}
	post := func(token string) int {
		req, _ := http.NewRequest("POST", b.URL()+"/threads", strings.NewReader(`{"id":"w"}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != 401 {
		t.Fatalf("create thread without a token: %d, want 401", code)
	}
	if code := post(b.PersonToken); code != 200 {
		t.Fatalf("create thread: %d", code)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.Close(cctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := http.Get(b.URL() + "/ping"); err == nil {
		t.Fatal("still answering after Close")
	}
	again, err := startBridge(ctx, cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = again.Close(ctx) }()
	if again.PersonToken != b.PersonToken {
		t.Errorf("a second start made another person token")
	}
}
