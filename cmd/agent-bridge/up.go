package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/coordinator"
)

func (m *Main) runUp(ctx context.Context, args []string) error {
	fs := m.newFlagSet("up")
	addr := fs.String("addr", m.env(agentbridge.EnvAddr, bridge.DefaultAddr), "bridge listen address (env BRIDGE_ADDR)")
	db := fs.String("db", m.env(agentbridge.EnvDB, agentbridge.DefaultDBPath), "bridge database (env BRIDGE_DB)")
	configPath := fs.String("config", m.env(agentbridge.EnvCoordinatorConfig, agentbridge.DefaultCoordinatorConfig), "coordinator config; defaults apply when the file does not exist (env BRIDGE_COORDINATOR_CONFIG)")
	statePath := fs.String("state", m.env(agentbridge.EnvCoordinatorState, agentbridge.DefaultCoordinatorState), "coordinator state database (env BRIDGE_COORDINATOR_STATE)")
	logLevel := fs.String("log-level", m.env(agentbridge.EnvLogLevel, "info"), "debug, info, warn or error (env BRIDGE_LOG_LEVEL)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("up takes no arguments, got %q", pos[0])
	}
	logger, err := newLogger(m.Stderr, *logLevel)
	if err != nil {
		return err
	}
	cfg := coordinator.DefaultConfig()
	if _, err := os.Stat(*configPath); err == nil {
		var warnings []string
		if cfg, warnings, err = coordinator.LoadConfig(*configPath); err != nil {
			return err
		}
		for _, w := range warnings {
			logger.Warn(w, "path", cfg.Path)
		}
	} else {
		logger.Info("no coordinator config file; using the defaults (no agents)", "path", *configPath)
	}
	token := strings.TrimSpace(m.Getenv(agentbridge.EnvToken))
	if err := os.MkdirAll(filepath.Dir(*db), 0o755); err != nil {
		return fmt.Errorf("create database folder: %w", err)
	}
	// The UI links to the coordinator's dashboard, whose address is known
	// once the coordinator listens.
	var statusURL atomic.Pointer[string]
	b, err := startBridge(ctx, bridgeConfig{Addr: *addr, DB: *db, Humans: cfg.HumanIDs, Token: token,
		MaxBody: bridge.DefaultMaxBody, Version: version, CoordinatorURL: func() string {
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
	if token != "" {
		cfg.BridgeToken = token
	}
	return m.startCoordinator(ctx, cfg, *statePath, logger, func(c *coordinator.Coordinator) {
		u := c.StatusURL()
		statusURL.Store(&u)
		fmt.Fprintf(m.Stdout, "agent-bridge is up: bridge %s, coordinator status %s\nOpen the UI at %s/ui\nRuns dashboard at %s/\n", b.URL(), c.StatusURL(), b.URL(), c.StatusURL())
	})
}
