package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-bridge/agent-bridge/internal/service"
)

func TestServiceUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"service"},
		{"service", "install"},
		{"service", "reinstall", "serve"},
		{"service", "install", "web"},
		{"service", "start", "serve", "--", "--addr", "x"},
		{"service", "install", "serve", "--user", "bob"},
		{"service", "status", "serve", "extra"},
	} {
		m, _, _ := opsMain(nil)
		err := m.Run(context.Background(), args)
		if code := exitCode(io.Discard, err); code != 2 {
			t.Errorf("%q: exit %d (%v), want 2", args, code, err)
		}
	}
}

func TestServiceStatusNotInstalled(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	m, stdout, _ := opsMain(nil)
	if err := m.Run(context.Background(), []string{"service", "status", "coordinator"}); err != nil {
		t.Fatalf("status: %v", err)
	}
	if out := stdout.String(); !strings.Contains(out, "coordinator: not installed") || !strings.Contains(out, "service install coordinator") {
		t.Errorf("status output:\n%s", out)
	}
}

// TestServiceInstallUnsupported runs install where kardianos finds neither
// systemd nor launchd (containers): it must fail with the reason and write
// nothing. Where a real init system runs, the test does not install
// anything (see service.TestInstallRoundTrip).
func TestServiceInstallUnsupported(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if _, err := service.NewManager(); !errors.Is(err, service.ErrUnsupported) {
		t.Skip("this machine has a supported init system; not installing a real service from a test")
	}
	m, _, _ := opsMain(nil)
	err := m.Run(context.Background(), []string{"service", "install", "serve"})
	if !errors.Is(err, service.ErrUnsupported) || !strings.Contains(err.Error(), "docs/operations.md") {
		t.Errorf("install = %v, want ErrUnsupported pointing at the docs", err)
	}
	entries, _ := os.ReadDir(home)
	if len(entries) > 0 {
		t.Errorf("a refused install wrote %v under HOME", entries)
	}
}

func TestServiceInstallOptions(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	cwd, _ := os.Getwd()
	mgr := &service.Manager{Home: home}
	m, _, stderr := opsMain(map[string]string{"BRIDGE_TOKEN": "s3cret", "XDG_DATA_HOME": filepath.Join(home, "xdg")})

	o, err := m.installOptions(mgr, serviceRequest{daemon: service.Serve, pathEnv: "/usr/bin:/bin", daemonArgs: []string{"--addr", "127.0.0.1:6000", "--token-file=tok"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--addr", "127.0.0.1:6000", "--token-file=" + filepath.Join(cwd, "tok"), "--db", filepath.Join(o.DataDir, "bridge.db")}
	if strings.Join(o.Args, " ") != strings.Join(want, " ") {
		t.Errorf("serve args %q, want %q", o.Args, want)
	}
	if !filepath.IsAbs(o.Binary) || o.Path != "/usr/bin:/bin" || !filepath.IsAbs(o.LogDir) {
		t.Errorf("options %+v", o)
	}
	if mgr.Options(o).GOOS == "linux" && o.DataDir != filepath.Join(home, "xdg", "agent-bridge") {
		t.Errorf("data folder %q ignores XDG_DATA_HOME", o.DataDir)
	}
	if strings.Contains(stderr.String(), "BRIDGE_TOKEN") {
		t.Errorf("warned about BRIDGE_TOKEN although --token-file was given: %s", stderr)
	}

	if _, err := m.installOptions(mgr, serviceRequest{daemon: service.Serve, pathEnv: "/usr/bin"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "BRIDGE_TOKEN is set") {
		t.Errorf("no warning that the service will not see BRIDGE_TOKEN: %q", stderr)
	}

	_, err = m.installOptions(mgr, serviceRequest{daemon: service.Coordinator, dataDir: "data", pathEnv: "/usr/bin", daemonArgs: []string{"--config", "missing.json"}})
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), filepath.Join(cwd, "missing.json")) {
		t.Errorf("coordinator with a missing config: %v, want a usage error naming the absolute path", err)
	}
	if err := os.WriteFile("coordinator.config.json", []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err = m.installOptions(mgr, serviceRequest{daemon: service.Coordinator, dataDir: "data", logDir: "logs", pathEnv: "/usr/bin", daemonArgs: []string{"--config", "coordinator.config.json"}})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"--config", filepath.Join(cwd, "coordinator.config.json"), "--state", filepath.Join(cwd, "data", "coordinator.db")}
	if strings.Join(o.Args, " ") != strings.Join(want, " ") || o.LogDir != filepath.Join(cwd, "logs") {
		t.Errorf("coordinator args %q log %q, want %q", o.Args, o.LogDir, want)
	}
	if _, err := m.installOptions(mgr, serviceRequest{daemon: service.Serve}); !errors.As(err, &ue) {
		t.Errorf("empty PATH: %v, want a usage error", err)
	}
}
