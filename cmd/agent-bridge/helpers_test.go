package main

import (
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
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testbridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// opsMain is a Main with captured output and the given environment (PATH
// comes from the test process unless env sets it).
func opsMain(env map[string]string) (*Main, *testutil.Buffer, *testutil.Buffer) {
	stdout, stderr := &testutil.Buffer{}, &testutil.Buffer{}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == "PATH" {
			return os.Getenv("PATH")
		}
		return ""
	}
	return &Main{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr, Getenv: getenv}, stdout, stderr
}

// opsStore creates a bridge database with one thread of n messages and
// returns its path, with the store still open.
func opsStore(t *testing.T, dir string, n int) (string, *sqlite.Store) {
	t.Helper()
	path := filepath.Join(dir, "bridge.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	th, _, err := s.CreateThread(context.Background(), agentbridge.CreateThreadRequest{Name: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	for range n - 1 {
		_, err := s.Append(context.Background(), agentbridge.AppendRequest{Thread: th.ID, Input: agentbridge.EventInput{
			Type: "message", From: "user", To: "all", Content: json.RawMessage(`"hello"`)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return path, s
}

// opsBridge starts a real bridge server on 127.0.0.1:0 with a token.
func opsBridge(t *testing.T, token string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b, err := startBridge(ctx, bridgeConfig{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "bridge.db"),
		Humans: agentbridge.Humans{"user"}, Token: token, MaxBody: 1 << 20, Version: "test", Open: token == ""},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = b.Close(context.Background())
	})
	return b.URL()
}

// bearer is an http.RoundTripper that sends a bearer token.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// testBridge is a real bridge (internal/testkit/testbridge) with a client of it.
type testBridge struct{ *testbridge.Bridge }

// startTestBridge starts a bridge that requires no token.
func startTestBridge(t *testing.T) *testBridge {
	t.Helper()
	return startTokenBridge(t, "")
}

// startTokenBridge starts a bridge that requires the bearer token ("" for
// none).
func startTokenBridge(t *testing.T, token string) *testBridge {
	t.Helper()
	return &testBridge{testbridge.New(t, token)}
}

func (b *testBridge) client() *client.Client {
	return client.New(b.URL(), client.WithToken(b.Token()))
}

// cli runs one subcommand in-process and returns its output and exit code.
type cli struct {
	t     *testing.T
	env   map[string]string
	stdin string
}

func (c cli) run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	var out, errb testutil.Buffer
	m := &Main{Stdin: strings.NewReader(c.stdin), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return c.env[k] }}
	err := m.Run(c.t.Context(), args)
	code = exitCode(&errb, err)
	return out.String(), errb.String(), code
}

// ok runs a subcommand that must succeed and returns its stdout.
func (c cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
	}
	return out
}

func newCLI(t *testing.T, b *testBridge) cli {
	return cli{t: t, env: map[string]string{"BRIDGE_URL": b.URL()}}
}

// TestMain gives the package's tests a folder for the programs they build
// and a PostgreSQL server, and removes both afterwards.
func TestMain(m *testing.M) {
	if os.Getenv(promptHelperEnv) != "" {
		// The test binary run as agent-bridge by the adapter scripts
		// (TestPromptHelperProcess), which exits on its own.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "agent-bridge-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins = stack.NewPrograms(dir)
	code := pg.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// bins are the programs the real-process tests run, each built at most
// once per test binary into one folder, which TestMain sets.
var bins *stack.Programs

// buildServeBinary returns the agent-bridge binary.
func buildServeBinary(t *testing.T) string { return bins.Build(t, stack.AgentBridge) }

// buildFake returns the fake adapter (internal/testkit/fakeadapter).
func buildFake(t *testing.T) string { return bins.Build(t, stack.FakeAdapter) }

// buildFakeCLI returns the fake claude/codex program
// (internal/testkit/fakecli).
func buildFakeCLI(t *testing.T) string { return bins.Build(t, stack.FakeCLI) }

// buildCoordBinaries returns the agent-bridge binary and the fake adapter.
func buildCoordBinaries(t *testing.T) (bin, fake string) {
	return buildServeBinary(t), buildFake(t)
}

// onBothBridges runs test, a heavy multi-machine test (stack.Heavy), with
// the bridge on a SQLite file and on PostgreSQL.
func onBothBridges(t *testing.T, test func(*testing.T, *stack.Stack)) {
	stack.Heavy(t)
	t.Run("sqlite", func(t *testing.T) { test(t, stack.New(t, bins, "")) })
	t.Run("postgres", func(t *testing.T) { test(t, stack.New(t, bins, pg.Database(t))) })
}

// runInProcess runs a daemon command (up, serve, coordinator) through
// m.Run on a goroutine, as a person runs it until Ctrl-C. stop cancels it,
// waits for it to return (an error of the test after 30 s) and returns
// its error; it also runs at cleanup, so a test that fails early leaves
// nothing running.
func runInProcess(t *testing.T, m *Main, args ...string) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, args) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				err = fmt.Errorf("%s did not stop within 30 s of its cancel", args[0])
				t.Error(err)
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}
