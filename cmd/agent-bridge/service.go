package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/service"
	"github.com/spf13/cobra"
)

// serviceRequest is one "agent-bridge service ACTION DAEMON" as parsed
// from the command line.
type serviceRequest struct {
	action string
	daemon service.Daemon
	// system, user, dataDir, logDir and pathEnv are the flags of the same
	// names; only install uses the last four.
	system                         bool
	user, dataDir, logDir, pathEnv string
	// daemonArgs are the flags after "--", passed on to the daemon.
	daemonArgs []string
}

// serviceCommand is "agent-bridge service ACTION DAEMON".
func (m *Main) serviceCommand(c *cobra.Command) runFunc {
	parse := m.serviceFlags(c)
	return func(_ context.Context, pos []string) error {
		req, err := parse(pos)
		if err != nil {
			return err
		}
		return m.runService(req)
	}
}

// runService carries out one service request.
func (m *Main) runService(req serviceRequest) error {
	mgr, merr := service.NewManager()
	if mgr == nil {
		return merr
	}
	if req.action == "status" {
		// A definition file can be read where services cannot be run.
		return m.printServiceStatus(mgr, req.daemon, req.system, merr)
	}
	if merr != nil {
		return merr
	}
	o := service.Options{System: req.system}
	name := service.Name(req.daemon, mgr.Options(o).GOOS)
	switch req.action {
	case "install":
		return m.installService(mgr, req, name)
	case "uninstall":
		removed, err := mgr.Uninstall(req.daemon, o)
		if err != nil {
			return err
		}
		if !removed {
			fmt.Fprintf(m.Stdout, "%s was not installed (%s)\n", name, mgr.DefinitionPath(req.daemon, o.System))
			return nil
		}
		fmt.Fprintf(m.Stdout, "stopped and removed %s\n", name)
	case "start":
		if err := mgr.Start(req.daemon, o); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "started %s\n", name)
	case "stop":
		if err := mgr.Stop(req.daemon, o); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "stopped %s\n", name)
	}
	return nil
}

// serviceFlags defines service's flags; the function it returns parses
// and checks the arguments (after "--": the daemon's flags). Every
// mistake is a usage error, before anything is touched.
func (m *Main) serviceFlags(c *cobra.Command) func(pos []string) (serviceRequest, error) {
	var req serviceRequest
	fs := c.Flags()
	fs.BoolVar(&req.system, "system", false, "a system service (root) instead of a per-user one")
	fs.StringVar(&req.user, "user", "", "with --system: the user the daemon runs as (default root)")
	fs.StringVar(&req.dataDir, "data-dir", "", "the daemon's folder for its databases (default: the platform's per-user data folder)")
	fs.StringVar(&req.logDir, "log-dir", "", "where the daemon's log file goes (default: the platform's per-user log folder)")
	fs.StringVar(&req.pathEnv, "path", "", "the PATH the daemon (and its adapters) will see (default: the current PATH)")
	return func(pos []string) (serviceRequest, error) {
		if dash := c.ArgsLenAtDash(); dash >= 0 {
			pos, req.daemonArgs = pos[:dash], pos[dash:]
		}
		if !fs.Changed("path") {
			req.pathEnv = m.Getenv("PATH")
		}
		if len(pos) != 2 {
			return req, usagef("service needs an action and a daemon, e.g. \"service install serve\" (see \"agent-bridge service --help\")")
		}
		req.action = pos[0]
		var err error
		if req.daemon, err = service.ParseDaemon(pos[1]); err != nil {
			return req, usagef("service: %v", err)
		}
		switch {
		case !slices.Contains([]string{"install", "uninstall", "start", "stop", "status"}, req.action):
			return req, usagef("service: %q is not one of install, uninstall, start, stop, status", req.action)
		case len(req.daemonArgs) > 0 && req.action != "install":
			return req, usagef("service %s takes no daemon flags (only install does)", req.action)
		case req.user != "" && !req.system:
			return req, usagef("--user: only a system service (--system) runs as another user")
		}
		return req, nil
	}
}

// installService writes the service definition, says what it runs and
// where it logs, and starts it.
func (m *Main) installService(mgr *service.Manager, req serviceRequest, name string) error {
	o, err := m.installOptions(mgr, req)
	if err != nil {
		return err
	}
	if err := mgr.Install(req.daemon, o); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "installed %s: %s\n  runs: %s %s\n  PATH: %s\n  logs: %s\n",
		name, mgr.DefinitionPath(req.daemon, o.System), o.Binary, strings.Join(service.Config(req.daemon, o).Arguments, " "), o.Path, service.LogFile(req.daemon, o))
	if err := mgr.Start(req.daemon, o); err != nil {
		return fmt.Errorf("installed, but could not start it: %w", err)
	}
	fmt.Fprintf(m.Stdout, "started %s\n", name)
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
func (m *Main) installOptions(mgr *service.Manager, req serviceRequest) (service.Options, error) {
	d, system, user, dataDir, logDir, pathEnv := req.daemon, req.system, req.user, req.dataDir, req.logDir, req.pathEnv
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
	args, set, err := absDaemonArgs(req.daemonArgs)
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
