package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// applied records the configs a watcher applies.
type applied struct {
	mu   sync.Mutex
	cfgs []Config
}

func (a *applied) apply(c Config) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cfgs = append(a.cfgs, c)
}

func (a *applied) snapshot() []Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Config(nil), a.cfgs...)
}

func configWith(concurrency int) string {
	return fmt.Sprintf(`{"max_concurrency": %d, "agents": {"echo": {"command": ["./echo.sh"]}}}`, concurrency)
}

// replaceFile writes content the way editors and config managers do: to a
// temporary file in the same folder, then renamed over the target.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

type watcherHarness struct {
	path    string
	logs    *testutil.Buffer
	applied *applied
	w       *Watcher
}

func newWatcherHarness(t *testing.T) *watcherHarness {
	t.Helper()
	h := &watcherHarness{path: filepath.Join(t.TempDir(), "coordinator.config.json"), logs: &testutil.Buffer{}, applied: &applied{}}
	if err := os.WriteFile(h.path, []byte(configWith(1)), 0o600); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.w = NewWatcher(h.path, logger, h.applied.apply)
	return h
}

// run starts the watcher and waits until it watches the folder; the
// watcher is stopped, and Run's return checked, when the test ends.
func (h *watcherHarness) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
	testutil.WaitFor(t, 10*time.Second, "the watcher to watch the folder", func() bool {
		return strings.Count(h.logs.String(), "watching config file") == 1
	})
}

func (h *watcherHarness) waitApplied(t *testing.T, n, concurrency int) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("config #%d with max_concurrency %d", n, concurrency), func() bool {
		cfgs := h.applied.snapshot()
		return len(cfgs) >= n && cfgs[n-1].MaxConcurrency == concurrency
	})
	if got := len(h.applied.snapshot()); got != n {
		t.Fatalf("applied %d configs, want %d", got, n)
	}
}

func TestWatcher_AppliesReplacedFile(t *testing.T) {
	h := newWatcherHarness(t)
	h.run(t)

	replaceFile(t, h.path, configWith(5))
	h.waitApplied(t, 1, 5)
	cfg := h.applied.snapshot()[0]
	if cfg.Path != h.path {
		t.Errorf("applied Path = %q, want %q", cfg.Path, h.path)
	}
	if got, want := cfg.Agents["echo"].Command[0], filepath.Join(filepath.Dir(h.path), "echo.sh"); got != want {
		t.Errorf("applied command = %q, want %q (resolved against the config folder)", got, want)
	}
	if !strings.Contains(h.logs.String(), "changed=[max_concurrency]") {
		t.Errorf("the reload log does not name the changed key, and only it:\n%s", h.logs.String())
	}

	// Saving in place works as well as a rename.
	if err := os.WriteFile(h.path, []byte(configWith(6)), 0o600); err != nil {
		t.Fatal(err)
	}
	h.waitApplied(t, 2, 6)
}

func TestWatcher_InvalidEditKeepsOldConfig(t *testing.T) {
	h := newWatcherHarness(t)
	h.run(t)

	replaceFile(t, h.path, configWith(5))
	h.waitApplied(t, 1, 5)

	replaceFile(t, h.path, `{"max_concurrency": "many", "agents": {}}`)
	testutil.WaitFor(t, 10*time.Second, "the failed reload to be logged", func() bool {
		return strings.Count(h.logs.String(), "config reload failed") == 1
	})
	if strings.Count(h.logs.String(), "max_concurrency: must be a number") != 1 {
		t.Errorf("the failure log does not name the key")
	}
	if got := len(h.applied.snapshot()); got != 1 {
		t.Fatalf("an invalid edit was applied (%d configs applied)", got)
	}

	// The watcher keeps going: the next valid edit applies.
	replaceFile(t, h.path, configWith(7))
	h.waitApplied(t, 2, 7)
}

func TestWatcher_Reload(t *testing.T) {
	h := newWatcherHarness(t)

	// Unchanged: nothing to apply.
	h.w.Reload()
	if got := len(h.applied.snapshot()); got != 0 {
		t.Fatalf("an unchanged config was applied")
	}

	replaceFile(t, h.path, configWith(3))
	h.w.Reload()
	if cfgs := h.applied.snapshot(); len(cfgs) != 1 || cfgs[0].MaxConcurrency != 3 {
		t.Fatalf("Reload applied %+v, want one config with max_concurrency 3", cfgs)
	}

	replaceFile(t, h.path, `{"agents": {"x": {}}}`)
	h.w.Reload()
	if got := len(h.applied.snapshot()); got != 1 {
		t.Fatalf("Reload applied an invalid config")
	}
	if strings.Count(h.logs.String(), "agents.x.command") != 1 {
		t.Errorf("the failure log does not name the key")
	}

	if err := os.Remove(h.path); err != nil {
		t.Fatal(err)
	}
	h.w.Reload()
	if got := len(h.applied.snapshot()); got != 1 {
		t.Fatalf("Reload applied a deleted config")
	}
}

func TestWatcher_MissingFolder(t *testing.T) {
	w := NewWatcher(filepath.Join(t.TempDir(), "no", "such", "c.json"), slog.New(slog.DiscardHandler), func(Config) {})
	if err := w.Run(context.Background()); err == nil {
		t.Fatal("Run on a missing folder returned nil")
	}
}

// TestWatcher_UnknownKeyKeepsOldConfig checks that a reload with a
// misspelt key keeps the config in force and logs the sentence the
// coordinator exits with at start, and that a reload names only the keys
// that changed, warning about a restart only for the keys that need one.
func TestWatcher_UnknownKeyKeepsOldConfig(t *testing.T) {
	h := newWatcherHarness(t)
	replaceFile(t, h.path, `{"max_concurency": 3, "agents": {}}`)
	h.w.Reload()
	if got := len(h.applied.snapshot()); got != 0 {
		t.Fatalf("a config with an unknown key was applied")
	}
	if !strings.Contains(h.logs.String(), `unknown key \"max_concurency\"; did you mean \"max_concurrency\"?`) {
		t.Errorf("the failure log lacks the suggestion:\n%s", h.logs.String())
	}
	replaceFile(t, h.path, configWith(4))
	h.w.Reload()
	if strings.Contains(h.logs.String(), "after a restart") {
		t.Errorf("a reload of max_concurrency warned about a restart:\n%s", h.logs.String())
	}
	replaceFile(t, h.path, `{"status_addr": "127.0.0.1:0", "max_concurrency": 4, "agents": {"echo": {"command": ["echo.sh"]}}}`)
	h.w.Reload()
	if !strings.Contains(h.logs.String(), "status_addr: the change takes effect after a restart") {
		t.Errorf("no restart warning for status_addr:\n%s", h.logs.String())
	}
}

// TestWatcher_Debounce checks on a testing/synctest bubble's clock that a
// burst of events on the config file (an editor saving in several steps)
// makes one reload, reloadDebounce after the last of them and not a
// nanosecond sooner; that events on other files of the folder do not put
// it off; and that a watch error is logged and the watch goes on.
func TestWatcher_Debounce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := newWatcherHarness(t)
		events, errs := make(chan fsnotify.Event), make(chan error)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.w.debounce(ctx, filepath.Base(h.path), events, errs)
		}()

		replaceFile(t, h.path, configWith(5))
		events <- fsnotify.Event{Name: h.path, Op: fsnotify.Create}
		time.Sleep(reloadDebounce / 2)
		events <- fsnotify.Event{Name: h.path, Op: fsnotify.Write}
		time.Sleep(reloadDebounce / 2)
		events <- fsnotify.Event{Name: h.path, Op: fsnotify.Chmod} // the last: the reload is due one debounce later
		time.Sleep(reloadDebounce / 2)
		events <- fsnotify.Event{Name: h.path + ".tmp", Op: fsnotify.Remove}
		errs <- errors.New("queue overflow")
		time.Sleep(reloadDebounce/2 - time.Nanosecond)
		synctest.Wait()
		if got := len(h.applied.snapshot()); got != 0 {
			t.Fatalf("reloaded before the debounce ran out (%d configs applied)", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if cfgs := h.applied.snapshot(); len(cfgs) != 1 || cfgs[0].MaxConcurrency != 5 {
			t.Fatalf("applied %+v at the end of the debounce, want one config with max_concurrency 5", cfgs)
		}
		time.Sleep(10 * reloadDebounce)
		synctest.Wait()
		if got := len(h.applied.snapshot()); got != 1 {
			t.Fatalf("one burst of events reloaded %d times", got)
		}
		if !strings.Contains(h.logs.String(), "config watch error") || !strings.Contains(h.logs.String(), "queue overflow") {
			t.Errorf("the watch error is not logged:\n%s", h.logs.String())
		}
		close(events)
		<-done
	})
}
