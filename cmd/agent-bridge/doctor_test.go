package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/internal/service"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

func TestCheckBridge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	deadURL := "http://" + testutil.FreeAddr(t)
	res := checkBridge(ctx, deadURL, "", nil, true)
	if len(res) != 1 || res[0].Status != checkFail || res[0].Fix == "" {
		t.Errorf("unreachable bridge: %+v", res)
	}
	// At the default address, a bridge not started yet is a warning.
	if res := checkBridge(ctx, deadURL, "", nil, false); len(res) != 1 || res[0].Status != checkWarn {
		t.Errorf("unreachable default bridge: %+v", res)
	}

	url := opsBridge(t, "right-token")
	res = checkBridge(ctx, url, "wrong-token", nil, true)
	if len(res) != 2 || res[0].Status != checkOK || res[1].Status != checkFail || !strings.Contains(res[1].Fix, "token") {
		t.Errorf("wrong token: %+v", res)
	}
	if strings.Contains(res[1].Detail, "wrong-token") {
		t.Errorf("the check prints the token: %s", res[1].Detail)
	}
	res = checkBridge(ctx, url, "right-token", nil, true)
	if len(res) != 2 || res[0].Status != checkOK || res[1].Status != checkOK {
		t.Errorf("right token: %+v", res)
	}
	// With a config, the server's humans (its default, "user") are checked
	// against human_ids.
	res = checkBridge(ctx, url, "right-token", agentbridge.Humans{"user"}, true)
	if len(res) != 3 || res[1].Name != "humans" || res[1].Status != checkOK {
		t.Errorf("matching humans: %+v", res)
	}
	res = checkBridge(ctx, url, "right-token", agentbridge.Humans{"user", "alice"}, true)
	if len(res) != 3 || res[1].Status != checkFail || !strings.Contains(res[1].Fix, "--humans alice,user") {
		t.Errorf("humans the server does not have: %+v", res)
	}
}

func TestCheckHumans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		config, server agentbridge.Humans
		want           checkStatus
	}{
		{agentbridge.Humans{"user"}, agentbridge.Humans{"user"}, checkOK},
		{agentbridge.Humans{"bob", "alice"}, agentbridge.Humans{"alice", "bob"}, checkOK},
		{agentbridge.Humans{"user", "user"}, agentbridge.Humans{"user"}, checkOK},
		{agentbridge.Humans{"user"}, agentbridge.Humans{"user", "alice"}, checkFail},
		{agentbridge.Humans{"alice"}, agentbridge.Humans{"user"}, checkFail},
		{agentbridge.Humans{"user"}, nil, checkWarn},
	} {
		if got := checkHumans(tc.config, tc.server); got.Status != tc.want {
			t.Errorf("checkHumans(%v, %v) = %+v, want %v", tc.config, tc.server, got, tc.want)
		}
	}
}

func TestCheckConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A missing default config: up runs the built-in defaults.
	if cfg, res := checkConfig(filepath.Join(dir, "none.json"), false); cfg == nil || res[0].Status != checkOK || !strings.Contains(res[0].Detail, "built-in defaults") {
		t.Errorf("missing default config: %+v", res)
	}
	if cfg, res := checkConfig(filepath.Join(dir, "none.json"), true); cfg != nil || res[0].Status != checkFail {
		t.Errorf("missing named config: %+v", res)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"agents": {"x": {"command": "not an array"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, res := checkConfig(bad, true); cfg != nil || res[0].Status != checkFail || !strings.Contains(res[0].Detail, "agents.x.command") {
		t.Errorf("invalid config: %+v", res)
	}
	typo := filepath.Join(dir, "typo.json")
	if err := os.WriteFile(typo, []byte(`{"agents": {"x": {"command": ["echo"]}}, "max_concurency": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, res := checkConfig(typo, true); cfg != nil || res[0].Status != checkFail || !strings.Contains(res[0].Detail, `did you mean "max_concurrency"?`) {
		t.Errorf("unknown key: %+v", res)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"agents": {"x": {"command": ["echo"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, res := checkConfig(good, true); cfg == nil || res[0].Status != checkOK {
		t.Fatalf("valid config: %+v", res)
	}
}

func TestCheckAdapters(t *testing.T) {
	t.Parallel()
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
	// Each agent that cannot run is a warning; none able to run fails.
	want := map[string]checkStatus{
		"adapter codex": checkOK, "codex CLI for codex": checkWarn,
		"adapter missing": checkWarn, "adapter noexec": checkWarn, "adapter lookup": checkWarn,
		"agents": checkFail,
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
		if (r.Name == "codex CLI for codex" && r.Status != checkOK) || r.Name == "agents" {
			t.Errorf("codex on PATH: %+v", r)
		}
	}
}

func coordinatorConfigForTest(commands map[string][]string) config.Config {
	cfg := config.Config{Agents: map[string]config.Agent{}}
	for id, cmd := range commands {
		cfg.Agents[id] = config.Agent{Command: cmd}
	}
	return cfg
}

func TestCheckService(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	for free, want := range map[uint64]checkStatus{50 << 20: checkFail, 500 << 20: checkWarn, 10 << 30: checkOK} {
		if r := gradeFree("/d", free); r.Status != want {
			t.Errorf("%d bytes free: %v, want %v", free, r.Status, want)
		}
	}
	if r := checkDisk(filepath.Join(t.TempDir(), "not", "yet", "bridge.db")); !strings.Contains(r.Detail, "free on") {
		t.Errorf("checkDisk on a missing folder: %+v", r)
	}
}

// TestDoctorNamesTheAgentsKey: a missing program's fix names the key the
// config holds it under: command for an adapter, acp for an ACP agent
// (Gemini's entry is "acp": ["gemini", "--acp"]).
func TestDoctorNamesTheAgentsKey(t *testing.T) {
	t.Parallel()
	cfg, _, err := config.Parse(strings.NewReader(`{"agents": {
		"gemini": {"acp": ["no-such-gemini-here", "--acp"], "client": "gemini"},
		"old": {"command": ["no-such-adapter-here"]}}}`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fixes := map[string]string{}
	for _, r := range checkAdapters(cfg, "/nonexistent", "PATH") {
		fixes[r.Name] = r.Fix
	}
	for name, want := range map[string]string{"adapter gemini": "fix agents.gemini.acp[0]", "adapter old": "fix agents.old.command[0]"} {
		if !strings.Contains(fixes[name], want) {
			t.Errorf("%s: fix %q, want it to say %q", name, fixes[name], want)
		}
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
	// ... and a config whose humans the server does not share.
	if err := os.WriteFile(cfgPath, []byte(`{"agents": {"echo": {"command": ["sh"]}}, "bridge_token": "tok", "human_ids": ["alice"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	m, stdout, _ = opsMain(map[string]string{"BRIDGE_TOKEN": "wrong"})
	err = m.Run(ctx, []string{"doctor", "--url", url, "--config", cfgPath, "--db", junk, "--state", db})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("doctor with problems: %v, want exit 1", err)
	}
	out = stdout.String()
	for _, want := range []string{"[FAIL] token accepted", "[FAIL] bridge database", "[FAIL] humans", "--humans alice", "fix: ", "problem(s) found"} {
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
	t.Parallel()
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

// TestCheckWorkspaces: a config with workspaces needs git on the PATH the
// coordinator sees; doctor says so, and says nothing without workspaces.
func TestCheckWorkspaces(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	if res := checkWorkspaces(cfg, "", "PATH"); len(res) != 0 {
		t.Errorf("no workspaces: %+v", res)
	}
	cfg.Workspaces = map[string]config.Workspace{"app": {Repo: "/r"}}
	if res := checkWorkspaces(cfg, t.TempDir(), "PATH"); len(res) != 1 || res[0].Status != checkFail || !strings.Contains(res[0].Detail, "git is not on PATH") {
		t.Errorf("no git: %+v", res)
	}
	if res := checkWorkspaces(cfg, os.Getenv("PATH"), "PATH"); len(res) != 1 || res[0].Status != checkOK {
		t.Errorf("git on the PATH: %+v", res)
	}
}
