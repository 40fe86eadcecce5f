package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/coordinator"
)

// runUp is "agent-bridge up": the bridge and the coordinator in one
// process, for a first run.
func (m *Main) runUp(ctx context.Context, args []string) error {
	fs := m.newFlagSet("up")
	addr := fs.String("addr", m.env(agentbridge.EnvAddr, bridge.DefaultAddr), "bridge listen address (env BRIDGE_ADDR)")
	db := fs.String("db", m.env(agentbridge.EnvDB, agentbridge.DefaultDBPath), "bridge database (env BRIDGE_DB)")
	configPath := fs.String("config", m.env(agentbridge.EnvCoordinatorConfig, agentbridge.DefaultCoordinatorConfig), "coordinator config; defaults apply when the file does not exist (env BRIDGE_COORDINATOR_CONFIG)")
	statePath := fs.String("state", m.env(agentbridge.EnvCoordinatorState, agentbridge.DefaultCoordinatorState), "coordinator state database (env BRIDGE_COORDINATOR_STATE)")
	statusAddr := fs.String("status-addr", "", "the coordinator status API's listen address (default: the config's status_addr, "+agentbridge.DefaultStatusAddr+")")
	logLevel := fs.String("log-level", m.env(agentbridge.EnvLogLevel, "info"), "debug, info, warn or error (env BRIDGE_LOG_LEVEL)")
	maxStreams := m.maxStreamsFlag(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("up takes no arguments, got %q", pos[0])
	}
	ms, err := parseMaxStreams(*maxStreams)
	if err != nil {
		return err
	}
	logger, err := newLogger(m.Stderr, *logLevel)
	if err != nil {
		return err
	}
	cfg, where, err := loadUpConfig(*configPath, logger)
	if err != nil {
		return err
	}
	if *statusAddr != "" {
		cfg.StatusAddr = *statusAddr
	}
	token := strings.TrimSpace(m.Getenv(agentbridge.EnvToken))
	if token != "" {
		cfg.BridgeToken = token
	}
	if err := coordinator.CheckStatusListen(cfg); err != nil {
		return err // before the bridge starts
	}
	if err := os.MkdirAll(filepath.Dir(*db), 0o755); err != nil {
		return fmt.Errorf("create database folder: %w", err)
	}
	// The UI links to the coordinator's dashboard, whose address is known
	// once the coordinator listens.
	var statusURL atomic.Pointer[string]
	b, err := startBridge(ctx, bridgeConfig{Addr: *addr, DB: *db, Humans: cfg.HumanIDs, Token: token,
		MaxBody: bridge.DefaultMaxBody, MaxStreams: ms, Version: version, CoordinatorURL: func() string {
			if u := statusURL.Load(); u != nil {
				return *u
			}
			return ""
		}}, logger)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := b.Close(cctx); err != nil {
			logger.Error("close bridge", "err", err)
		}
	}()
	cfg.BridgeURL = b.URL()
	return m.startCoordinator(ctx, cfg, *statePath, logger, func(c *coordinator.Coordinator) {
		u := c.StatusURL()
		statusURL.Store(&u)
		fmt.Fprintf(m.Stdout, "agent-bridge is up: bridge %s, coordinator status %s\nOpen the UI at %s/ui\nRuns dashboard at %s/\n", b.URL(), c.StatusURL(), b.URL(), c.StatusURL())
		fmt.Fprintf(m.Stdout, "Coordinator config: %s\n", where)
		printAgents(m.Stdout, cfg)
	})
}

// loadUpConfig loads the coordinator config for up. Unlike the coordinator
// daemon, up runs without a config file, on the defaults (whose built-in
// echo agent answers a first run). It also says, for the person reading
// up's output, where the config came from.
func loadUpConfig(path string, logger *slog.Logger) (coordinator.Config, string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return coordinator.Config{}, "", fmt.Errorf("resolve %s: %w", path, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		return coordinator.DefaultConfig(), fmt.Sprintf("none found at %s, so the built-in defaults (agent echo); pass --config FILE or write that file to configure agents", abs), nil
	} else if err != nil {
		return coordinator.Config{}, "", &usageError{msg: fmt.Sprintf("--config: %v", err)}
	}
	cfg, warnings, err := coordinator.LoadConfig(abs)
	if err != nil {
		return coordinator.Config{}, "", err
	}
	for _, w := range warnings {
		logger.Warn(w, "path", cfg.Path)
	}
	return cfg, cfg.Path, nil
}

// printAgents lists the configured agents, one a line with the command
// that answers for it, so that a person sees who can reply before posting.
func printAgents(w io.Writer, cfg coordinator.Config) {
	if len(cfg.Agents) == 0 {
		fmt.Fprintln(w, "Agents: none configured, so no message will get a reply")
		return
	}
	fmt.Fprintln(w, "Agents (invite one into a thread, then post to it):")
	for _, id := range slices.Sorted(maps.Keys(cfg.Agents)) {
		a := cfg.Agents[id]
		fmt.Fprintf(w, "  %-12s %s\n", id, strings.Join(a.Argv(), " "))
	}
	fmt.Fprintln(w, "(agent-bridge doctor checks that each command, and the CLI it wraps, is installed)")
}
