package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/internal/service"
	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

// opsMain is a Main with captured output and the given environment (PATH
// comes from the test process unless env sets it).
func opsMain(env map[string]string) (*Main, *testutil.Buffer, *testutil.Buffer) {
	stdout, stderr := &testutil.Buffer{}, &testutil.Buffer{}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == "PATH" {
			return os.Getenv("PATH")
		}
		return ""
	}
	return &Main{Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr, Getenv: getenv}, stdout, stderr
}

// opsStore creates a bridge database with one thread of n messages and
// returns its path, with the store still open.
func opsStore(t *testing.T, dir string, n int) (string, *sqlite.Store) {
	t.Helper()
	path := filepath.Join(dir, "bridge.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	th, _, err := s.CreateThread(context.Background(), agentbridge.CreateThreadRequest{Name: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	for range n - 1 {
		_, err := s.Append(context.Background(), agentbridge.AppendRequest{Thread: th.ID, Input: agentbridge.EventInput{
			Type: "message", From: "user", To: "all", Content: json.RawMessage(`"hello"`)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return path, s
}

// opsBridge starts a real bridge server on 127.0.0.1:0 with a token.
func opsBridge(t *testing.T, token string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b, err := startBridge(ctx, bridgeConfig{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "bridge.db"),
		Humans: agentbridge.Humans{"user"}, Token: token, MaxBody: 1 << 20, Version: "test"},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = b.Close(context.Background())
	})
	return b.URL()
}

func TestServiceUsageErrors(t *testing.T) {
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

	o, err := m.installOptions(mgr, service.Serve, false, "", "", "", "/usr/bin:/bin", []string{"--addr", "127.0.0.1:6000", "--token-file=tok"})
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

	if _, err := m.installOptions(mgr, service.Serve, false, "", "", "", "/usr/bin", nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "BRIDGE_TOKEN is set") {
		t.Errorf("no warning that the service will not see BRIDGE_TOKEN: %q", stderr)
	}

	_, err = m.installOptions(mgr, service.Coordinator, false, "", "data", "", "/usr/bin", []string{"--config", "missing.json"})
	var ue *usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), filepath.Join(cwd, "missing.json")) {
		t.Errorf("coordinator with a missing config: %v, want a usage error naming the absolute path", err)
	}
	if err := os.WriteFile("coordinator.config.json", []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err = m.installOptions(mgr, service.Coordinator, false, "", "data", "logs", "/usr/bin", []string{"--config", "coordinator.config.json"})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"--config", filepath.Join(cwd, "coordinator.config.json"), "--state", filepath.Join(cwd, "data", "coordinator.db")}
	if strings.Join(o.Args, " ") != strings.Join(want, " ") || o.LogDir != filepath.Join(cwd, "logs") {
		t.Errorf("coordinator args %q log %q, want %q", o.Args, o.LogDir, want)
	}
	if _, err := m.installOptions(mgr, service.Serve, false, "", "", "", "", nil); !errors.As(err, &ue) {
		t.Errorf("empty PATH: %v, want a usage error", err)
	}
}

func TestBackupAndRestoreCommands(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, store := opsStore(t, dir, 5)
	to := filepath.Join(dir, "backups", "b1.db")

	m, stdout, _ := opsMain(nil)
	if err := m.Run(ctx, []string{"backup", "--to", to, "--db", db}); err != nil {
		t.Fatalf("backup: %v", err)
	}
	if !strings.Contains(stdout.String(), "backed up 5 events") {
		t.Errorf("backup output: %s", stdout)
	}
	if err := m.Run(ctx, []string{"backup", "--to", to, "--db", db}); exitCode(io.Discard, err) != 2 {
		t.Errorf("backup over an existing file without --force: %v, want a usage error", err)
	}
	if err := m.Run(ctx, []string{"backup", "--db", db}); exitCode(io.Discard, err) != 2 {
		t.Errorf("backup without --to: %v, want a usage error", err)
	}

	err := m.Run(ctx, []string{"restore", "--from", to, "--db", db})
	if !errors.Is(err, sqlite.ErrInUse) || exitCode(io.Discard, err) != 1 {
		t.Fatalf("restore while the server has the database open: %v, want ErrInUse", err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if err := m.Run(ctx, []string{"restore", "--from", to, "--db", db}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if out := stdout.String(); !strings.Contains(out, "restored 5 events") || !strings.Contains(out, "previous database is kept as "+db+".pre-restore-") {
		t.Errorf("restore output: %s", out)
	}
}

func TestCheckBridge(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + l.Addr().String()
	_ = l.Close()
	res := checkBridge(ctx, deadURL, "")
	if len(res) != 1 || res[0].Status != checkFail || res[0].Fix == "" {
		t.Errorf("unreachable bridge: %+v", res)
	}

	url := opsBridge(t, "right-token")
	res = checkBridge(ctx, url, "wrong-token")
	if len(res) != 2 || res[0].Status != checkOK || res[1].Status != checkFail || !strings.Contains(res[1].Fix, "token") {
		t.Errorf("wrong token: %+v", res)
	}
	if strings.Contains(res[1].Detail, "wrong-token") {
		t.Errorf("the check prints the token: %s", res[1].Detail)
	}
	res = checkBridge(ctx, url, "right-token")
	if len(res) != 2 || res[0].Status != checkOK || res[1].Status != checkOK {
		t.Errorf("right token: %+v", res)
	}
}

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	if cfg, res := checkConfig(filepath.Join(dir, "none.json")); cfg != nil || res[0].Status != checkWarn {
		t.Errorf("missing config: %+v", res)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"agents": {"x": {"command": "not an array"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, res := checkConfig(bad); cfg != nil || res[0].Status != checkFail || !strings.Contains(res[0].Detail, "agents.x.command") {
		t.Errorf("invalid config: %+v", res)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"agents": {"x": {"command": ["echo"]}}, "no_such_key": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, res := checkConfig(good)
	if cfg == nil || res[0].Status != checkOK {
		t.Fatalf("valid config: %+v", res)
	}
	if len(res) < 2 || res[1].Status != checkWarn {
		t.Errorf("unknown key not reported: %+v", res)
	}
}

func TestCheckAdapters(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	codexSh := script("codex.sh", 0o755)
	cfg := coordinatorConfigForTest(map[string][]string{
		"codex":   {codexSh},
		"missing": {filepath.Join(dir, "nope.sh")},
		"noexec":  {script("plain.sh", 0o644)},
		"lookup":  {"definitely-not-a-command-xyz"},
	})
	res := checkAdapters(cfg, bin, "the test PATH")
	status := map[string]checkStatus{}
	for _, r := range res {
		status[r.Name] = r.Status
		if r.Status == checkFail && r.Fix == "" {
			t.Errorf("%s fails without a fix", r.Name)
		}
	}
	want := map[string]checkStatus{
		"adapter codex": checkOK, "codex CLI for codex": checkFail,
		"adapter missing": checkFail, "adapter noexec": checkFail, "adapter lookup": checkFail,
	}
	for name, st := range want {
		if status[name] != st {
			t.Errorf("%s = %v, want %v (all: %+v)", name, status[name], st, res)
		}
	}
	// With codex on the service PATH the CLI check passes.
	if err := os.WriteFile(filepath.Join(bin, "codex"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range checkAdapters(cfg, bin, "the test PATH") {
		if r.Name == "codex CLI for codex" && r.Status != checkOK {
			t.Errorf("codex on PATH: %+v", r)
		}
	}
}

func coordinatorConfigForTest(commands map[string][]string) coordinator.Config {
	cfg := coordinator.Config{Agents: map[string]coordinator.AgentConfig{}}
	for id, cmd := range commands {
		cfg.Agents[id] = coordinator.AgentConfig{Command: cmd}
	}
	return cfg
}

func TestCheckService(t *testing.T) {
	tests := []struct {
		st   service.Status
		err  error
		want checkStatus
	}{
		{service.Status{State: service.NotInstalled}, nil, checkOK},
		{service.Status{State: service.Running}, nil, checkOK},
		{service.Status{State: service.Stopped, Installed: service.Definition{LogFile: "/l/serve.log"}}, nil, checkFail},
		{service.Status{State: service.Unknown, Detail: "no bus"}, nil, checkWarn},
		{service.Status{}, errors.New("unreadable"), checkWarn},
	}
	for _, tt := range tests {
		r := checkService(service.Serve, tt.st, tt.err)
		if r.Status != tt.want {
			t.Errorf("%+v: %v, want %v", tt.st, r.Status, tt.want)
		}
		if r.Status == checkFail && !strings.Contains(r.Fix, "service start serve") {
			t.Errorf("stopped service fix: %q", r.Fix)
		}
	}
}

func TestCheckDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, _ := opsStore(t, dir, 3)
	if r := checkDatabase(ctx, "db", db, "restore"); r.Status != checkOK {
		t.Errorf("good database: %+v", r)
	}
	if r := checkDatabase(ctx, "db", filepath.Join(dir, "none.db"), "restore"); r.Status != checkWarn {
		t.Errorf("missing database: %+v", r)
	}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not sqlite "), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := checkDatabase(ctx, "db", junk, "restore it"); r.Status != checkFail || r.Fix != "restore it" {
		t.Errorf("damaged database: %+v", r)
	}
}

func TestGradeFree(t *testing.T) {
	for free, want := range map[uint64]checkStatus{50 << 20: checkFail, 500 << 20: checkWarn, 10 << 30: checkOK} {
		if r := gradeFree("/d", free); r.Status != want {
			t.Errorf("%d bytes free: %v, want %v", free, r.Status, want)
		}
	}
	if r := checkDisk(filepath.Join(t.TempDir(), "not", "yet", "bridge.db")); !strings.Contains(r.Detail, "free on") {
		t.Errorf("checkDisk on a missing folder: %+v", r)
	}
}

func TestDoctor(t *testing.T) {
	ctx := context.Background()
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	url := opsBridge(t, "tok")
	db, _ := opsStore(t, dir, 2)
	cfgPath := filepath.Join(dir, "coordinator.config.json")
	if err := os.WriteFile(cfgPath, []byte(`{"agents": {"echo": {"command": ["sh"]}}, "bridge_token": "tok"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"doctor", "--url", url, "--config", cfgPath, "--db", db, "--state", db}

	m, stdout, _ := opsMain(nil)
	err := m.Run(ctx, args)
	out := stdout.String()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "[FAIL]") && !strings.Contains(line, "free disk") {
			t.Errorf("healthy setup reports %s\n%s", line, out)
		}
	}
	if err != nil && !strings.Contains(out, "[FAIL] free disk") {
		t.Errorf("doctor on a healthy setup: %v\n%s", err, out)
	}

	// Now break things: a wrong token and a damaged database.
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("x"), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	m, stdout, _ = opsMain(map[string]string{"BRIDGE_TOKEN": "wrong"})
	err = m.Run(ctx, []string{"doctor", "--url", url, "--config", cfgPath, "--db", junk, "--state", db})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("doctor with problems: %v, want exit 1", err)
	}
	out = stdout.String()
	for _, want := range []string{"[FAIL] token accepted", "[FAIL] bridge database", "fix: ", "problem(s) found"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "wrong") {
		t.Errorf("doctor prints the token:\n%s", out)
	}
}

// TestTokenNeverLogged runs serve in-process at debug level with a token,
// makes authenticated (and wrongly authenticated) requests, and checks the
// token appears nowhere in the captured log.
func TestTokenNeverLogged(t *testing.T) {
	const token = "tok-9f2c4e7a1b3d5e6f"
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _, stderr := opsMain(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- m.Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "bridge.db"),
			"--token-file", tokenFile, "--log-level", "debug"})
	}()
	var url string
	testutil.WaitFor(t, 30*time.Second, "serve to log its URL", func() bool {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var rec struct {
				Msg string `json:"msg"`
				URL string `json:"url"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.URL != "" {
				url = rec.URL
				return true
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, stderr)
		default:
		}
		return false
	})
	requests := []struct {
		method, path, auth, body string
	}{
		{"GET", "/threads?limit=1", "Bearer " + token, ""},
		{"POST", "/threads", "Bearer " + token, `{"name":"t"}`},
		{"GET", "/threads", "Bearer " + token + "x", ""},
		{"GET", "/events?after=0", "Bearer " + token, ""},
		{"GET", "/nope", "Bearer " + token, ""},
		{"GET", "/ping", "Bearer " + token, ""},
	}
	for _, r := range requests {
		req, err := http.NewRequestWithContext(ctx, r.method, url+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", r.auth)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not shut down")
	}
	log := stderr.String()
	if !strings.Contains(log, `"level":"DEBUG"`) && !strings.Contains(log, "shutting down") {
		t.Errorf("the log is suspiciously empty:\n%s", log)
	}
	if strings.Contains(log, token) {
		t.Errorf("the token appears in the log:\n%s", log)
	}
}
