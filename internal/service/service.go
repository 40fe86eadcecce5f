// Package service installs and runs agent-bridge's two daemons (serve and
// coordinator) as services of the platform's init system: a LaunchAgent or
// LaunchDaemon on macOS, a systemd user or system unit on Linux. It is the only
// package that imports kardianos/service.
//
// The service definition is rendered here, by Render, rather than by
// kardianos's built-in templates: those write a user unit that is wanted by
// multi-user.target (which a user manager never reaches) and restart after two
// minutes. The rendered text is handed to kardianos as its custom template
// option (it contains no template actions, so kardianos writes it verbatim),
// and the example files in the top-level launchd/ folder are rendered by the
// same code.
package service

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/kardianos/service"
)

// Daemon names one of the two long-running subcommands a service runs.
type Daemon string

// The daemons that can be installed as services.
const (
	Serve       Daemon = "serve"
	Coordinator Daemon = "coordinator"
)

// ParseDaemon turns a command-line word into a Daemon, so callers reject a
// typo before touching the init system.
func ParseDaemon(s string) (Daemon, error) {
	switch Daemon(s) {
	case Serve, Coordinator:
		return Daemon(s), nil
	}
	return "", fmt.Errorf("%q is not a daemon: use serve or coordinator", s)
}

// Options describe one installation. Every path must be absolute: a service
// manager starts the daemon from a folder of its own choosing.
type Options struct {
	// System installs a system-wide service (root) instead of a per-user one.
	System bool
	// Binary is the absolute path of the agent-bridge executable.
	Binary string
	// Args are the daemon's flags, after its subcommand name.
	Args []string
	// Path is the PATH the daemon runs with; launchd and systemd give jobs
	// a minimal one, and adapters must find claude or codex.
	Path string
	// DataDir is the daemon's working folder, where its databases live.
	DataDir string
	// LogDir receives the daemon's log file (stdout and stderr).
	LogDir string
	// UserName runs a system service as this user; empty means root.
	UserName string
	// GOOS selects the definition format: "darwin" (plist) or "linux"
	// (systemd unit). Empty means runtime.GOOS.
	GOOS string
}

func (o Options) goos() string {
	if o.GOOS == "" {
		return runtime.GOOS
	}
	return o.GOOS
}

// Name is the service's name in the init system: the launchd label
// com.agent-bridge.serve on macOS, the unit agent-bridge-serve elsewhere.
func Name(d Daemon, goos string) string {
	if goos == "darwin" {
		return "com.agent-bridge." + string(d)
	}
	return "agent-bridge-" + string(d)
}

// DefaultArgs are the daemon flags "service install" writes unless told
// otherwise: the databases, and the coordinator's config, in the data folder
// (paths are absolute because the service's working folder is not the
// installer's).
func DefaultArgs(d Daemon, dataDir string) []string {
	if d == Serve {
		return []string{"--db", filepath.Join(dataDir, "bridge.db")}
	}
	return []string{
		"--config", filepath.Join(dataDir, "coordinator.config.json"),
		"--state", filepath.Join(dataDir, "coordinator.db"),
	}
}

// LogFile is where the installed daemon's stdout and stderr go.
func LogFile(d Daemon, o Options) string {
	return filepath.Join(o.LogDir, string(d)+".log")
}

// Config is the kardianos configuration for installing d with o. It is pure:
// it reads nothing from the machine, so it can be table-tested.
func Config(d Daemon, o Options) *service.Config {
	text := Render(d, o)
	return &service.Config{
		Name:             Name(d, o.goos()),
		DisplayName:      Name(d, o.goos()),
		Description:      description(d),
		Executable:       o.Binary,
		Arguments:        append([]string{string(d)}, o.Args...),
		WorkingDirectory: o.DataDir,
		UserName:         userName(o),
		EnvVars:          map[string]string{"PATH": o.Path},
		Option: service.KeyValue{
			"UserService":   !o.System,
			"LogOutput":     true,
			"LogDirectory":  o.LogDir,
			"RunAtLoad":     true,
			"KeepAlive":     true,
			"SystemdScript": text,
			"LaunchdConfig": text,
		},
	}
}

func userName(o Options) string {
	if o.System {
		return o.UserName
	}
	return ""
}

func description(d Daemon) string {
	if d == Serve {
		return "agent-bridge bridge server"
	}
	return "agent-bridge coordinator daemon"
}

// Validate reports what would make an installed definition wrong: relative
// paths (the service manager's working folder is not ours), an empty PATH,
// and characters the definition formats cannot carry.
func (o Options) Validate() error {
	for _, p := range []struct{ name, v string }{
		{"binary", o.Binary}, {"data folder", o.DataDir}, {"log folder", o.LogDir},
	} {
		if !filepath.IsAbs(p.v) {
			return fmt.Errorf("the %s %q must be an absolute path", p.name, p.v)
		}
	}
	if o.Path == "" {
		return errors.New("the service PATH is empty")
	}
	values := append([]string{o.Binary, o.DataDir, o.LogDir, o.Path, o.UserName}, o.Args...)
	for _, v := range values {
		if strings.ContainsAny(v, "\n\r\x00") {
			return fmt.Errorf("%q contains a line break or NUL, which a service definition cannot hold", v)
		}
		// kardianos treats the definition as a template: "{{" would be
		// parsed as an action.
		if strings.Contains(v, "{{") {
			return fmt.Errorf("%q contains \"{{\", which a service definition cannot hold", v)
		}
	}
	return nil
}

// Defaults returns the per-platform data and log folders: the XDG base
// directories on Linux, ~/Library on macOS, and /var or /Library for a
// system service. getenv reads XDG_DATA_HOME and XDG_STATE_HOME.
func Defaults(goos, home string, system bool, getenv func(string) string) (dataDir, logDir string) {
	switch {
	case goos == "darwin" && system:
		return "/Library/Application Support/agent-bridge", "/Library/Logs/agent-bridge"
	case goos == "darwin":
		return filepath.Join(home, "Library", "Application Support", "agent-bridge"),
			filepath.Join(home, "Library", "Logs", "agent-bridge")
	case system:
		return "/var/lib/agent-bridge", "/var/log/agent-bridge"
	}
	data := getenv("XDG_DATA_HOME")
	if !filepath.IsAbs(data) { // the spec says relative values are ignored
		data = filepath.Join(home, ".local", "share")
	}
	state := getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(data, "agent-bridge"), filepath.Join(state, "agent-bridge", "log")
}

// Run runs fn as daemon d. Started by a service manager, it runs under
// kardianos's Run: Start launches fn and returns at once, Stop cancels fn's
// context and waits for its graceful shutdown. Started from a terminal, it
// calls fn directly. Either way fn's error is returned, and fn also stops
// when ctx is cancelled.
func Run(ctx context.Context, d Daemon, fn func(context.Context) error) error {
	if service.Interactive() {
		return fn(ctx)
	}
	p := newProgram(ctx, fn)
	s, err := service.New(p, &service.Config{
		Name:   Name(d, runtime.GOOS),
		Option: service.KeyValue{"RunWait": p.wait},
	})
	if err != nil {
		return fmt.Errorf("run under the service manager: %w", err)
	}
	if err := s.Run(); err != nil {
		return fmt.Errorf("run under the service manager: %w", err)
	}
	return p.err
}

// program adapts a func(ctx) error daemon to kardianos's Start/Stop
// interface.
type program struct {
	parent context.Context
	fn     func(context.Context) error
	cancel context.CancelFunc
	done   chan struct{}
	err    error // fn's result; read only after done is closed
}

func newProgram(ctx context.Context, fn func(context.Context) error) *program {
	return &program{parent: ctx, fn: fn, done: make(chan struct{})}
}

// Start launches the daemon and returns at once: the service manager waits
// for Start before it considers the service started.
func (p *program) Start(service.Service) error {
	ctx, cancel := context.WithCancel(p.parent)
	p.cancel = cancel
	go func() {
		defer close(p.done)
		p.err = p.fn(ctx)
	}()
	return nil
}

// Stop cancels the daemon's context and waits for its graceful shutdown.
func (p *program) Stop(service.Service) error {
	p.cancel()
	<-p.done
	return nil
}

// wait blocks until the parent context ends (SIGTERM, SIGINT) or the daemon
// returns on its own (a port in use, say), so that a failed daemon exits
// instead of lingering until a signal.
func (p *program) wait() {
	select {
	case <-p.parent.Done():
	case <-p.done:
	}
}
