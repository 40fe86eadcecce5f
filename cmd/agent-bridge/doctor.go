package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
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
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/internal/service"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// checkStatus grades one doctor check.
type checkStatus int

const (
	checkOK checkStatus = iota
	checkWarn
	checkFail
)

// String is the grade as doctor prints it, padded to one width.
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

// doctorTargets are what doctor looks at: its flags, completed from the
// installed services' definitions where the user gave no flag.
type doctorTargets struct {
	url, tokenFile, config, db, state string
	system                            bool
	// given are the flags set on the command line.
	given map[string]bool
	// pathEnv is the PATH the adapters will see; pathSource says whose
	// PATH it is, for the messages.
	pathEnv, pathSource string
}

// doctorCommand is "agent-bridge doctor": a checklist with a fix for each
// failure, exit 1 when something is wrong.
func (m *Main) doctorCommand(c *cobra.Command) runFunc {
	parse := m.doctorFlags(c.Flags())
	return func(ctx context.Context, pos []string) error {
		t, err := parse(pos)
		if err != nil {
			return err
		}
		return m.doctor(ctx, t)
	}
}

// doctor runs the checks on t and prints them. Only what stops the
// product from working fails (exit 1); what is optional or not started
// yet is a warning (contract 6.4).
func (m *Main) doctor(ctx context.Context, t doctorTargets) error {
	results := m.followServices(&t)
	explicitConfig := t.given["config"] || m.Getenv(agentbridge.EnvCoordinatorConfig) != ""
	cfg, cfgRes := checkConfig(t.config, explicitConfig)
	results = append(results, cfgRes...)
	ep := m.bridgeEndpoint(t.url, t.given["url"])
	tokenFile := t.tokenFile
	if tokenFile == "" && m.Getenv(agentbridge.EnvToken) == "" {
		tokenFile = ep.tokenFile
	}
	token, err := m.readToken(tokenFile)
	if err != nil {
		return err
	}
	var humans agentbridge.Humans
	if cfg != nil {
		humans = cfg.HumanIDs
		if token == "" {
			token = cfg.BridgeToken
		}
	}
	if token == "" {
		token = m.localToken(ep.url)
	}
	// A bridge the user named (flag, environment, a running up) must
	// answer; the default one may simply not be started yet.
	named := ep.url != agentbridge.DefaultBridgeURL || t.given["url"] || m.Getenv(agentbridge.EnvBridgeURL) != ""
	results = append(results, checkBridge(ctx, ep.url, token, humans, named)...)
	if cfg != nil {
		results = append(results, checkAdapters(*cfg, t.pathEnv, t.pathSource)...)
		results = append(results, checkWorkspaces(*cfg, t.pathEnv, t.pathSource)...)
	}
	stores, err := checkStores(ctx, t.db, t.state)
	if err != nil {
		return err
	}
	results = append(results, stores...)
	results = append(results, m.checkUpHere(t, cfg))
	if failed := printChecks(m.Stdout, results); failed > 0 {
		fmt.Fprintf(m.Stdout, "\n%d problem(s) found\n", failed)
		return &exitError{code: 1}
	}
	warned := 0
	for _, r := range results {
		if r.Status == checkWarn {
			warned++
		}
	}
	if warned > 0 {
		fmt.Fprintf(m.Stdout, "\nno problems; %d warning(s) about optional or not yet started parts\n", warned)
		return nil
	}
	fmt.Fprintln(m.Stdout, "\nall checks passed")
	return nil
}

// checkUpHere says what "agent-bridge up" would do from this folder:
// which config it loads, where it listens and keeps its data, and
// whether an up is running already.
func (m *Main) checkUpHere(t doctorTargets, cfg *config.Config) checkResult {
	r := checkResult{Name: "up from here", Status: checkOK}
	if rt, ok := m.runningUp(); ok {
		r.Detail = fmt.Sprintf("an up is running (pid %d, in %s): bridge %s, coordinator status %s; other commands find it by themselves",
			rt.PID, rt.Dir, rt.BridgeURL, rt.StatusURL)
		return r
	}
	config := "the built-in defaults (agent echo), as " + t.config + " does not exist"
	if _, err := os.Stat(t.config); err == nil {
		config = t.config
	}
	bridgeAt := agentbridge.DefaultBridgeURL
	if a := m.Getenv(agentbridge.EnvAddr); a != "" {
		bridgeAt = "http://" + a
	}
	agents := 0
	if cfg != nil {
		agents = len(cfg.Agents)
	}
	r.Detail = fmt.Sprintf("would load %s (%d agent(s)), listen on %s (bridge) and %s (coordinator status), and keep its data in %s and %s",
		config, agents, bridgeAt, agentbridge.DefaultStatusURL, maskURL(t.db), maskURL(t.state))
	return r
}

// doctorFlags defines doctor's flags; the function it returns checks the
// arguments and returns the targets.
func (m *Main) doctorFlags(fs *pflag.FlagSet) func(pos []string) (doctorTargets, error) {
	var t doctorTargets
	fs.StringVar(&t.url, "url", agentbridge.DefaultBridgeURL, "the bridge server (else env BRIDGE_URL, else the running up's)")
	fs.StringVar(&t.tokenFile, "token-file", "", "file holding the bearer token (else env BRIDGE_TOKEN, else the running up's, else the config's bridge_token, else the state folder's token)")
	fs.StringVar(&t.config, "config", m.env(agentbridge.EnvCoordinatorConfig, agentbridge.DefaultCoordinatorConfig), "the coordinator config (env BRIDGE_COORDINATOR_CONFIG)")
	fs.StringVar(&t.db, "db", m.env(agentbridge.EnvDB, agentbridge.DefaultDBPath), "the bridge database (env BRIDGE_DB)")
	fs.StringVar(&t.state, "state", m.env(agentbridge.EnvCoordinatorState, agentbridge.DefaultCoordinatorState), "the coordinator state database (env BRIDGE_COORDINATOR_STATE)")
	fs.BoolVar(&t.system, "system", false, "look at system services instead of per-user ones")
	return func(pos []string) (doctorTargets, error) {
		if len(pos) > 0 {
			return t, usagef("doctor takes no arguments, got %q", pos[0])
		}
		t.given = map[string]bool{}
		fs.Visit(func(f *pflag.Flag) { t.given[f.Name] = true })
		t.pathEnv, t.pathSource = m.Getenv("PATH"), "the current PATH"
		return t, nil
	}
}

// followServices checks the installed services and, because their
// definitions say which files the daemons really use, points the targets
// the user did not give at those files and at the service's PATH.
func (m *Main) followServices(t *doctorTargets) []checkResult {
	mgr, merr := service.NewManager()
	if mgr == nil {
		return []checkResult{{Name: "services", Status: checkWarn, Detail: merr.Error()}}
	}
	var results []checkResult
	for _, d := range []service.Daemon{service.Serve, service.Coordinator} {
		st, err := mgr.Status(d, t.system)
		results = append(results, checkService(d, st, err))
		if st.State == service.NotInstalled {
			continue
		}
		follow := func(flag string, target *string) {
			if v := argValue(st.Installed.Args, flag); v != "" && !t.given[flag] {
				*target = v
			}
		}
		switch d {
		case service.Serve:
			follow("db", &t.db)
		case service.Coordinator:
			follow("config", &t.config)
			follow("state", &t.state)
			if st.Installed.Path != "" {
				t.pathEnv, t.pathSource = st.Installed.Path, "the PATH in "+st.Definition
			}
		}
	}
	return results
}

// checkStores checks the bridge database and the coordinator state, each
// a SQLite file or a PostgreSQL database, and the free disk under a
// SQLite bridge database.
func checkStores(ctx context.Context, db, state string) ([]checkResult, error) {
	dbPG, err := isPostgres("db", db)
	if err != nil {
		return nil, err
	}
	statePG, err := isPostgres("state", state)
	if err != nil {
		return nil, err
	}
	var res []checkResult
	if dbPG {
		res = append(res, checkPostgres(ctx, "bridge database", db, postgres.SchemaVersions))
	} else {
		res = append(res, checkDatabase(ctx, "bridge database", db, "agent-bridge restore --from BACKUP --db "+db))
	}
	if statePG {
		res = append(res, checkPostgres(ctx, "coordinator state", state, ledgerVersions))
	} else {
		res = append(res, checkDatabase(ctx, "coordinator state", state, "stop the coordinator and move "+state+" aside; it starts afresh (startup_mode decides what it replays)"))
	}
	if !dbPG {
		res = append(res, checkDisk(db))
	}
	return res, nil
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

// checkBridge checks that the server answers /ping, that it counts the
// same participants as humans as the coordinator's config does (humans is
// nil without a config), and that it accepts the token on an authenticated
// request. A bridge that does not answer fails when the user named it
// (named), and is a warning at the default address, where it may not be
// started yet.
func checkBridge(ctx context.Context, url, token string, humans agentbridge.Humans, named bool) []checkResult {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := client.New(url, client.WithToken(token))
	info, err := c.Ping(ctx)
	if err != nil {
		r := checkResult{Name: "bridge reachable", Status: checkFail,
			Detail: fmt.Sprintf("%s does not answer: %v", url, err),
			Fix:    "start it (agent-bridge up, agent-bridge serve, or agent-bridge service start serve), or point --url / BRIDGE_URL at it"}
		if !named {
			r.Status, r.Detail = checkWarn, fmt.Sprintf("nothing answers at the default %s: not started yet?", url)
		}
		return []checkResult{r}
	}
	res := []checkResult{{Name: "bridge reachable", Status: checkOK, Detail: fmt.Sprintf("%s answers (version %s)", url, info.Version)}}
	if humans != nil {
		res = append(res, checkHumans(humans, info.Humans))
	}
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

// checkHumans compares the coordinator's human_ids with the server's
// --humans. They must be the same set: a participant only one side counts
// as human has its pause and mute controls obeyed by one daemon and not
// the other, and its messages refused by the bridge while the coordinator
// treats them as a person's.
func checkHumans(config, server agentbridge.Humans) checkResult {
	const name = "humans"
	if server == nil {
		return checkResult{Name: name, Status: checkWarn,
			Detail: "the server does not say which participants it counts as humans (it predates /ping's humans)",
			Fix:    "upgrade the server, then run doctor again"}
	}
	want, got := slices.Compact(slices.Sorted(slices.Values(config))), slices.Compact(slices.Sorted(slices.Values(server)))
	if config.Same(server) {
		return checkResult{Name: name, Status: checkOK, Detail: "the coordinator's human_ids match the server's --humans (" + strings.Join(got, ", ") + ")"}
	}
	return checkResult{Name: name, Status: checkFail,
		Detail: fmt.Sprintf("the coordinator's human_ids are [%s] but the server's --humans are [%s]", strings.Join(want, ", "), strings.Join(got, ", ")),
		Fix:    fmt.Sprintf("make them the same: start serve with --humans %s, or set \"human_ids\" in the coordinator config to the server's list", strings.Join(want, ","))}
}

// checkConfig loads the coordinator config. A missing file is fine
// unless it was named (explicit): up then runs the built-in defaults,
// which are checked instead. It returns nil when there is no config to
// check further.
func checkConfig(path string, explicit bool) (*config.Config, []checkResult) {
	const name = "coordinator config"
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if explicit {
			return nil, []checkResult{{Name: name, Status: checkFail, Detail: fmt.Sprintf("%s does not exist", path),
				Fix: "create it (see docs/operations.md), or point --config at the right file"}}
		}
		cfg := config.Default()
		return &cfg, []checkResult{{Name: name, Status: checkOK, Detail: fmt.Sprintf("none at %s: agent-bridge up runs the built-in defaults (agent echo); the coordinator daemon needs one (--config)", path)}}
	}
	cfg, warnings, err := config.Load(path)
	if err != nil {
		return nil, []checkResult{{Name: name, Status: checkFail, Detail: err.Error(),
			Fix: "correct the key named above in " + path + "; the coordinator refuses to start (or keeps its previous config) until then"}}
	}
	res := []checkResult{{Name: name, Status: checkOK, Detail: fmt.Sprintf("%s is valid, %d agent(s)", path, len(cfg.Agents))}}
	for _, w := range warnings {
		res = append(res, checkResult{Name: name, Status: checkWarn, Detail: w})
	}
	return &cfg, res
}

// checkWorkspaces checks that git is on the PATH the coordinator will see
// when the config has workspaces (contract 8.1): every run in one needs
// it. The repos themselves were checked with the config (config.Load).
func checkWorkspaces(cfg config.Config, pathEnv, pathSource string) []checkResult {
	if len(cfg.Workspaces) == 0 {
		return nil
	}
	p, err := lookPathIn("git", pathEnv)
	if err != nil {
		return []checkResult{{Name: "git", Status: checkFail,
			Detail: fmt.Sprintf("git is not on %s, and the config has %d workspace(s): every run in one fails", pathSource, len(cfg.Workspaces)),
			Fix:    "install git (or remove \"workspaces\" from the config); for a service, reinstall it from a shell where git is on PATH (or --path)"}}
	}
	return []checkResult{{Name: "git", Status: checkOK, Detail: fmt.Sprintf("%s, for %d workspace(s)", p, len(cfg.Workspaces))}}
}

// shippedAdapterCLIs maps the shipped adapter scripts to the CLI each runs.
var shippedAdapterCLIs = map[string]string{"claude_code.sh": "claude", "codex.sh": "codex"}

// checkAdapters checks what each configured agent needs: its command
// present and executable, and the CLI a shipped adapter wraps on the PATH
// the coordinator will see. An agent that cannot run is a warning (it
// answers with an error notice when invoked; the others work); no agent
// able to run at all is a failure, as nobody would answer.
func checkAdapters(cfg config.Config, pathEnv, pathSource string) []checkResult {
	var res []checkResult
	runnable := 0
	for _, id := range slices.Sorted(maps.Keys(cfg.Agents)) {
		key := "command"
		if len(cfg.Agents[id].ACP) > 0 {
			key = "acp"
		}
		r, ok := checkAgent(id, key, cfg.Agents[id].Argv(), pathEnv, pathSource)
		res = append(res, r...)
		if ok {
			runnable++
		}
	}
	if len(cfg.Agents) > 0 && runnable == 0 {
		res = append(res, checkResult{Name: "agents", Status: checkFail, Detail: "no configured agent can run, so no message will get a reply",
			Fix: "install what the agents above need, or add the built-in echo agent: \"echo\": {\"command\": [\"agent-bridge\", \"adapter\", \"echo\"]}"})
	}
	return res
}

// checkAgent checks one agent's command (key names it in the config:
// "command" for an adapter, "acp" for an ACP agent) and the CLI it wraps,
// and reports whether the agent can run.
func checkAgent(id, key string, cmd []string, pathEnv, pathSource string) ([]checkResult, bool) {
	name := "adapter " + id
	if len(cmd) == 0 {
		return []checkResult{{Name: name, Status: checkWarn, Detail: "no command configured", Fix: "set agents." + id + ".command"}}, false
	}
	if cmd[0] == config.SelfCommand {
		return []checkResult{{Name: name, Status: checkOK, Detail: "built into agent-bridge (" + strings.Join(cmd, " ") + ")"}}, true
	}
	var found string
	var err error
	if strings.Contains(cmd[0], "/") {
		found, err = cmd[0], isExecutable(cmd[0])
	} else {
		found, err = lookPathIn(cmd[0], pathEnv)
	}
	if err != nil {
		return []checkResult{{Name: name, Status: checkWarn,
			Detail: fmt.Sprintf("%s cannot answer: command %s: %v (looked in %s)", id, cmd[0], err, pathSource),
			Fix:    "install it, fix agents." + id + "." + key + "[0], or chmod +x it"}}, false
	}
	res := []checkResult{{Name: name, Status: checkOK, Detail: found}}
	ok := true
	for _, arg := range cmd {
		cli, wraps := shippedAdapterCLIs[filepath.Base(arg)]
		if !wraps {
			continue
		}
		cname := fmt.Sprintf("%s CLI for %s", cli, id)
		if p, err := lookPathIn(cli, pathEnv); err != nil {
			ok = false
			res = append(res, checkResult{Name: cname, Status: checkWarn,
				Detail: fmt.Sprintf("%s is not on %s, so %s answers with an error notice when invoked", cli, pathSource, id),
				Fix:    fmt.Sprintf("install %s if you want %s (or remove the agent from the config); for a service, reinstall it from a shell where %s is on PATH (or --path)", cli, id, cli)})
		} else {
			res = append(res, checkResult{Name: cname, Status: checkOK, Detail: p})
		}
	}
	return res, ok
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
