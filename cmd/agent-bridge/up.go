package main

import (
	"bytes"
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
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// overrideUpConfig applies to cfg the flags of up that override the
// config (--humans when given, --status-addr, the token), then checks the
// status API's listener, before anything starts.
func overrideUpConfig(cfg *config.Config, humansGiven bool, humans, statusAddr, token string) error {
	if humansGiven {
		hs, err := parseHumans(humans)
		if err != nil {
			return err
		}
		cfg.HumanIDs = hs
	}
	if statusAddr != "" {
		cfg.StatusAddr = statusAddr
	}
	if token != "" {
		cfg.BridgeToken = token
	}
	if err := status.CheckListen(*cfg); err != nil {
		// The address came from --status-addr when it was given, so the
		// refusal names the flag.
		var ce *config.Error
		if statusAddr != "" && errors.As(err, &ce) {
			return usagef("--status-addr: %v", ce.Err)
		}
		return err
	}
	return nil
}

// upCommand is "agent-bridge up": the bridge and the coordinator in one
// process, for a first run.
func (m *Main) upCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	addr := fs.String("addr", m.env(agentbridge.EnvAddr, bridge.DefaultAddr), "the bridge's listen address")
	envFlag(fs, "addr", agentbridge.EnvAddr)
	statusAddr := fs.String("status-addr", "", "the coordinator status API's listen address, a second port (default: the config's status_addr, "+agentbridge.DefaultStatusAddr+")")
	db := fs.String("db", m.env(agentbridge.EnvDB, agentbridge.DefaultDBPath), "the bridge database")
	envFlag(fs, "db", agentbridge.EnvDB)
	configPath := fs.String("config", m.env(agentbridge.EnvCoordinatorConfig, agentbridge.DefaultCoordinatorConfig), "the coordinator config; the built-in defaults when this default file does not exist")
	envFlag(fs, "config", agentbridge.EnvCoordinatorConfig)
	statePath := fs.String("state", m.env(agentbridge.EnvCoordinatorState, agentbridge.DefaultCoordinatorState), "the coordinator state database")
	envFlag(fs, "state", agentbridge.EnvCoordinatorState)
	humans := fs.String("humans", "", "comma-separated participant ids whose controls count (default: the config's human_ids, user)")
	tokenFile := fs.String("token-file", "", "file holding a person token the bridge also accepts (else env BRIDGE_TOKEN); the bridge always makes its own in the state folder, next to the database")
	envFlag(fs, "token-file", agentbridge.EnvToken)
	logLevel := fs.String("log-level", m.env(agentbridge.EnvLogLevel, "info"), "debug, info, warn or error")
	envFlag(fs, "log-level", agentbridge.EnvLogLevel)
	maxStreams := m.maxStreamsFlag(fs)
	bridgeCfgPath := m.bridgeConfigFlag(fs)
	tlsCert, tlsKey := m.tlsFlags(fs)
	tf := m.tailnetFlags(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("up takes no arguments, got %q", pos[0])
		}
		tc, err := tf.config(fs, *logLevel)
		if err != nil {
			return err
		}
		tc.LoginURL = func(u string) {
			fmt.Fprintf(m.Stdout, "To put agent-bridge on your tailnet, open this link (up waits for it):\n  %s\n", u)
		}
		file, err := readBridgeConfig(*bridgeCfgPath)
		if err != nil {
			return err
		}
		ms, err := parseMaxStreams(*maxStreams)
		if err != nil {
			return err
		}
		logger, err := newLogger(m.Stderr, *logLevel)
		if err != nil {
			return err
		}
		cfg, where, warnings, err := m.loadUpConfig(*configPath, m.configNamed(fs))
		if err != nil {
			return err
		}
		for _, w := range warnings {
			logger.Warn(w, "path", cfg.Path)
		}
		token, err := m.readToken(*tokenFile)
		if err != nil {
			return err
		}
		if err := overrideUpConfig(&cfg, fs.Changed("humans"), *humans, *statusAddr, token); err != nil {
			return err
		}
		rt, err := m.upRuntime(*db, *statePath, *tokenFile)
		if err != nil {
			return err
		}
		if err := sqlitex.MakeFolder(filepath.Dir(*db)); err != nil {
			return fmt.Errorf("create database folder: %w", err)
		}
		// The UI links to the coordinator's dashboard, whose address is known
		// once the coordinator listens.
		var statusURL atomic.Pointer[string]
		b, err := startBridge(ctx, bridgeConfig{Addr: *addr, DB: *db, Humans: cfg.HumanIDs, Token: token,
			MaxBody: bridge.DefaultMaxBody, MaxStreams: ms, Version: moduleVersion(), CoordinatorURL: func() string {
				if u := statusURL.Load(); u != nil {
					return *u
				}
				return ""
			}, File: file, TLSCert: *tlsCert, TLSKey: *tlsKey, Tailnet: tc}, logger)
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
		if cfg.BridgeToken == "" {
			// up's own coordinator gets a coordinator token, not the
			// person's: it may not act as a human. Its status API still
			// takes the person's tokens (it asks the bridge).
			secret, revoke, err := coordinatorToken(ctx, b.Store, cfg.CoordinatorID, logger)
			if err != nil {
				return err
			}
			defer revoke()
			cfg.BridgeToken = secret
		}
		if rt.TokenFile == "" {
			rt.TokenFile = absPath(b.TokenPath)
		}
		login := m.loginLink(b, logger)
		pairing := m.pairPhone(ctx, b, logger)
		// local is where this machine's clients reach the bridge: up's own
		// coordinator and, through the runtime file, the other commands.
		// Over HTTPS it is a second, plain listener on loopback, since
		// the certificate (self-signed, or issued for the machine's name)
		// is not one they can check at 127.0.0.1.
		local := b.URL()
		if *tlsCert != "" {
			if local, err = b.Server.OpenLocal(); err != nil {
				return err
			}
		}
		cfg.BridgeURL = local
		runtimePath := client.RuntimePath(m.Getenv)
		defer func() {
			if err := client.RemoveRuntime(runtimePath, rt.PID); err != nil {
				logger.Warn("remove the runtime file", "err", err)
			}
		}()
		return m.startCoordinator(ctx, cfg, *statePath, logger, func(c *coordinator.Coordinator) {
			u := c.StatusURL()
			statusURL.Store(&u)
			rt.BridgeURL, rt.StatusURL = local, c.StatusURL()
			published := m.publishRuntime(runtimePath, rt, logger)
			m.printUpSummary(rt, b.URL(), login, where, warnings, cfg, runtimePath, published)
			m.printPairing(b, pairing)
		})
	}
}

// parseHumans checks a comma-separated --humans list.
func parseHumans(list string) (agentbridge.Humans, error) {
	hs := splitList(list)
	if len(hs) == 0 {
		return nil, usagef("--humans: give at least one participant id")
	}
	for _, h := range hs {
		if !agentbridge.ParticipantIDPattern.MatchString(h) {
			return nil, usagef("--humans: %q is not a valid participant id", h)
		}
	}
	return hs, nil
}

// upRuntime is the runtime file up will publish, without its addresses
// yet. Another running up that uses the same databases is refused: two
// coordinators following one log would answer every message twice.
func (m *Main) upRuntime(db, statePath, tokenFile string) (client.Runtime, error) {
	abs := func(p string) string {
		if pg, _ := isPostgres("db", p); pg {
			return maskURL(p)
		}
		return absPath(p)
	}
	dir, _ := os.Getwd()
	rt := client.Runtime{PID: os.Getpid(), Dir: dir, DB: abs(db), State: abs(statePath), Started: time.Now().UTC().Format(time.RFC3339)}
	if tokenFile != "" {
		rt.TokenFile = abs(tokenFile)
	}
	if other, ok := m.runningUp(); ok && other.PID != rt.PID && (other.DB == rt.DB || other.State == rt.State) {
		return rt, usagef("another agent-bridge up (pid %d, started %s in %s) uses %s and %s; stop it, or give this one its own --db and --state",
			other.PID, other.Started, other.Dir, other.DB, other.State)
	}
	return rt, nil
}

// absPath is p made absolute ("" stays "", and p when it cannot be).
func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// publishRuntime writes up's runtime file, unless another running up
// owns it; it reports whether other commands will find this up through it.
func (m *Main) publishRuntime(path string, rt client.Runtime, logger *slog.Logger) bool {
	if path == "" {
		return false
	}
	if other, ok := m.runningUp(); ok && other.PID != rt.PID {
		logger.Warn("another agent-bridge up is running; commands without BRIDGE_URL find that one, not this one", "pid", other.PID, "bridge", other.BridgeURL)
		return false
	}
	if err := client.WriteRuntime(path, rt); err != nil {
		logger.Warn("other commands will not find this up by themselves", "err", err)
		return false
	}
	return true
}

// loginLink is the UI's one-time login link up prints, "" when the bridge
// cannot make one (the link is a convenience: the token file still works).
func (m *Main) loginLink(b *runningBridge, logger *slog.Logger) string {
	code, err := b.Server.NewLoginCode()
	if err != nil {
		logger.Warn("no login link", "err", err)
		return ""
	}
	return b.URL() + "/ui/login#code=" + code
}

// printUpSummary is what up prints once it is up: where everything is
// (the UI as its one-time login link), the config and its warnings, the
// agents, and how other shells find it. It is written at once, so that
// whoever waits for "is up" reads it whole. bridgeURL is the bridge's
// listener (https with --tls-cert), which rt.BridgeURL is not over HTTPS.
func (m *Main) printUpSummary(rt client.Runtime, bridgeURL, login, where string, warnings []string, cfg config.Config, runtimePath string, published bool) {
	w := &bytes.Buffer{}
	defer func() { _, _ = m.Stdout.Write(w.Bytes()) }()
	fmt.Fprintf(w, "agent-bridge is up: bridge %s, coordinator status %s\n", bridgeURL, rt.StatusURL)
	if login != "" {
		fmt.Fprintf(w, "Open the UI at %s\n  (this link logs the browser in, once, within %s; afterwards open %s/ui and paste the token from %s)\n", login, bridge.LoginCodeTTL, bridgeURL, rt.TokenFile)
	} else {
		fmt.Fprintf(w, "Open the UI at %s/ui\n", bridgeURL)
	}
	fmt.Fprintf(w, "Runs dashboard at %s/\n", rt.StatusURL)
	fmt.Fprintf(w, "Coordinator config: %s\n", where)
	if len(warnings) > 0 {
		fmt.Fprintln(w, "Config warnings:")
		for _, s := range warnings {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	printAgents(w, cfg)
	if published {
		fmt.Fprintf(w, "Other agent-bridge commands find this up through %s while it runs.\n", runtimePath)
	}
	var exports []string
	if bridgeURL != agentbridge.DefaultBridgeURL {
		exports = append(exports, "export "+agentbridge.EnvBridgeURL+"="+bridgeURL)
	}
	if rt.StatusURL != "" && rt.StatusURL != agentbridge.DefaultStatusURL {
		exports = append(exports, "export "+agentbridge.EnvCoordinatorURL+"="+rt.StatusURL)
	}
	if len(exports) > 0 {
		fmt.Fprintln(w, "The addresses are not the defaults; elsewhere (scripts, another user, a container):")
		for _, e := range exports {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// configNamed reports whether the config file was named, by --config or
// BRIDGE_COORDINATOR_CONFIG, rather than being the default one: a named
// file must exist.
func (m *Main) configNamed(fs *pflag.FlagSet) bool {
	return fs.Changed("config") || m.Getenv(agentbridge.EnvCoordinatorConfig) != ""
}

// loadUpConfig loads the coordinator config for up. Unlike the coordinator
// daemon, up runs without a config file, on the defaults (whose built-in
// echo agent answers a first run), but only when the file was not named
// (explicit: by --config or BRIDGE_COORDINATOR_CONFIG): a named file that
// does not exist is a usage error. It also says, for the person reading
// up's output, where the config came from, and returns the config's
// warnings for up's summary.
func (m *Main) loadUpConfig(path string, explicit bool) (config.Config, string, []string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return config.Config{}, "", nil, fmt.Errorf("resolve %s: %w", path, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		if explicit {
			return config.Config{}, "", nil, usagef("--config: %s does not exist", abs)
		}
		return config.Default(), fmt.Sprintf("none found at %s, so the built-in defaults (agent echo); pass --config FILE or write that file to configure agents", abs), nil, nil
	} else if err != nil {
		return config.Config{}, "", nil, usagef("--config: %v", err)
	}
	cfg, warnings, err := config.Load(abs)
	if err != nil {
		return config.Config{}, "", nil, err
	}
	return cfg, cfg.Path, warnings, nil
}

// printAgents lists the configured agents, one a line with the command
// that answers for it, so that a person sees who can reply before posting.
func printAgents(w io.Writer, cfg config.Config) {
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

// agentsCommand is "agent-bridge agents": the agents of the config that
// up (or the coordinator) would load from here, one a line, then the live
// coordinators the bridge knows and what each serves (contract 7.1);
// --live prints only the latter.
func (m *Main) agentsCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	configPath := fs.String("config", m.env(agentbridge.EnvCoordinatorConfig, agentbridge.DefaultCoordinatorConfig), "coordinator config; the built-in defaults when the default file does not exist")
	envFlag(fs, "config", agentbridge.EnvCoordinatorConfig)
	cf := m.addClientFlags(fs)
	live := fs.Bool("live", false, "only the coordinators registered with the bridge and the agents each serves (with --json: GET /coordinators's answer)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("agents takes no arguments, got %q", pos[0])
		}
		if *live {
			return m.printLiveCoordinators(ctx, cf, true)
		}
		cfg, where, _, err := m.loadUpConfig(*configPath, m.configNamed(fs))
		if err != nil {
			return err
		}
		if cf.json {
			return m.printJSON(cfg.Agents)
		}
		fmt.Fprintf(m.Stdout, "Coordinator config: %s\n", where)
		printAgents(m.Stdout, cfg)
		return m.printLiveCoordinators(ctx, cf, false)
	}
}

// agentsBridgeWait bounds asking the bridge for its coordinators when the
// config's agents are printed too: the bridge may well not be running.
const agentsBridgeWait = 2 * time.Second

// printLiveCoordinators prints the coordinators registered with the
// bridge, live first. When must is false a bridge that does not answer is
// one line, not an error.
func (m *Main) printLiveCoordinators(ctx context.Context, cf *clientFlags, must bool) error {
	cl, err := m.newClient(cf)
	if err != nil {
		return err
	}
	if !must {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, agentsBridgeWait)
		defer cancel()
	}
	list, err := cl.Coordinators(ctx)
	if err != nil {
		if must {
			return explain(err, cf.url)
		}
		fmt.Fprintf(m.Stdout, "Coordinators: the bridge at %s did not answer (%v), so who serves what right now is not known\n", cf.url, err)
		return nil
	}
	if must && cf.json {
		return m.printJSON(list)
	}
	printCoordinators(m.Stdout, cf.url, list.Coordinators)
	return nil
}

// printCoordinators prints each registered coordinator with its agents:
// "laptop @ mbp.local, live (heartbeat 2 s ago), status http://…", then
// one agent a line.
func printCoordinators(w io.Writer, bridgeURL string, list []agentbridge.CoordinatorInfo) {
	nlive := 0
	for _, c := range list {
		if c.Live {
			nlive++
		}
	}
	fmt.Fprintf(w, "Coordinators at %s: %d live\n", bridgeURL, nlive)
	for _, liveFirst := range []bool{true, false} {
		for _, c := range list {
			if c.Live != liveFirst {
				continue
			}
			state := fmt.Sprintf("live (heartbeat %s ago)", (time.Duration(c.AgeMillis) * time.Millisecond).Round(100*time.Millisecond))
			if !c.Live {
				state = "offline since " + c.HeartbeatAt
			}
			fmt.Fprintf(w, "  %s @ %s, %s", c.ID, c.Host, state)
			if c.StatusURL != "" {
				fmt.Fprintf(w, ", status %s", c.StatusURL)
			}
			fmt.Fprintln(w)
			for _, a := range c.Agents {
				client := ""
				if a.Client != "" {
					client = ", client " + a.Client
				}
				fmt.Fprintf(w, "    %-12s %s%s\n", a.Name, a.Kind, client)
			}
			if len(c.Workspaces) > 0 {
				fmt.Fprintf(w, "    workspaces: %s\n", strings.Join(c.Workspaces, ", "))
			}
		}
	}
}
