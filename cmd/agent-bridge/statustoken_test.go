package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestStatusCommandsSendTheToken runs `up` with BRIDGE_TOKEN set: the
// coordinator's status API then asks for that token, the commands that
// ask it (invocations, why, sessions) send it from BRIDGE_TOKEN, and
// without it they say what is missing (exit 1).
func TestStatusCommandsSendTheToken(t *testing.T) {
	t.Parallel()
	const token = "status-token"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "coordinator.config.json")
	if err := os.WriteFile(cfg, []byte(`{"status_addr": "127.0.0.1:0", "agents": {"echo": {"command": ["cat"]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(tok string) func(string) string {
		return func(k string) string {
			if k == "BRIDGE_TOKEN" {
				return tok
			}
			return ""
		}
	}
	var stdout, stderr testutil.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: env(token)}
	stop := runInProcess(t, m, "up", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "data", "bridge.db"),
		"--config", cfg, "--state", filepath.Join(dir, "data", "coordinator.db"))
	var statusURL string
	status := regexp.MustCompile(`coordinator status (http://\S+)`)
	testutil.WaitFor(t, 30*time.Second, "up to print the status URL", func() bool {
		if m := status.FindStringSubmatch(stdout.String()); m != nil {
			statusURL = m[1]
			return true
		}
		return false
	})
	run := func(tok string, args ...string) (string, int) {
		var out, errb bytes.Buffer
		cm := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: env(tok)}
		code := exitCode(&errb, cm.Run(context.Background(), append(args, "--coordinator-url", statusURL)))
		return out.String() + errb.String(), code
	}
	for _, args := range [][]string{{"invocations"}, {"sessions"}} {
		if out, code := run(token, args...); code != 0 {
			t.Errorf("%v with the token = %d:\n%s", args, code, out)
		}
		if out, code := run("", args...); code != 1 || !strings.Contains(out, "token") {
			t.Errorf("%v without the token = %d:\n%s", args, code, out)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("up returned %v; stderr:\n%s", err, stderr.String())
	}
}
