package service

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/kardianos/service"
)

// The init systems agent-bridge installs into, as kardianos names them.
const (
	SystemSystemd = "linux-systemd"
	SystemLaunchd = "darwin-launchd"
)

// ErrUnsupported is returned when the machine's init system is neither
// systemd nor launchd: kardianos would fall back to SysV scripts under
// /etc/init.d, which have no per-user services and no log redirection.
var ErrUnsupported = errors.New("unsupported init system")

// Manager installs and controls service definitions with one init system.
// It holds no state beyond its fields. Its methods take no context: they
// run short systemctl or launchctl commands through kardianos, which offers
// no way to cancel them.
type Manager struct {
	// System is the kardianos init system used.
	System service.System
	// Home is the user's home folder, where user definitions live; it must
	// be the folder kardianos itself uses ($HOME).
	Home string
}

// NewManager returns a Manager for the init system kardianos detects on this
// machine. When that is not systemd or launchd it returns ErrUnsupported
// (wrapped, naming the system) together with a Manager whose System is nil:
// it can still locate and read definitions, so status and doctor work.
func NewManager() (*Manager, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("find the home folder: %w", err)
	}
	sys := service.ChosenSystem()
	if sys == nil {
		return &Manager{Home: home}, fmt.Errorf("%w: kardianos found no service manager", ErrUnsupported)
	}
	if name := sys.String(); name != SystemSystemd && name != SystemLaunchd {
		return &Manager{Home: home}, fmt.Errorf("%w %q: agent-bridge installs services with systemd (Linux) or launchd (macOS); see docs/operations.md to run the daemons another way", ErrUnsupported, name)
	}
	return &Manager{System: sys, Home: home}, nil
}

func (m *Manager) goos() string {
	switch {
	case m.System == nil:
		return runtime.GOOS
	case m.System.String() == SystemLaunchd:
		return "darwin"
	}
	return "linux"
}

// Options fills in what the init system decides (the definition format) so
// the caller's Options render for this manager.
func (m *Manager) Options(o Options) Options {
	o.GOOS = m.goos()
	return o
}

// DefinitionPath is where the init system keeps d's definition: a file under
// ~/.config/systemd/user or /etc/systemd/system, ~/Library/LaunchAgents or
// /Library/LaunchDaemons.
func (m *Manager) DefinitionPath(d Daemon, system bool) string {
	name := Name(d, m.goos())
	switch {
	case m.goos() == "darwin" && system:
		return filepath.Join("/Library/LaunchDaemons", name+".plist")
	case m.goos() == "darwin":
		return filepath.Join(m.Home, "Library", "LaunchAgents", name+".plist")
	case system:
		return filepath.Join("/etc/systemd/system", name+".service")
	}
	return filepath.Join(m.Home, ".config", "systemd", "user", name+".service")
}

func (m *Manager) service(d Daemon, o Options) (service.Service, error) {
	if m.System == nil {
		return nil, fmt.Errorf("%w: no service manager", ErrUnsupported)
	}
	o = m.Options(o)
	s, err := m.System.New(noProgram{}, Config(d, o))
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", Name(d, o.GOOS), err)
	}
	return s, nil
}

// Install writes d's definition and registers it with the init system. It is
// idempotent: a previous definition is stopped and removed first (best
// effort), because kardianos refuses to overwrite one. It creates the data
// and log folders. It does not start the service.
func (m *Manager) Install(d Daemon, o Options) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("install %s: %w", d, err)
	}
	s, err := m.service(d, o)
	if err != nil {
		return err
	}
	// The data folder holds the databases and the person token: its
	// owner's alone (contract 8.3), like the folders serve creates.
	if err := sqlitex.MakeFolder(o.DataDir); err != nil {
		return hint(o.System, fmt.Errorf("install %s: %w", d, err))
	}
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return hint(o.System, fmt.Errorf("install %s: %w", d, err))
	}
	m.removeBestEffort(s, d, o.System)
	if err := s.Install(); err != nil {
		return hint(o.System, fmt.Errorf("install %s with %s (definition %s): %w", d, m.System, m.DefinitionPath(d, o.System), err))
	}
	return nil
}

// removeBestEffort stops and unregisters a previous definition, ignoring
// errors (it may not exist, or the init system may not know it), then makes
// sure its file is gone.
func (m *Manager) removeBestEffort(s service.Service, d Daemon, system bool) {
	_ = s.Stop()
	_ = s.Uninstall()
	_ = os.Remove(m.DefinitionPath(d, system))
}

// Uninstall stops d and removes its definition. It reports whether there was
// one to remove; removing nothing is not an error.
func (m *Manager) Uninstall(d Daemon, o Options) (bool, error) {
	path := m.DefinitionPath(d, o.System)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	s, err := m.service(d, o)
	if err != nil {
		return true, err
	}
	_ = s.Stop()
	uerr := s.Uninstall()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, hint(o.System, fmt.Errorf("uninstall %s: %w", d, err))
	}
	if uerr != nil {
		return true, hint(o.System, fmt.Errorf("uninstall %s: the definition is removed, but the service manager said: %w", d, uerr))
	}
	return true, nil
}

// Start asks the init system to start the installed d.
func (m *Manager) Start(d Daemon, o Options) error {
	s, err := m.service(d, o)
	if err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		return hint(o.System, fmt.Errorf("start %s: %w", d, err))
	}
	return nil
}

// Stop asks the init system to stop d; the daemon shuts down gracefully on
// the SIGTERM it receives.
func (m *Manager) Stop(d Daemon, o Options) error {
	s, err := m.service(d, o)
	if err != nil {
		return err
	}
	if err := s.Stop(); err != nil {
		return hint(o.System, fmt.Errorf("stop %s: %w", d, err))
	}
	return nil
}

// State is an installed service's condition.
type State string

// The states Status reports.
const (
	NotInstalled State = "not installed"
	Running      State = "running"
	Stopped      State = "stopped"
	Unknown      State = "unknown"
)

// Status is what "service status" prints: the state, the definition file,
// and what the installed definition says (where the logs are, the PATH).
type Status struct {
	State      State
	Definition string
	Installed  Definition
	// Detail explains an Unknown state (the service manager's error).
	Detail string
}

// Status reports whether d is installed and running. A definition file the
// init system cannot be asked about (no systemd user manager, say) is
// reported as installed with state Unknown and the reason in Detail.
func (m *Manager) Status(d Daemon, system bool) (Status, error) {
	st := Status{Definition: m.DefinitionPath(d, system), State: NotInstalled}
	def, err := ReadDefinition(st.Definition)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	st.Installed = def
	s, err := m.service(d, Options{System: system})
	if err != nil {
		st.State, st.Detail = Unknown, err.Error()
		return st, nil
	}
	switch ks, err := s.Status(); {
	case errors.Is(err, service.ErrNotInstalled):
		st.State, st.Detail = Unknown, "the definition file exists but the service manager does not list it (is its user manager running? try: systemctl --user daemon-reload)"
	case err != nil:
		st.State, st.Detail = Unknown, err.Error()
	case ks == service.StatusRunning:
		st.State = Running
	case ks == service.StatusStopped:
		st.State = Stopped
	default:
		st.State = Unknown
	}
	return st, nil
}

// Definition is what an installed service definition says, read back from
// its file: doctor checks adapters against its PATH, status prints its log.
type Definition struct {
	Args    []string // the full command line, binary first
	Path    string   // the PATH it runs with
	LogFile string
}

// ReadDefinition parses a definition written by Install (a .plist or a
// systemd unit). A missing file is an error satisfying os.ErrNotExist.
func ReadDefinition(path string) (Definition, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Definition{}, fmt.Errorf("read service definition: %w", err)
	}
	if strings.HasSuffix(path, ".plist") {
		return parsePlist(b)
	}
	return parseUnit(b), nil
}

func parseUnit(b []byte) Definition {
	var d Definition
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch key {
		case "ExecStart":
			d.Args = splitExecLine(val)
		case "Environment":
			for _, kv := range splitExecLine(val) {
				if p, ok := strings.CutPrefix(kv, "PATH="); ok {
					d.Path = p
				}
			}
		case "StandardError":
			if f, ok := strings.CutPrefix(val, "append:"); ok {
				d.LogFile = strings.ReplaceAll(f, "%%", "%")
			}
		}
	}
	return d
}

// splitExecLine undoes execLine: words split on blanks, double quotes
// grouping, backslash escapes inside quotes, "%%" and "$$" unescaped.
func splitExecLine(s string) []string {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case !quoted && (c == ' ' || c == '\t'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	r := strings.NewReplacer("%%", "%", "$$", "$")
	for i := range words {
		words[i] = r.Replace(words[i])
	}
	return words
}

// parsePlist reads the keys Install writes from a launchd plist: a flat
// dict whose values are strings, arrays of strings, dicts and booleans.
func parsePlist(b []byte) (Definition, error) {
	var d Definition
	dec := xml.NewDecoder(bytes.NewReader(b))
	var key string
	var stack []string // keys of the enclosing dicts and arrays
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return d, nil
		}
		if err != nil {
			return d, fmt.Errorf("parse plist: %w", err)
		}
		start, ok := tok.(xml.StartElement)
		if !ok {
			if end, ok := tok.(xml.EndElement); ok && (end.Name.Local == "dict" || end.Name.Local == "array") && len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		switch start.Name.Local {
		case "dict", "array":
			stack = append(stack, key)
		case "key", "string":
			var text string
			if err := dec.DecodeElement(&text, &start); err != nil {
				return d, fmt.Errorf("parse plist: %w", err)
			}
			if start.Name.Local == "key" {
				key = text
				continue
			}
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			switch {
			case parent == "ProgramArguments":
				d.Args = append(d.Args, text)
			case parent == "EnvironmentVariables" && key == "PATH":
				d.Path = text
			case key == "StandardErrorPath":
				d.LogFile = text
			}
		}
	}
}

// hint adds the "try running with sudo" advice to a system-service error
// made without root rights.
func hint(system bool, err error) error {
	if system && os.Geteuid() != 0 {
		return fmt.Errorf("%w (a system service needs root: try running with sudo)", err)
	}
	return err
}

// noProgram is the kardianos Interface of a service that is only being
// installed or controlled, never run, from this process.
type noProgram struct{}

func (noProgram) Start(service.Service) error { return nil }
func (noProgram) Stop(service.Service) error  { return nil }
