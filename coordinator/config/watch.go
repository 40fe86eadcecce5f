package config

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// reloadDebounce is how long the watcher waits after the last change to
// the config file before re-reading it: editors save in several steps
// (write a temporary file, rename it, fix permissions), and only the end
// state matters.
const reloadDebounce = 250 * time.Millisecond

// Watcher re-reads the coordinator's config file when it changes on disk
// and hands every valid new config to apply. An invalid edit is logged in
// one line and ignored, so the previous config stays in force. It watches
// the file's folder rather than the file, because editors replace files by
// renaming a new one over them, which would end a watch on the file itself.
// Reload and Run may be called from different goroutines; apply is never
// called concurrently with itself.
type Watcher struct {
	path  string
	log   *slog.Logger
	apply func(Config)

	mu   sync.Mutex // serialises loads and guards last
	last *Config    // the config most recently read successfully
}

// NewWatcher returns a watcher for the config file at path. It reads the
// file once, without applying it, so that reloads can log which keys
// changed.
func NewWatcher(path string, logger *slog.Logger, apply func(Config)) *Watcher {
	if logger == nil {
		logger = slog.Default()
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	w := &Watcher{path: path, log: logger.With("watcher", "config"), apply: apply}
	if cfg, _, err := Load(path); err == nil {
		w.last = &cfg
	}
	return w
}

// Run watches the config file's folder until ctx is done. It returns after
// its goroutines (including fsnotify's) have exited; the error is non-nil
// only when the watch could not be set up.
func (w *Watcher) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config: %w", err)
	}
	defer fw.Close()
	dir, base := filepath.Dir(w.path), filepath.Base(w.path)
	if err := fw.Add(dir); err != nil {
		return fmt.Errorf("watch config folder %s: %w", dir, err)
	}
	w.log.Info("watching config file", "path", w.path)
	w.debounce(ctx, base, fw.Events, fw.Errors)
	return nil
}

// debounce reloads the config reloadDebounce after the last event on the
// file named base, until ctx is done or events or errs close. It is Run's
// loop apart from fsnotify, so that a test can feed it events in a
// testing/synctest bubble, whose clock moves only when every goroutine
// waits (fsnotify's reader waits on a file, which a bubble cannot hold).
func (w *Watcher) debounce(ctx context.Context, base string, events <-chan fsnotify.Event, errs <-chan error) {
	timer := time.NewTimer(reloadDebounce)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if filepath.Base(ev.Name) == base {
				timer.Reset(reloadDebounce)
			}
		case err, ok := <-errs:
			if !ok {
				return
			}
			w.log.Warn("config watch error", "path", w.path, "err", err)
		case <-timer.C:
			w.Reload()
		}
	}
}

// Reload re-reads the config file now, with the same validation as at
// start-up: the SIGHUP path, for systemd's ExecReload. A valid config is
// applied (unless nothing changed); an invalid one is logged and ignored.
func (w *Watcher) Reload() {
	w.mu.Lock()
	defer w.mu.Unlock()
	cfg, warnings, err := Load(w.path)
	if err != nil {
		// The sentence is the one the coordinator exits with at start.
		w.log.Error("config reload failed; keeping the previous config: "+err.Error(), "path", w.path)
		return
	}
	for _, warning := range warnings {
		w.log.Warn(warning, "path", w.path)
	}
	var changed []string
	if w.last != nil {
		changed = ChangedKeys(*w.last, cfg)
		if len(changed) == 0 {
			w.log.Debug("config file touched but unchanged", "path", w.path)
			return
		}
	}
	w.last = &cfg
	w.log.Info("config reloaded", "path", w.path, "changed", changed)
	if later := slices.DeleteFunc(slices.Clone(changed), func(k string) bool { return !slices.Contains(RestartKeys, k) }); len(later) > 0 {
		w.log.Warn(strings.Join(later, ", ")+": the change takes effect after a restart", "keys", later)
	}
	w.apply(cfg)
}

// RestartKeys are the config keys a running coordinator keeps: its bridge
// client, its status listener and its start position were made from them,
// and its ledger rows and lease are its coordinator_id's.
var RestartKeys = []string{"bridge_url", "bridge_token", "status_addr", "status_allowed_hosts", "startup_mode", "coordinator_id"}

// ChangedKeys names the config keys (Config's config tags) whose values
// differ between a and b; a changed agent is named "agents.NAME".
func ChangedKeys(a, b Config) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		key := va.Type().Field(i).Tag.Get("config")
		if key == "" || reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			continue
		}
		if key != "agents" {
			out = append(out, key)
			continue
		}
		for _, name := range sortedKeys(a.Agents) {
			if nb, ok := b.Agents[name]; !ok || !reflect.DeepEqual(a.Agents[name], nb) {
				out = append(out, "agents."+name)
			}
		}
		for _, name := range sortedKeys(b.Agents) {
			if _, ok := a.Agents[name]; !ok {
				out = append(out, "agents."+name)
			}
		}
	}
	return out
}
