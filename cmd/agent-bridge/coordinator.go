package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/spf13/cobra"
)

func (m *Main) coordinatorCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	configPath := fs.String("config", m.env(agentbridge.EnvCoordinatorConfig, agentbridge.DefaultCoordinatorConfig), "config file, watched for changes (env BRIDGE_COORDINATOR_CONFIG)")
	statePath := fs.String("state", m.env(agentbridge.EnvCoordinatorState, agentbridge.DefaultCoordinatorState), "state database, created with its folder, or a postgres:// URL shared by several coordinators (env BRIDGE_COORDINATOR_STATE)")
	mode := fs.String("startup-mode", "", "end or resume; overrides the config's startup_mode")
	logLevel := fs.String("log-level", m.env(agentbridge.EnvLogLevel, "info"), "debug, info, warn or error (env BRIDGE_LOG_LEVEL)")
	tokenFile := fs.String("token-file", "", "file holding the coordinator's bridge token, best a coordinator-scoped one (else the config's bridge_token, else env BRIDGE_TOKEN)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("coordinator takes no arguments, got %q", pos[0])
		}
		if *mode != "" && *mode != coordinator.StartupEnd && *mode != coordinator.StartupResume {
			return usagef("--startup-mode: %q is not end or resume", *mode)
		}
		logger, err := newLogger(m.Stderr, *logLevel)
		if err != nil {
			return err
		}
		cfg, warnings, err := config.Load(*configPath)
		if err != nil {
			return err
		}
		for _, w := range warnings {
			logger.Warn(w, "path", cfg.Path)
		}
		if *mode != "" {
			cfg.StartupMode = *mode
		}
		if *tokenFile != "" {
			// Its own file: the agents' environments never hold it, and a
			// coordinator token is all it needs (docs/security.md).
			if cfg.BridgeToken, err = m.readToken(*tokenFile); err != nil {
				return err
			}
		}
		if cfg.BridgeToken == "" {
			cfg.BridgeToken = strings.TrimSpace(m.Getenv(agentbridge.EnvToken))
		}
		if cfg.BridgeToken == "" {
			// serve's person token, when the bridge runs on this machine
			// from this folder (or BRIDGE_DB names its database).
			cfg.BridgeToken = m.localToken(cfg.BridgeURL)
		}
		if rt, ok := m.runningUp(); ok && strings.TrimRight(rt.BridgeURL, "/") == strings.TrimRight(cfg.BridgeURL, "/") {
			// up runs a coordinator of its own on that bridge: with a
			// ledger of its own, each would answer every message.
			logger.Warn("an agent-bridge up already runs a coordinator against this bridge; both will answer every message they are asked",
				"pid", rt.PID, "bridge", rt.BridgeURL, "up_state", rt.State)
		}
		if err := status.CheckListen(cfg); err != nil {
			return err // before standing by for a lease: a standby would only fail later
		}
		return m.startCoordinator(ctx, cfg, *statePath, logger, func(*coordinator.Coordinator) {})
	}
}

// startCoordinator opens the ledger and runs a coordinator until ctx ends,
// reloading its config on SIGHUP. started is called once it follows the
// log (coordinator.Ready).
// It is the wiring shared by coordinator and up.
func (m *Main) startCoordinator(ctx context.Context, cfg config.Config, statePath string, logger *slog.Logger, started func(*coordinator.Coordinator)) error {
	pg, err := isPostgres("state", statePath)
	if err != nil {
		return err
	}
	if pg {
		// Several coordinators may share a PostgreSQL ledger, each with
		// its own rows (its coordinator_id). Of the processes with one id
		// only the lease holder works, and one that loses the lease or
		// cannot work with it stands by again (lease.go).
		return runLeased(ctx, statePath, cfg.CoordinatorID, logger, func(lease *heldLease) error {
			t := term{leased: lease}
			err := m.coordinate(lease.ctx, cfg, statePath, logger, started, &t)
			if t.ran && err != nil {
				return fmt.Errorf("%w: %w", errTermStarted, err)
			}
			return err
		})
	}
	if err := sqlitex.MakeFolder(filepath.Dir(statePath)); err != nil {
		return fmt.Errorf("create state folder: %w", err)
	}
	return m.coordinate(ctx, cfg, statePath, logger, started, &term{})
}

// coordinate opens the ledger and runs one coordinator until ctx ends, as
// the holder of t.leased when that is set (lease.go).
func (m *Main) coordinate(ctx context.Context, cfg config.Config, statePath string, logger *slog.Logger, started func(*coordinator.Coordinator), t *term) error {
	db, err := ledger.Open(ctx, statePath, cfg.CoordinatorID)
	if err != nil {
		return err
	}
	defer db.Close()
	acpDir, wtDir := "", "" // a PostgreSQL ledger (leased): the user's cache folder
	attDir := ledgerCacheDir("attachments", statePath)
	if t.leased == nil {
		acpDir = filepath.Join(filepath.Dir(statePath), "acp")
		attDir = filepath.Join(filepath.Dir(statePath), "attachments")
		wtDir = filepath.Join(filepath.Dir(statePath), "worktrees")
	}
	c, err := t.newCoordinator(ctx, coordinator.Options{Config: cfg, ConfigPath: cfg.Path, State: db, Logger: logger, ACPDir: acpDir, AttachmentDir: attDir, WorktreeDir: wtDir, Version: moduleVersion()}, logger)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// A second SIGTERM/SIGINT (the first one cancelled ctx) skips the
	// shutdown grace period.
	again := make(chan os.Signal, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-hup:
				logger.Info("SIGHUP: reloading the config")
				c.Reload()
			case <-ctx.Done():
				signal.Notify(again, syscall.SIGTERM, os.Interrupt)
				defer signal.Stop(again)
				select {
				case <-again:
					logger.Warn("second signal: interrupting running adapters now")
					c.SkipGrace()
				case <-done:
				}
				return
			case <-done:
				return
			}
		}
	}()
	logger.Info("coordinator started", "bridge", cfg.BridgeURL, "status", c.StatusURL(), "state", maskURL(statePath), "startup_mode", cfg.StartupMode)
	// started is called once the coordinator follows the log, so that
	// what it announces (up's "is up") holds for the next message posted.
	runDone := make(chan struct{})
	defer close(runDone)
	go func() {
		select {
		case <-c.Ready():
			started(c)
		case <-runDone:
		}
	}()
	t.ran = true
	return c.Run(ctx)
}

// ledgerCacheDir is a folder of what for the ledger at statePath (a
// PostgreSQL URL) in the user's cache folder: one per ledger, so that the
// coordinators of two ledgers on one machine never share it, and the same
// across restarts, so that a restart clears what a killed one left.
func ledgerCacheDir(what, statePath string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	sum := sha256.Sum256([]byte(statePath))
	return filepath.Join(base, "agent-bridge", what, hex.EncodeToString(sum[:8]))
}
