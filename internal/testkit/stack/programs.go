// Package stack runs the project's multi-process stacks for tests, in one
// place: the programs a test binary builds once (agent-bridge, the fake
// adapter, the fake ACP agent, the fake claude/codex CLI), `agent-bridge
// serve` as a process (Serve), coordinators as processes, each standing in
// for a machine with its own HOME, config, ledger, status port and token
// (Machine), and Heavy, the bound on how many such tests run at once across
// every test process of a `go test ./...`.
package stack

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// The programs tests build, by their package path from the module root.
const (
	// AgentBridge is the binary itself.
	AgentBridge = "./cmd/agent-bridge"
	// FakeAdapter is the adapter program steered by "fake:" directives.
	FakeAdapter = "./internal/testkit/fakeadapter"
	// FakeACP is the fake Agent Client Protocol agent.
	FakeACP = "./internal/testkit/fakeacp"
	// FakeCLI stands in for the claude and codex CLIs.
	FakeCLI = "./internal/testkit/fakecli"
)

// Programs builds the project's programs a test binary runs, each at most
// once, into one folder (the caller's TestMain makes and removes it).
// Programs are built without -race: a race-enabled program sleeps a second
// at every clean exit (GORACE atexit_sleep_ms), which would slow every run,
// and the fakes are too simple to need it.
type Programs struct {
	dir   string
	mu    sync.Mutex
	built map[string]*built
}

// built is one program of Programs, built on first use.
type built struct {
	once sync.Once
	path string
	err  error
}

// NewPrograms returns the programs built into dir.
func NewPrograms(dir string) *Programs {
	return &Programs{dir: dir, built: map[string]*built{}}
}

// Path returns the program pkg (one of the constants above, or another
// main package's path from the module root), building it the first time.
func (p *Programs) Path(ctx context.Context, pkg string) (string, error) {
	p.mu.Lock()
	b, ok := p.built[pkg]
	if !ok {
		b = &built{}
		p.built[pkg] = b
	}
	p.mu.Unlock()
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		b.path, b.err = testutil.GoBuild(ctx, pkg, p.dir, false)
		if b.err != nil {
			b.err = fmt.Errorf("build %s: %w", pkg, b.err)
		}
	})
	return b.path, b.err
}

// Build is Path for a test, which it fails when the build does. Under
// -short a test that needs the agent-bridge binary is skipped: building
// and running the real daemons is what the fast test command leaves out
// (the README); the fakes are small and still built.
func (p *Programs) Build(t testing.TB, pkg string) string {
	t.Helper()
	if pkg == AgentBridge && testing.Short() {
		t.Skip("builds and runs the agent-bridge binary; -short leaves it out")
	}
	path, err := p.Path(context.Background(), pkg)
	if err != nil {
		t.Fatal(err)
	}
	return path
}
