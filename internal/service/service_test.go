package service

import (
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
	"github.com/kardianos/service"
)

var update = flag.Bool("update", false, "rewrite the example files from Render")

func TestConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		d        Daemon
		o        Options
		wantName string
		wantUser bool
		wantRun  string
	}{
		{"linux user serve", Serve, Options{GOOS: "linux"}, "agent-bridge-serve", true, ""},
		{"linux system coordinator", Coordinator, Options{GOOS: "linux", System: true, UserName: "bridge"}, "agent-bridge-coordinator", false, "bridge"},
		{"darwin user serve", Serve, Options{GOOS: "darwin", UserName: "ignored"}, "com.agent-bridge.serve", true, ""},
		{"darwin system coordinator", Coordinator, Options{GOOS: "darwin", System: true}, "com.agent-bridge.coordinator", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.Binary = "/opt/ab/agent-bridge"
			o.Args = []string{"--db", "/data/bridge.db"}
			o.Path = "/opt/bin:/usr/bin"
			o.DataDir = "/data"
			o.LogDir = "/logs"
			c := Config(tt.d, o)
			if c.Name != tt.wantName {
				t.Errorf("Name = %q, want %q", c.Name, tt.wantName)
			}
			if c.Executable != o.Binary {
				t.Errorf("Executable = %q", c.Executable)
			}
			if want := []string{string(tt.d), "--db", "/data/bridge.db"}; !reflect.DeepEqual(c.Arguments, want) {
				t.Errorf("Arguments = %q, want %q", c.Arguments, want)
			}
			if c.EnvVars["PATH"] != o.Path {
				t.Errorf("EnvVars = %v, want PATH %q", c.EnvVars, o.Path)
			}
			if c.WorkingDirectory != "/data" || c.UserName != tt.wantRun {
				t.Errorf("WorkingDirectory, UserName = %q, %q", c.WorkingDirectory, c.UserName)
			}
			if c.Option["UserService"] != tt.wantUser || c.Option["LogDirectory"] != "/logs" {
				t.Errorf("Option = %v", c.Option)
			}
			text := c.Option["SystemdScript"].(string)
			if strings.Contains(text, "{{") {
				t.Errorf("the definition holds a template action, kardianos would not write it verbatim:\n%s", text)
			}
			if !strings.Contains(text, "/logs/"+string(tt.d)+".log") {
				t.Errorf("the definition does not name the log file:\n%s", text)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		goos      string
		system    bool
		xdg       map[string]string
		data, log string
	}{
		{"linux", false, nil, "/home/a/.local/share/agent-bridge", "/home/a/.local/state/agent-bridge/log"},
		{"linux", false, map[string]string{"XDG_DATA_HOME": "/x/data", "XDG_STATE_HOME": "/x/state"}, "/x/data/agent-bridge", "/x/state/agent-bridge/log"},
		{"linux", false, map[string]string{"XDG_DATA_HOME": "relative"}, "/home/a/.local/share/agent-bridge", "/home/a/.local/state/agent-bridge/log"},
		{"linux", true, nil, "/var/lib/agent-bridge", "/var/log/agent-bridge"},
		{"darwin", false, nil, "/home/a/Library/Application Support/agent-bridge", "/home/a/Library/Logs/agent-bridge"},
		{"darwin", true, nil, "/Library/Application Support/agent-bridge", "/Library/Logs/agent-bridge"},
	}
	for _, tt := range tests {
		env = tt.xdg
		data, log := Defaults(tt.goos, "/home/a", tt.system, getenv)
		if data != tt.data || log != tt.log {
			t.Errorf("Defaults(%s, system=%v, %v) = %q, %q; want %q, %q", tt.goos, tt.system, tt.xdg, data, log, tt.data, tt.log)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	good := Options{Binary: "/b", Path: "/usr/bin", DataDir: "/d", LogDir: "/l"}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(good) = %v", err)
	}
	bad := map[string]func(*Options){
		"relative binary":   func(o *Options) { o.Binary = "agent-bridge" },
		"relative data":     func(o *Options) { o.DataDir = "data" },
		"empty PATH":        func(o *Options) { o.Path = "" },
		"newline in arg":    func(o *Options) { o.Args = []string{"a\nb"} },
		"template in arg":   func(o *Options) { o.Args = []string{"{{Path}}"} },
		"relative log":      func(o *Options) { o.LogDir = "" },
		"NUL in user":       func(o *Options) { o.UserName = "a\x00" },
		"newline in binary": func(o *Options) { o.Binary = "/a\n" },
	}
	for name, f := range bad {
		o := good
		f(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, o)
		}
	}
}

// exampleOptions are the fixed installs the example files show, and the
// placeholders that stand for their machine-specific parts.
func exampleOptions(d Daemon, goos string) (Options, *strings.Replacer) {
	home := "/home/alice"
	if goos == "darwin" {
		home = "/Users/alice"
	}
	data, logs := Defaults(goos, home, false, func(string) string { return "" })
	o := Options{
		GOOS:    goos,
		Binary:  "/usr/local/bin/agent-bridge",
		Args:    DefaultArgs(d, data),
		Path:    "/usr/local/bin:/usr/bin:/bin",
		DataDir: data,
		LogDir:  logs,
	}
	fill := strings.NewReplacer("__BINARY__", o.Binary, "__PATH__", o.Path, "__HOME__", home)
	return o, fill
}

func exampleFile(d Daemon, goos string) string {
	// The examples stay in the top-level launchd/ folder, where people
	// look for service files.
	dir := filepath.Join("..", "..", "launchd")
	if goos == "darwin" {
		return filepath.Join(dir, Name(d, goos)+".plist.example")
	}
	return filepath.Join(dir, Name(d, goos)+".service.example")
}

// TestExamples checks that the example files are what "service install"
// writes, once their placeholders are filled in. Run with -update to
// regenerate them.
func TestExamples(t *testing.T) {
	t.Parallel()
	for _, goos := range []string{"linux", "darwin"} {
		for _, d := range []Daemon{Serve, Coordinator} {
			o, fill := exampleOptions(d, goos)
			got := Render(d, o)
			file := exampleFile(d, goos)
			if *update {
				home := "/home/alice"
				if goos == "darwin" {
					home = "/Users/alice"
				}
				text := strings.NewReplacer(o.Binary, "__BINARY__", o.Path, "__PATH__", home, "__HOME__").Replace(got)
				if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("read example (run go test -update to create it): %v", err)
			}
			if strings.Contains(string(b), "/home/alice") || strings.Contains(string(b), "/Users/alice") {
				t.Errorf("%s bakes in a home folder instead of __HOME__", file)
			}
			if want := fill.Replace(string(b)); got != want {
				t.Errorf("%s differs from Render (run go test -update):\n--- rendered\n%s\n--- example filled in\n%s", file, got, want)
			}
		}
	}
}

func TestPlistParses(t *testing.T) {
	t.Parallel()
	for _, d := range []Daemon{Serve, Coordinator} {
		o, _ := exampleOptions(d, "darwin")
		o.Args = append(o.Args, "--log-level", "debug & <more>")
		text := Render(d, o)
		var v struct {
			XMLName xml.Name
			Dict    struct {
				Keys    []string `xml:"key"`
				Strings []string `xml:"string"`
			} `xml:"dict"`
		}
		if err := xml.Unmarshal([]byte(text), &v); err != nil {
			t.Fatalf("%s: plist does not parse: %v\n%s", d, err, text)
		}
		if v.XMLName.Local != "plist" || v.Dict.Keys[0] != "Label" || v.Dict.Strings[0] != Name(d, "darwin") {
			t.Errorf("%s: unexpected plist shape: %+v", d, v)
		}
		path := filepath.Join(t.TempDir(), Name(d, "darwin")+".plist")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		def, err := ReadDefinition(path)
		if err != nil {
			t.Fatal(err)
		}
		wantArgs := append([]string{o.Binary, string(d)}, o.Args...)
		if !reflect.DeepEqual(def.Args, wantArgs) || def.Path != o.Path || def.LogFile != LogFile(d, o) {
			t.Errorf("read back %+v, want args %q path %q log %q", def, wantArgs, o.Path, LogFile(d, o))
		}
		for _, p := range append(def.Args[:1], def.LogFile, o.DataDir) {
			if !filepath.IsAbs(p) {
				t.Errorf("%s: path %q is not absolute", d, p)
			}
		}
	}
}

func TestUnitReadBack(t *testing.T) {
	t.Parallel()
	o := Options{
		GOOS:    "linux",
		Binary:  "/opt/my tools/agent-bridge",
		Args:    []string{"--db", "/data/100% sure/b.db", "--cors-origin", `say "$HOME"`, ""},
		Path:    "/opt/my bin:/usr/bin",
		DataDir: "/data/100% sure",
		LogDir:  "/logs/50%",
	}
	path := filepath.Join(t.TempDir(), "agent-bridge-serve.service")
	if err := os.WriteFile(path, []byte(Render(Serve, o)), 0o644); err != nil {
		t.Fatal(err)
	}
	def, err := ReadDefinition(path)
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := append([]string{o.Binary, "serve"}, o.Args...)
	if !reflect.DeepEqual(def.Args, wantArgs) || def.Path != o.Path || def.LogFile != "/logs/50%/serve.log" {
		t.Errorf("read back %+v, want args %q path %q", def, wantArgs, o.Path)
	}
}

// TestUnitVerifies runs systemd's own checker on the units install writes.
func TestUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("systemd-analyze is required in CI: %v", err)
		}
		t.Skip("systemd-analyze not installed (apt-get install systemd); skipping unit verification")
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, system := range []bool{false, true} {
		for _, d := range []Daemon{Serve, Coordinator} {
			dir := t.TempDir()
			o := Options{GOOS: "linux", System: system, Binary: bin, Args: DefaultArgs(d, dir),
				Path: "/usr/local/bin:/usr/bin:/bin", DataDir: dir, LogDir: filepath.Join(dir, "log")}
			if system {
				o.UserName = "daemon"
			}
			unit := filepath.Join(dir, Name(d, "linux")+".service")
			if err := os.WriteFile(unit, []byte(Render(d, o)), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			out, err := exec.CommandContext(ctx, analyze, "verify", "--man=no", unit).CombinedOutput()
			cancel()
			// verify reports problems of the host's own units too; only
			// lines naming ours count.
			var ours []string
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, Name(d, "linux")) {
					ours = append(ours, line)
				}
			}
			if len(ours) > 0 {
				t.Errorf("systemd-analyze verify %s (system=%v): %v\n%s\n%s", d, system, err, strings.Join(ours, "\n"), Render(d, o))
			}
		}
	}
}

// TestInstallRoundTrip installs, inspects and uninstalls a user unit with
// kardianos's systemd code. Where no systemd user manager answers
// (containers, CI) it runs under a temporary HOME and checks what needs no
// manager: the file kardianos writes is exactly Render's, a second install
// replaces it, status reports it, and uninstall removes it. Where a user
// manager runs, it would stop and replace a real agent-bridge-serve, so it
// runs only when AGENT_BRIDGE_TEST_USER_SERVICE=1, against the real HOME,
// and then also checks enable and status (it does not start the unit).
func TestInstallRoundTrip(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the round trip runs kardianos's systemd code, which is Linux-only; on macOS it would touch the real ~/Library/LaunchAgents")
	}
	sys, ok := systemByName(SystemSystemd)
	if !ok {
		t.Fatal("kardianos has no linux-systemd system")
	}
	if detected, err := NewManager(); err != nil {
		t.Logf("this machine's init system: %v", err)
	} else {
		t.Logf("this machine's init system: %s", detected.System.String())
	}
	userManager := exec.Command("systemctl", "--user", "show-environment").Run() == nil
	home := t.TempDir()
	if userManager {
		if os.Getenv("AGENT_BRIDGE_TEST_USER_SERVICE") != "1" {
			t.Skip("a systemd user manager runs here; set AGENT_BRIDGE_TEST_USER_SERVICE=1 to run a real round trip (it stops and replaces an installed agent-bridge-serve unit)")
		}
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Setenv("HOME", home)
		t.Log("no systemd user manager here (systemctl --user fails), so enable and is-active are not exercised")
	}
	m := &Manager{System: sys, Home: home}
	dir := t.TempDir()
	data, logs := filepath.Join(dir, "data"), filepath.Join(dir, "log")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Binary: bin, Args: DefaultArgs(Serve, data), Path: "/usr/bin:/bin", DataDir: data, LogDir: logs}
	def := m.DefinitionPath(Serve, false)
	if userManager {
		t.Cleanup(func() { _, _ = m.Uninstall(Serve, o) })
	}

	err = m.Install(Serve, o)
	if userManager && err != nil {
		t.Fatalf("Install: %v", err)
	}
	if !userManager {
		t.Logf("Install said: %v", err)
	}
	b, rerr := os.ReadFile(def)
	if rerr != nil {
		t.Fatalf("Install wrote no definition: %v", rerr)
	}
	if want := Render(Serve, m.Options(o)); string(b) != want {
		t.Errorf("kardianos wrote\n%s\nwant Render's\n%s", b, want)
	}
	for _, dir := range []string{data, logs} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("Install did not create %s: %v", dir, err)
		}
	}
	// Installing again replaces the definition instead of failing.
	o.Args = append(o.Args, "--log-level", "debug")
	if err := m.Install(Serve, o); userManager && err != nil {
		t.Fatalf("second Install: %v", err)
	}
	st, err := m.Status(Serve, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.State == NotInstalled || st.Installed.LogFile != filepath.Join(logs, "serve.log") || st.Installed.Path != "/usr/bin:/bin" {
		t.Errorf("Status after install = %+v", st)
	}
	if got := st.Installed.Args; len(got) == 0 || got[len(got)-1] != "debug" {
		t.Errorf("the second install did not replace the definition: args %q", got)
	}
	if userManager && st.State != Stopped {
		t.Errorf("Status of an installed, unstarted unit = %s (%s), want stopped", st.State, st.Detail)
	}
	removed, err := m.Uninstall(Serve, o)
	if !removed || (userManager && err != nil) {
		t.Errorf("Uninstall = %v, %v", removed, err)
	}
	if st, _ := m.Status(Serve, false); st.State != NotInstalled {
		t.Errorf("Status after uninstall = %+v", st)
	}
	if removed, err := m.Uninstall(Serve, o); removed || err != nil {
		t.Errorf("second Uninstall = %v, %v; want nothing to remove", removed, err)
	}
}

func TestProgramStartStop(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	wantErr := errors.New("closed cleanly")
	p := newProgram(context.Background(), func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return wantErr
	})
	if err := p.Start(nil); err != nil { // returns while the daemon runs
		t.Fatal(err)
	}
	<-started
	select {
	case <-p.done:
		t.Fatal("the daemon ended before Stop")
	default:
	}
	if err := p.Stop(nil); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(p.err, wantErr) {
		t.Errorf("daemon error = %v", p.err)
	}
}

func TestProgramWaitEndsWhenDaemonFails(t *testing.T) {
	t.Parallel()
	p := newProgram(context.Background(), func(context.Context) error { return errors.New("port in use") })
	if err := p.Start(nil); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { p.wait(); close(waited) }()
	testutil.WaitFor(t, 10*time.Second, "wait to return after the daemon failed", func() bool {
		select {
		case <-waited:
			return true
		default:
			return false
		}
	})
	if err := p.Stop(nil); err != nil || p.err == nil {
		t.Errorf("Stop = %v, daemon error = %v", err, p.err)
	}
}

func TestRunInteractiveCallsDirectly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Run(ctx, Serve, func(ctx context.Context) error { return ctx.Err() })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want the daemon's context error", err)
	}
}

// systemByName returns kardianos's implementation of the named init system
// (SystemSystemd, say) even when it is not the detected one, so tests can
// exercise the systemd code path on a machine that doesn't boot with it.
func systemByName(name string) (service.System, bool) {
	for _, s := range service.AvailableSystems() {
		if s.String() == name {
			return s, true
		}
	}
	return nil, false
}
