package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/coordinator/state"
)

// coordinatorURLFlag defines --coordinator-url for the commands that ask
// the coordinator's status API. It defaults to env BRIDGE_COORDINATOR_URL,
// as serve's flag of the same name does, so one export serves every command.
func (m *Main) coordinatorURLFlag(fs *flag.FlagSet) *string {
	return fs.String("coordinator-url", m.env(agentbridge.EnvCoordinatorURL, agentbridge.DefaultStatusURL), "the coordinator's status API (env BRIDGE_COORDINATOR_URL)")
}

func (m *Main) runCoordinator(ctx context.Context, args []string) error {
	fs := m.newFlagSet("coordinator")
	configPath := fs.String("config", m.env(agentbridge.EnvCoordinatorConfig, agentbridge.DefaultCoordinatorConfig), "config file, watched for changes (env BRIDGE_COORDINATOR_CONFIG)")
	statePath := fs.String("state", m.env(agentbridge.EnvCoordinatorState, agentbridge.DefaultCoordinatorState), "state database, created with its folder, or a postgres:// URL shared by several coordinators (env BRIDGE_COORDINATOR_STATE)")
	mode := fs.String("startup-mode", "", "end or resume; overrides the config's startup_mode")
	logLevel := fs.String("log-level", m.env(agentbridge.EnvLogLevel, "info"), "debug, info, warn or error (env BRIDGE_LOG_LEVEL)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
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
	cfg, warnings, err := coordinator.LoadConfig(*configPath)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		logger.Warn(w, "path", cfg.Path)
	}
	if *mode != "" {
		cfg.StartupMode = *mode
	}
	if cfg.BridgeToken == "" {
		cfg.BridgeToken = strings.TrimSpace(m.Getenv(agentbridge.EnvToken))
	}
	return m.startCoordinator(ctx, cfg, *statePath, logger, func(*coordinator.Coordinator) {})
}

// startCoordinator opens the ledger and runs a coordinator until ctx ends,
// reloading its config on SIGHUP. started is called once it is listening.
// It is the wiring shared by coordinator and up.
func (m *Main) startCoordinator(ctx context.Context, cfg coordinator.Config, statePath string, logger *slog.Logger, started func(*coordinator.Coordinator)) (retErr error) {
	pg, err := isPostgres("state", statePath)
	if err != nil {
		return err
	}
	if pg {
		// Several coordinators may share a PostgreSQL ledger: only the
		// lease holder works (lease.go).
		lease, err := holdLease(ctx, statePath, logger)
		if err != nil || lease == nil {
			return err // nil: stopped while standing by
		}
		ctx = lease.ctx
		defer func() {
			if lease.release() && retErr == nil {
				retErr = errors.New("lost the coordinator lease (the state database connection ended); stopped so that the new holder works alone")
			}
		}()
	} else if err := os.MkdirAll(filepath.Dir(statePath), 0o755); err != nil {
		return fmt.Errorf("create state folder: %w", err)
	}
	db, err := state.Open(ctx, statePath)
	if err != nil {
		return err
	}
	defer db.Close()
	c, err := coordinator.New(coordinator.Options{Config: cfg, ConfigPath: cfg.Path, State: db, Logger: logger})
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
	logger.Info("coordinator started", "bridge", cfg.BridgeURL, "status", c.StatusURL(), "state", redactURL(statePath), "startup_mode", cfg.StartupMode)
	started(c)
	return c.Run(ctx)
}

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

// statusGet asks the coordinator's status API and decodes the answer into
// out; an error answer comes back as an *agentbridge.Error.
func statusGet(ctx context.Context, base, path string, q url.Values, out any) error {
	return statusDo(ctx, http.MethodGet, base, path, q, out)
}

// statusDo is statusGet with any method.
func statusDo(ctx context.Context, method, base, path string, q url.Values, out any) error {
	u := strings.TrimRight(base, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return usagef("--coordinator-url: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("ask the coordinator at %s (is it running? see --coordinator-url): %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read the coordinator's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error *agentbridge.Error `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != nil {
			e.Error.Status = resp.StatusCode
			return e.Error
		}
		return fmt.Errorf("the coordinator answered %s", resp.Status)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode the coordinator's answer: %w", err)
	}
	return nil
}

func (m *Main) runInvocations(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "show":
			return m.runInvocationShow(ctx, args[1:])
		case "cancel":
			return m.runInvocationCancel(ctx, args[1:])
		}
	}
	fs := m.newFlagSet("invocations")
	thread := fs.String("thread", "", "only this thread")
	participant := fs.String("participant", "", "only this participant's")
	status := fs.String("status", "", "only this status: queued, running, succeeded, failed, timeout, interrupted, refused, cancelled or passed")
	limit := fs.Int("limit", 100, "at most this many, newest first")
	asJSON := fs.Bool("json", false, "print the records as JSON")
	base := m.coordinatorURLFlag(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("invocations takes no arguments, got %q", pos[0])
	}
	if *status != "" && !state.ValidStatus(*status) {
		return usagef("--status: %q is not one of queued, running, succeeded, failed, timeout, interrupted, refused, cancelled, passed", *status)
	}
	if *limit < 1 || *limit > agentbridge.MaxEventsLimit {
		return usagef("--limit: must be from 1 to %d", agentbridge.MaxEventsLimit)
	}
	q := url.Values{"limit": {strconv.Itoa(*limit)}}
	if *thread != "" {
		q.Set("thread", *thread)
	}
	if *participant != "" {
		q.Set("participant", *participant)
	}
	if *status != "" {
		q.Set("status", *status)
	}
	var out coordinator.InvocationsResponse
	if err := statusGet(ctx, *base, "/invocations", q, &out); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out.Invocations)
	}
	if len(out.Invocations) == 0 {
		fmt.Fprintln(m.Stdout, "no invocations")
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tPARTICIPANT\tTHREAD\tTRIGGER\tEXIT\tDURATION\tTOKENS\tCOST\tREPLY")
	for _, inv := range out.Invocations {
		exit := "-"
		if inv.ExitCode != nil {
			exit = strconv.Itoa(*inv.ExitCode)
		}
		reply := inv.ReplyEventID
		if reply == "" {
			reply = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", inv.ID, inv.Status, inv.Participant, inv.Thread, inv.TriggerID,
			exit, runDuration(inv, time.Now()), tokens(inv), cost(inv), reply)
	}
	return tw.Flush()
}

func (m *Main) runWhy(ctx context.Context, args []string) error {
	fs := m.newFlagSet("why")
	base := m.coordinatorURLFlag(fs)
	asJSON := fs.Bool("json", false, "print the recorded decision as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("why takes one argument: the event id")
	}
	var rec state.Decision
	if err := statusGet(ctx, *base, "/decisions", url.Values{"event": {pos[0]}}, &rec); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rec)
	}
	var d coordinator.Decision
	if err := json.Unmarshal(rec.Decision, &d); err != nil {
		return fmt.Errorf("decode decision: %w", err)
	}
	printDecision(m.Stdout, rec, d)
	return nil
}

// printDecision words a recorded decision for a person.
func printDecision(w io.Writer, rec state.Decision, d coordinator.Decision) {
	fmt.Fprintf(w, "event %s (thread %s, seq %d), decided %s\n", rec.EventID, rec.Thread, rec.Seq, rec.CreatedAt)
	rule := d.Rule
	if d.Reason != "" {
		rule += " (" + d.Reason + ")"
	}
	fmt.Fprintf(w, "rule: %s\n", rule)
	fmt.Fprintf(w, "hop: %d\n", d.Hop)
	if len(d.Invoke) == 0 {
		fmt.Fprintln(w, "invoked: nobody")
	} else {
		fmt.Fprintln(w, "invoked:")
		for _, t := range d.Invoke {
			fmt.Fprintf(w, "  %s (agent %s)\n", t.Participant, t.Agent)
		}
	}
	if len(d.Skipped) > 0 {
		fmt.Fprintln(w, "not invoked:")
		for _, s := range d.Skipped {
			fmt.Fprintf(w, "  %s: %s\n", s.Participant, s.Reason)
		}
	}
	if d.Clarify != "" {
		fmt.Fprintf(w, "clarification sent: %s\n", d.Clarify)
	}
	if d.LoopGuard {
		fmt.Fprintln(w, "loop guard: the hop limit was reached; a notice was posted")
	}
	if d.SceneClose != "" {
		fmt.Fprintf(w, "scene: this event closed the scene (%s); scene.closed was posted\n", d.SceneClose)
	}
	printPartySelection(w, d.Party)
}
