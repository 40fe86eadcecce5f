package stack

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// Bridge is a running `agent-bridge serve`: its URL, the person token it
// made on its first start (or was given), every line it logged, and Done,
// which receives Wait's error once it exits.
type Bridge struct {
	URL   string
	Token string
	Logs  *testutil.Buffer
	Cmd   *exec.Cmd
	Done  chan error
}

// Client is a client of the bridge holding its person token.
func (b *Bridge) Client() *client.Client {
	return client.New(b.URL, client.WithToken(b.Token))
}

// ServeOptions are what ServeWith adds to Serve.
type ServeOptions struct {
	// Args follow serve's --addr and --db.
	Args []string
	// Within bounds the wait for serve's URL (30 s when zero).
	Within time.Duration
	// Each, when set, gets each line serve logs, as it comes.
	Each func(line []byte)
}

// Serve runs `bin serve` on db (a SQLite file or a PostgreSQL URL) on a
// free port of 127.0.0.1, in a folder of its own where it keeps its
// person token, until the test ends.
func Serve(t testing.TB, bin, db string) *Bridge {
	t.Helper()
	return ServeWith(t, bin, db, ServeOptions{})
}

// ServeWith is Serve with opts. With --open among the args it reads no
// token; with --token-file, that file's.
func ServeWith(t testing.TB, bin, db string, opts ServeOptions) *Bridge {
	t.Helper()
	if opts.Within == 0 {
		opts.Within = 30 * time.Second
	}
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, opts.Args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "BRIDGE_TOKEN=", "BRIDGE_ADDR=", "BRIDGE_DB=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start serve: %v", err)
	}
	b := &Bridge{Logs: &testutil.Buffer{}, Cmd: cmd, Done: make(chan error, 1)}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(b.Logs, sc.Text())
			if opts.Each != nil {
				opts.Each(sc.Bytes())
			}
			var line struct {
				Msg string `json:"msg"`
				URL string `json:"url"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "agent-bridge serving" {
				urls <- line.URL
			}
		}
		b.Done <- cmd.Wait()
	}()
	select {
	case b.URL = <-urls:
	case err := <-b.Done:
		t.Fatalf("serve exited before listening (%v):\n%s", err, b.Logs.String())
	case <-time.After(opts.Within):
		t.Fatalf("serve did not log its URL within %v:\n%s", opts.Within, b.Logs.String())
	}
	if slices.Contains(opts.Args, "--open") {
		return b
	}
	// serve keeps the person token beside a SQLite file, and in its
	// default state folder for PostgreSQL (docs/security.md), unless it
	// is given one.
	tokenPath := filepath.Join(filepath.Dir(db), "token")
	if strings.Contains(db, "://") {
		tokenPath = filepath.Join(filepath.Dir(agentbridge.DefaultDBPath), "token")
	}
	if i := slices.Index(opts.Args, "--token-file"); i >= 0 && i+1 < len(opts.Args) {
		tokenPath = opts.Args[i+1]
	}
	if !filepath.IsAbs(tokenPath) {
		tokenPath = filepath.Join(cmd.Dir, tokenPath)
	}
	raw, err := os.ReadFile(tokenPath)
	if err != nil || strings.TrimSpace(string(raw)) == "" {
		t.Fatalf("serve's person token in %s: %q %v", tokenPath, raw, err)
	}
	b.Token = strings.TrimSpace(string(raw))
	return b
}
