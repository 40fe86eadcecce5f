package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/postgres"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/internal/service"
)

// runUnderServiceManager runs a daemon subcommand through service.Run, so
// that under launchd or systemd kardianos's Start/Stop drive the same
// graceful shutdown as a signal does.
func (m *Main) runUnderServiceManager(ctx context.Context, d service.Daemon, run func(context.Context, []string) error, args []string) error {
	return service.Run(ctx, d, func(ctx context.Context) error { return run(ctx, args) })
}

const serviceUsage = `usage: agent-bridge service install|uninstall|start|stop|status serve|coordinator [flags] [-- DAEMON FLAGS]

install writes the service definition (replacing a previous one) and starts it.
Flags after "--" are passed to the daemon; relative file paths among them
(--db, --state, --config, --token-file) are made absolute.
  agent-bridge service install serve -- --addr 127.0.0.1:5111 --token-file ~/.config/agent-bridge/token
  agent-bridge service install coordinator -- --config ./coordinator.config.json
`

// runService is "agent-bridge service ACTION DAEMON".
func (m *Main) runService(_ context.Context, args []string) error {
	var daemonArgs []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, daemonArgs = args[:i], args[i+1:]
	}
	fs := m.newFlagSet("service")
	fs.Usage = func() { fmt.Fprint(m.Stderr, serviceUsage); fs.PrintDefaults() }
	system := fs.Bool("system", false, "a system service (root) instead of a per-user one")
	user := fs.String("user", "", "with --system: the user the daemon runs as (default root)")
	dataDir := fs.String("data-dir", "", "the daemon's folder for its databases (default: the platform's per-user data folder)")
	logDir := fs.String("log-dir", "", "where the daemon's log file goes (default: the platform's per-user log folder)")
	pathEnv := fs.String("path", m.Getenv("PATH"), "the PATH the daemon (and its adapters) will see (default: the current PATH)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fmt.Fprint(m.Stderr, serviceUsage)
		return usagef("service needs an action and a daemon, e.g. \"service install serve\"")
	}
	action := pos[0]
	d, err := service.ParseDaemon(pos[1])
	if err != nil {
		return usagef("service: %v", err)
	}
	if !slices.Contains([]string{"install", "uninstall", "start", "stop", "status"}, action) {
		return usagef("service: %q is not one of install, uninstall, start, stop, status", action)
	}
	if len(daemonArgs) > 0 && action != "install" {
		return usagef("service %s takes no daemon flags (only install does)", action)
	}
	if *user != "" && !*system {
		return usagef("--user: only a system service (--system) runs as another user")
	}
	mgr, merr := service.NewManager()
	if mgr == nil {
		return merr
	}
	if action == "status" {
		return m.printServiceStatus(mgr, d, *system, merr)
	}
	if merr != nil {
		return merr
	}
	o := service.Options{System: *system}
	name := service.Name(d, mgr.Options(o).GOOS)
	switch action {
	case "install":
		o, err = m.installOptions(mgr, d, *system, *user, *dataDir, *logDir, *pathEnv, daemonArgs)
		if err != nil {
			return err
		}
		if err := mgr.Install(d, o); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "installed %s: %s\n  runs: %s %s\n  PATH: %s\n  logs: %s\n",
			name, mgr.DefinitionPath(d, o.System), o.Binary, strings.Join(service.Config(d, o).Arguments, " "), o.Path, service.LogFile(d, o))
		if err := mgr.Start(d, o); err != nil {
			return fmt.Errorf("installed, but could not start it: %w", err)
		}
		fmt.Fprintf(m.Stdout, "started %s\n", name)
	case "uninstall":
		removed, err := mgr.Uninstall(d, o)
		if err != nil {
			return err
		}
		if !removed {
			fmt.Fprintf(m.Stdout, "%s was not installed (%s)\n", name, mgr.DefinitionPath(d, o.System))
			return nil
		}
		fmt.Fprintf(m.Stdout, "stopped and removed %s\n", name)
	case "start":
		if err := mgr.Start(d, o); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "started %s\n", name)
	case "stop":
		if err := mgr.Stop(d, o); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "stopped %s\n", name)
	}
	return nil
}

// printServiceStatus prints installed/running/stopped and where the logs
// are. unsupported is the error NewManager returned, if any: the status of
// a definition file can still be told.
func (m *Main) printServiceStatus(mgr *service.Manager, d service.Daemon, system bool, unsupported error) error {
	st, err := mgr.Status(d, system)
	if err != nil {
		return err
	}
	name := service.Name(d, mgr.Options(service.Options{}).GOOS)
	fmt.Fprintf(m.Stdout, "%s: %s\n", name, st.State)
	if st.State == service.NotInstalled {
		fmt.Fprintf(m.Stdout, "  install it with: agent-bridge service install %s\n", d)
		if unsupported != nil {
			fmt.Fprintf(m.Stdout, "  note: %v\n", unsupported)
		}
		return nil
	}
	fmt.Fprintf(m.Stdout, "  definition: %s\n", st.Definition)
	if len(st.Installed.Args) > 0 {
		fmt.Fprintf(m.Stdout, "  runs: %s\n", strings.Join(st.Installed.Args, " "))
	}
	fmt.Fprintf(m.Stdout, "  logs: %s\n", st.Installed.LogFile)
	if st.Detail != "" {
		fmt.Fprintf(m.Stdout, "  detail: %s\n", st.Detail)
	}
	return nil
}

// daemonPathFlags are daemon flags naming files: a service runs from its
// own working folder, so install makes them absolute.
var daemonPathFlags = []string{"db", "state", "config", "token-file"}

// installOptions works out everything "service install" writes: absolute
// binary, data and log folders, the daemon's flags with absolute paths and
// defaults for the databases, and the PATH captured now.
func (m *Main) installOptions(mgr *service.Manager, d service.Daemon, system bool, user, dataDir, logDir, pathEnv string, daemonArgs []string) (service.Options, error) {
	bin, err := os.Executable()
	if err != nil {
		return service.Options{}, fmt.Errorf("find the agent-bridge binary: %w", err)
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		return service.Options{}, fmt.Errorf("find the agent-bridge binary: %w", err)
	}
	goos := mgr.Options(service.Options{}).GOOS
	defData, defLog := service.Defaults(goos, mgr.Home, system, m.Getenv)
	if dataDir, err = absOr(dataDir, defData); err != nil {
		return service.Options{}, usagef("--data-dir: %v", err)
	}
	if logDir, err = absOr(logDir, defLog); err != nil {
		return service.Options{}, usagef("--log-dir: %v", err)
	}
	if pathEnv == "" {
		return service.Options{}, usagef("--path: the PATH is empty; adapters would not find their CLIs")
	}
	args, set, err := absDaemonArgs(daemonArgs)
	if err != nil {
		return service.Options{}, err
	}
	defaults := service.DefaultArgs(d, dataDir)
	for i := 0; i+1 < len(defaults); i += 2 {
		if !set[strings.TrimLeft(defaults[i], "-")] {
			args = append(args, defaults[i], defaults[i+1])
		}
	}
	if d == service.Coordinator {
		cfg := argValue(args, "config")
		if _, err := os.Stat(cfg); err != nil {
			return service.Options{}, usagef("the coordinator's config %s does not exist: create it there, or pass -- --config FILE", cfg)
		}
	}
	if d == service.Serve && !set["token-file"] && m.Getenv(agentbridge.EnvToken) != "" {
		fmt.Fprintln(m.Stderr, "warning: BRIDGE_TOKEN is set in this shell, but a service does not inherit it; pass -- --token-file FILE to keep the token")
	}
	o := service.Options{System: system, Binary: bin, Args: args, Path: pathEnv,
		DataDir: dataDir, LogDir: logDir, UserName: user}
	if err := o.Validate(); err != nil {
		return service.Options{}, usagef("service install: %v", err)
	}
	return o, nil
}

// absOr returns path made absolute, or def when path is empty.
func absOr(path, def string) (string, error) {
	if path == "" {
		return def, nil
	}
	return filepath.Abs(path)
}

// absDaemonArgs makes the values of daemonPathFlags absolute (in "--db x",
// "-db x" and "--db=x" forms) and reports which of them were given.
func absDaemonArgs(args []string) ([]string, map[string]bool, error) {
	out := slices.Clone(args)
	set := map[string]bool{}
	for i := 0; i < len(out); i++ {
		a := out[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !slices.Contains(daemonPathFlags, name) {
			continue
		}
		set[name] = true
		if !hasValue {
			if i+1 >= len(out) {
				return nil, nil, usagef("daemon flag %s needs a value", a)
			}
			i++
			value = out[i]
		}
		abs, err := filepath.Abs(expandHome(value))
		if err != nil {
			return nil, nil, usagef("daemon flag --%s: %v", name, err)
		}
		if hasValue {
			out[i] = "--" + name + "=" + abs
		} else {
			out[i] = abs
		}
	}
	return out, set, nil
}

// expandHome turns a leading "~/" into the home folder: the shell does not
// expand it after "--db=".
func expandHome(p string) string {
	rest, ok := strings.CutPrefix(p, "~/")
	if !ok {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.Join(home, rest)
}

// argValue returns the value of flag name in args ("--name v", "-name v",
// "--name=v"), or "" when absent.
func argValue(args []string, name string) string {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		n, v, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if n != name {
			continue
		}
		if hasValue {
			return v
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// runBackup is "agent-bridge backup --to FILE [--db DB]".
func (m *Main) runBackup(ctx context.Context, args []string) error {
	fs := m.newFlagSet("backup")
	to := fs.String("to", "", "the backup file to write (required)")
	db := fs.String("db", m.env(agentbridge.EnvDB, agentbridge.DefaultDBPath), "the bridge database (env BRIDGE_DB); the server may be running")
	force := fs.Bool("force", false, "replace the --to file if it exists")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("backup takes no arguments, got %q", pos[0])
	}
	if *to == "" {
		return usagef("backup: --to FILE is required")
	}
	if pg, err := isPostgres("db", *db); err != nil {
		return err
	} else if pg {
		return usagef("backup: %s", pgDumpAdvice)
	}
	if _, err := os.Stat(*db); err != nil {
		return usagef("--db: %v", err)
	}
	if _, err := os.Stat(*to); err == nil && !*force {
		return usagef("--to: %s already exists; choose another name, or pass --force to replace it", *to)
	}
	if err := os.MkdirAll(filepath.Dir(*to), 0o700); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	start := time.Now()
	if err := sqlite.Backup(ctx, *db, *to); err != nil {
		return err
	}
	n, err := sqlite.CountEvents(ctx, *to)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "backed up %d events from %s to %s (integrity ok, %s)\n", n, *db, *to, time.Since(start).Round(time.Millisecond))
	return nil
}

// runRestore is "agent-bridge restore --from FILE [--db DB]".
func (m *Main) runRestore(ctx context.Context, args []string) error {
	fs := m.newFlagSet("restore")
	from := fs.String("from", "", "the backup file to restore (required)")
	db := fs.String("db", m.env(agentbridge.EnvDB, agentbridge.DefaultDBPath), "the bridge database to replace (env BRIDGE_DB); the server must be stopped")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("restore takes no arguments, got %q", pos[0])
	}
	if *from == "" {
		return usagef("restore: --from FILE is required")
	}
	if pg, err := isPostgres("db", *db); err != nil {
		return err
	} else if pg {
		return usagef("restore: %s", pgDumpAdvice)
	}
	if _, err := os.Stat(*from); err != nil {
		return usagef("--from: %v", err)
	}
	before, _ := filepath.Glob(*db + ".pre-restore-*")
	if err := sqlite.Restore(ctx, *from, *db); err != nil {
		return err
	}
	n, err := sqlite.CountEvents(ctx, *db)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "restored %d events from %s into %s\n", n, *from, *db)
	after, _ := filepath.Glob(*db + ".pre-restore-*")
	for _, p := range after {
		if !slices.Contains(before, p) {
			fmt.Fprintf(m.Stdout, "the previous database is kept as %s\n", p)
		}
	}
	fmt.Fprintln(m.Stdout, "clients that remember a later cursor will get 409 cursor_ahead and must resync")
	return nil
}

// checkStatus grades one doctor check.
type checkStatus int

const (
	checkOK checkStatus = iota
	checkWarn
	checkFail
)

func (s checkStatus) String() string {
	return [...]string{"ok  ", "warn", "FAIL"}[s]
}

// checkResult is one line of doctor's checklist: what was checked, how it
// went, and how to fix it when it did not.
type checkResult struct {
	Name   string
	Status checkStatus
	Detail string
	Fix    string
}

// Free-disk thresholds: below warnFree doctor warns, below failFree the
// bridge is about to stop accepting events.
const (
	warnFree = 1 << 30
	failFree = 100 << 20
)

// runDoctor is "agent-bridge doctor": a checklist with a fix for each
// failure, exit 1 when something is wrong.
func (m *Main) runDoctor(ctx context.Context, args []string) error {
	fs := m.newFlagSet("doctor")
	url := fs.String("url", m.env(agentbridge.EnvBridgeURL, agentbridge.DefaultBridgeURL), "the bridge server (env BRIDGE_URL)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (else env BRIDGE_TOKEN, else the config's bridge_token)")
	cfgPath := fs.String("config", m.env(agentbridge.EnvCoordinatorConfig, agentbridge.DefaultCoordinatorConfig), "the coordinator config (env BRIDGE_COORDINATOR_CONFIG)")
	db := fs.String("db", m.env(agentbridge.EnvDB, agentbridge.DefaultDBPath), "the bridge database (env BRIDGE_DB)")
	state := fs.String("state", m.env(agentbridge.EnvCoordinatorState, agentbridge.DefaultCoordinatorState), "the coordinator state database (env BRIDGE_COORDINATOR_STATE)")
	system := fs.Bool("system", false, "look at system services instead of per-user ones")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("doctor takes no arguments, got %q", pos[0])
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	var results []checkResult
	// Installed services say which files the daemons really use; flags the
	// user did not give follow them.
	servicePath, pathSource := m.Getenv("PATH"), "the current PATH"
	mgr, merr := service.NewManager()
	if mgr == nil {
		results = append(results, checkResult{Name: "services", Status: checkWarn, Detail: merr.Error()})
	}
	for _, d := range []service.Daemon{service.Serve, service.Coordinator} {
		if mgr == nil {
			break
		}
		st, err := mgr.Status(d, *system)
		results = append(results, checkService(d, st, err))
		if st.State == service.NotInstalled {
			continue
		}
		args := st.Installed.Args
		if d == service.Serve && !given["db"] && argValue(args, "db") != "" {
			*db = argValue(args, "db")
		}
		if d == service.Coordinator {
			if !given["config"] && argValue(args, "config") != "" {
				*cfgPath = argValue(args, "config")
			}
			if !given["state"] && argValue(args, "state") != "" {
				*state = argValue(args, "state")
			}
			if st.Installed.Path != "" {
				servicePath, pathSource = st.Installed.Path, "the PATH in "+st.Definition
			}
		}
	}

	cfg, cfgRes := checkConfig(*cfgPath)
	results = append(results, cfgRes...)
	token, err := m.readToken(*tokenFile)
	if err != nil {
		return err
	}
	if token == "" && cfg != nil {
		token = cfg.BridgeToken
	}
	results = append(results, checkBridge(ctx, *url, token)...)
	if cfg != nil {
		results = append(results, checkAdapters(*cfg, servicePath, pathSource)...)
	}
	dbPG, err := isPostgres("db", *db)
	if err != nil {
		return err
	}
	if dbPG {
		results = append(results, checkPostgres(ctx, "bridge database", *db, postgres.SchemaVersions))
	} else {
		results = append(results, checkDatabase(ctx, "bridge database", *db, "agent-bridge restore --from BACKUP --db "+*db))
	}
	statePG, err := isPostgres("state", *state)
	if err != nil {
		return err
	}
	if statePG {
		results = append(results, checkPostgres(ctx, "coordinator state", *state, ledgerVersions))
	} else {
		results = append(results, checkDatabase(ctx, "coordinator state", *state, "stop the coordinator and move "+*state+" aside; it starts afresh (startup_mode decides what it replays)"))
	}
	if !dbPG {
		results = append(results, checkDisk(*db))
	}

	failed := printChecks(m.Stdout, results)
	if failed > 0 {
		fmt.Fprintf(m.Stdout, "\n%d problem(s) found\n", failed)
		return &exitError{code: 1}
	}
	fmt.Fprintln(m.Stdout, "\nall checks passed")
	return nil
}

// printChecks prints the checklist and returns the number of failures.
func printChecks(w io.Writer, results []checkResult) int {
	failed := 0
	for _, r := range results {
		fmt.Fprintf(w, "[%s] %s: %s\n", r.Status, r.Name, r.Detail)
		if r.Status != checkOK && r.Fix != "" {
			fmt.Fprintf(w, "       fix: %s\n", r.Fix)
		}
		if r.Status == checkFail {
			failed++
		}
	}
	return failed
}

// checkBridge checks that the server answers /ping and accepts the token
// on an authenticated request.
func checkBridge(ctx context.Context, url, token string) []checkResult {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := client.New(url, client.WithToken(token))
	v, err := c.Ping(ctx)
	if err != nil {
		return []checkResult{{Name: "bridge reachable", Status: checkFail,
			Detail: fmt.Sprintf("%s does not answer: %v", url, err),
			Fix:    "start it (agent-bridge serve, or agent-bridge service start serve), or point --url / BRIDGE_URL at it"}}
	}
	res := []checkResult{{Name: "bridge reachable", Status: checkOK, Detail: fmt.Sprintf("%s answers (version %s)", url, v)}}
	if _, err := c.Threads(ctx, "", 1); err != nil {
		r := checkResult{Name: "token accepted", Status: checkFail, Detail: fmt.Sprintf("GET /threads failed: %v", err)}
		var ae *agentbridge.Error
		if errors.As(err, &ae) && ae.Code == agentbridge.ECodeUnauthorized {
			r.Fix = "give doctor the server's token: --token-file FILE, BRIDGE_TOKEN, or bridge_token in the coordinator config"
			if token == "" {
				r.Detail = "the server wants a token and none was given"
			}
		}
		return append(res, r)
	}
	detail := "an authenticated request (GET /threads) succeeded"
	if token == "" {
		detail = "the server needs no token"
	}
	return append(res, checkResult{Name: "token accepted", Status: checkOK, Detail: detail})
}

// checkConfig loads the coordinator config; it returns nil when there is
// none to check further.
func checkConfig(path string) (*coordinator.Config, []checkResult) {
	const name = "coordinator config"
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, []checkResult{{Name: name, Status: checkWarn, Detail: fmt.Sprintf("%s does not exist, so the coordinator cannot start", path),
			Fix: "create it (see docs/operations.md), or point --config at it"}}
	}
	cfg, warnings, err := coordinator.LoadConfig(path)
	if err != nil {
		return nil, []checkResult{{Name: name, Status: checkFail, Detail: err.Error(),
			Fix: "correct the key named above in " + path + "; the coordinator refuses to start (or keeps its previous config) until then"}}
	}
	res := []checkResult{{Name: name, Status: checkOK, Detail: fmt.Sprintf("%s is valid, %d agent(s)", path, len(cfg.Agents))}}
	for _, w := range warnings {
		res = append(res, checkResult{Name: name, Status: checkWarn, Detail: w, Fix: "remove or rename the key"})
	}
	return &cfg, res
}

// shippedAdapterCLIs maps the shipped adapter scripts to the CLI each runs.
var shippedAdapterCLIs = map[string]string{"claude_code.sh": "claude", "codex.sh": "codex"}

// checkAdapters checks each agent's command is present and executable, and
// that the CLI a shipped adapter wraps is on the PATH the service will see.
func checkAdapters(cfg coordinator.Config, pathEnv, pathSource string) []checkResult {
	var res []checkResult
	ids := make([]string, 0, len(cfg.Agents))
	for id := range cfg.Agents {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		cmd := cfg.Agents[id].Command
		name := "adapter " + id
		if len(cmd) == 0 {
			res = append(res, checkResult{Name: name, Status: checkFail, Detail: "no command configured", Fix: "set agents." + id + ".command"})
			continue
		}
		var found string
		var err error
		if strings.Contains(cmd[0], "/") {
			found, err = cmd[0], isExecutable(cmd[0])
		} else {
			found, err = lookPathIn(cmd[0], pathEnv)
		}
		if err != nil {
			res = append(res, checkResult{Name: name, Status: checkFail,
				Detail: fmt.Sprintf("command %s: %v (looked in %s)", cmd[0], err, pathSource),
				Fix:    "install it, fix agents." + id + ".command[0], or chmod +x it"})
			continue
		}
		res = append(res, checkResult{Name: name, Status: checkOK, Detail: found})
		for _, arg := range cmd {
			cli, ok := shippedAdapterCLIs[filepath.Base(arg)]
			if !ok {
				continue
			}
			cname := fmt.Sprintf("%s CLI for %s", cli, id)
			if p, err := lookPathIn(cli, pathEnv); err != nil {
				res = append(res, checkResult{Name: cname, Status: checkFail,
					Detail: fmt.Sprintf("%s is not on %s", cli, pathSource),
					Fix:    fmt.Sprintf("install %s, or reinstall the service from a shell where it is on PATH (agent-bridge service install coordinator, or --path)", cli)})
			} else {
				res = append(res, checkResult{Name: cname, Status: checkOK, Detail: p})
			}
		}
	}
	return res
}

// lookPathIn is exec.LookPath against a given PATH rather than the
// process's own: the service's PATH is what matters.
func lookPathIn(file, pathEnv string) (string, error) {
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if isExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", file)
}

// isExecutable reports why path cannot be run, or nil.
func isExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a folder", path)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not executable", path)
	}
	return nil
}

// checkService reports an installed service that is not running; one that
// is not installed is fine (the daemons may be run by hand).
func checkService(d service.Daemon, st service.Status, err error) checkResult {
	name := "service " + string(d)
	switch {
	case err != nil:
		return checkResult{Name: name, Status: checkWarn, Detail: err.Error()}
	case st.State == service.NotInstalled:
		return checkResult{Name: name, Status: checkOK, Detail: "not installed (fine if you run it by hand; agent-bridge service install " + string(d) + " to keep it running)"}
	case st.State == service.Running:
		return checkResult{Name: name, Status: checkOK, Detail: "running; logs in " + st.Installed.LogFile}
	case st.State == service.Stopped:
		return checkResult{Name: name, Status: checkFail, Detail: "installed but stopped",
			Fix: fmt.Sprintf("agent-bridge service start %s; if it stops again, read %s", d, st.Installed.LogFile)}
	}
	return checkResult{Name: name, Status: checkWarn, Detail: "installed, state unknown: " + st.Detail,
		Fix: "read " + st.Installed.LogFile}
}

// checkDatabase runs integrity_check on a database; a missing one is a
// warning (the daemon creates it).
func checkDatabase(ctx context.Context, name, path, fix string) checkResult {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return checkResult{Name: name, Status: checkWarn, Detail: path + " does not exist yet (the daemon creates it on start)",
			Fix: "point --db / --state at the daemon's file if it lives elsewhere"}
	}
	if err := sqlite.IntegrityCheck(ctx, path); err != nil {
		return checkResult{Name: name, Status: checkFail, Detail: err.Error(), Fix: fix}
	}
	return checkResult{Name: name, Status: checkOK, Detail: path + ": integrity_check ok"}
}

// checkDisk checks free space on the filesystem holding path (or its
// nearest existing parent).
func checkDisk(path string) checkResult {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return checkResult{Name: "free disk", Status: checkWarn, Detail: err.Error()}
	}
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return checkResult{Name: "free disk", Status: checkWarn, Detail: fmt.Sprintf("statfs %s: %v", dir, err)}
	}
	return gradeFree(dir, st.Bavail*uint64(st.Bsize))
}

// gradeFree turns a free-space figure into a check result.
func gradeFree(dir string, free uint64) checkResult {
	r := checkResult{Name: "free disk", Detail: fmt.Sprintf("%.1f GiB free on %s", float64(free)/(1<<30), dir)}
	switch {
	case free < failFree:
		r.Status, r.Fix = checkFail, "free space: below 100 MiB SQLite may fail to commit events or checkpoint its WAL"
	case free < warnFree:
		r.Status, r.Fix = checkWarn, "free some space soon (less than 1 GiB left)"
	}
	return r
}
