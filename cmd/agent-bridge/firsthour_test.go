package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

// bashCompletion is the bash-completion package's main script, which
// cobra's completion script needs (as it does in any user's shell).
const bashCompletion = "/usr/share/bash-completion/bash_completion"

// firstHour is a new user's shell: an empty folder, a PATH with the
// agent-bridge binary and the system's tools but no agent CLI, and no
// BRIDGE_* variable.
type firstHour struct {
	t   *testing.T
	bin string
	dir string
	env []string
}

// run runs agent-bridge with args in the user's folder and returns its
// output and exit code.
func (f *firstHour) run(stdin string, args ...string) (stdout, stderr string, code int) {
	f.t.Helper()
	cmd := exec.Command(f.bin, args...)
	cmd.Dir, cmd.Env = f.dir, f.env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		f.t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// ok runs agent-bridge and requires exit 0.
func (f *firstHour) ok(args ...string) string {
	f.t.Helper()
	out, errOut, code := f.run("", args...)
	if code != 0 {
		f.t.Fatalf("agent-bridge %v: exit %d, stderr:\n%s", args, code, errOut)
	}
	return out
}

// TestFirstHour runs a new user's first hour against the real binary
// (contract 6.4): up on free ports from an empty folder, the other
// commands finding it with no environment, doctor content without any
// agent CLI, a misspelt config key refused with the right one, help, bash
// completion, and an ignored control explained.
func TestFirstHour(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildServeBinary(t)
	home := t.TempDir()
	runDir := filepath.Join(home, "run")
	if err := os.Mkdir(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	f := &firstHour{t: t, bin: bin, dir: t.TempDir(),
		env: []string{"PATH=" + filepath.Dir(bin) + ":/usr/bin:/bin", "HOME=" + home, "XDG_RUNTIME_DIR=" + runDir}}

	// Help, from anywhere, exits 0.
	if out := f.ok("thread", "--help"); !strings.Contains(out, "rename") {
		t.Errorf("thread --help:\n%s", out)
	}

	// A misspelt config key is refused at start with the key meant.
	typo := filepath.Join(f.dir, "typo.json")
	if err := os.WriteFile(typo, []byte(`{"max_concurency": 2, "agents": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := f.run("", "up", "--config", typo, "--addr", testutil.FreeAddr(t))
	if code != 2 || !strings.Contains(errOut, `unknown key "max_concurency"; did you mean "max_concurrency"?`) {
		t.Errorf("up with a misspelt key: exit %d, stderr %q", code, errOut)
	}
	// So is a --config that does not exist.
	if _, errOut, code := f.run("", "up", "--config", "missing.json"); code != 2 || !strings.Contains(errOut, "missing.json does not exist") {
		t.Errorf("up --config missing.json: exit %d, stderr %q", code, errOut)
	}

	// up on two free ports, from the empty folder.
	addr, statusAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	up := exec.Command(bin, "up", "--addr", addr, "--status-addr", statusAddr)
	up.Dir, up.Env = f.dir, f.env
	upOut, upErr := &testutil.Buffer{}, &testutil.Buffer{}
	up.Stdout, up.Stderr = upOut, upErr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upDone := make(chan error, 1)
	go func() { upDone <- up.Wait() }()
	t.Cleanup(func() {
		if up.ProcessState == nil {
			_ = up.Process.Kill()
		}
		if t.Failed() {
			t.Logf("up stdout:\n%s\nup stderr:\n%s", upOut.String(), upErr.String())
		}
	})
	testutil.WaitFor(t, 60*time.Second, "up to say it is up", func() bool { return strings.Contains(upOut.String(), "agent-bridge is up") })
	for _, want := range []string{"export BRIDGE_URL=http://" + addr, "export BRIDGE_COORDINATOR_URL=http://" + statusAddr, "built-in defaults", "echo"} {
		if !strings.Contains(upOut.String(), want) {
			t.Errorf("up's summary lacks %q:\n%s", want, upOut.String())
		}
	}
	runtimeFile := client.RuntimePath(func(k string) string { return map[string]string{"XDG_RUNTIME_DIR": runDir}[k] })

	// Discovery: no flag, no environment.
	thread := strings.TrimSpace(f.ok("thread", "new", "first"))
	f.ok("invite", thread, "echo") // the built-in echo agent's profile
	f.ok("post", thread, "hello", "--to", "echo")
	testutil.WaitFor(t, 30*time.Second, "the echo agent's invocation to succeed", func() bool {
		out, _, code := f.run("", "invocations", "--json")
		var invs []ledger.Invocation
		return code == 0 && json.Unmarshal([]byte(out), &invs) == nil && len(invs) == 1 && invs[0].Status == ledger.StatusSucceeded
	})
	if out := f.ok("invocations"); !strings.Contains(out, "succeeded") || !strings.Contains(out, "echo") {
		t.Errorf("invocations:\n%s", out)
	}
	if out := f.ok("state", thread); !strings.Contains(out, "echo") {
		t.Errorf("state:\n%s", out)
	}

	// doctor, with no agent CLI on PATH: warnings at most, exit 0.
	out, errOut, code := f.run("", "doctor")
	if code != 0 || strings.Contains(out, "[FAIL]") || !strings.Contains(out, "an up is running") {
		t.Errorf("doctor: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}

	// An ignored action is explained, exit 0.
	_, errOut, code = f.run("", "pause", thread, "on", "--from", "echo")
	if code != 0 || !strings.Contains(errOut, `pause counts only from a human (user), and "echo" is not one`) {
		t.Errorf("pause from an agent: exit %d, stderr %q", code, errOut)
	}

	// bash completes the command names.
	if _, err := os.Stat(bashCompletion); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; .ci/run installs bash-completion", bashCompletion)
		}
		t.Logf("skipping the bash completion check: %v (apt-get install bash-completion)", err)
	} else {
		script := filepath.Join(f.dir, "completion.bash")
		if err := os.WriteFile(script, []byte(f.ok("completion", "bash")), 0o600); err != nil {
			t.Fatal(err)
		}
		// complete runs bash's completion of line (ending in the word
		// being completed) and returns the candidates.
		complete := func(line string) []string {
			cmd := exec.Command("bash", "--norc", "--noprofile", "-c", `source "$1"; source "$2"
read -ra COMP_WORDS <<< "$3"; [[ "$3" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMP_LINE="$3"; COMP_POINT=${#COMP_LINE}
__start_agent-bridge agent-bridge "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"`, "bash", bashCompletion, script, line)
			cmd.Dir, cmd.Env = f.dir, f.env
			got, err := cmd.Output()
			if err != nil {
				t.Errorf("bash completion of %q: %v", line, err)
			}
			return strings.Fields(string(got))
		}
		if got := complete("agent-bridge th"); len(got) != 1 || got[0] != "thread" {
			t.Errorf("bash completes \"agent-bridge th\" to %q, want thread", got)
		}
		// A THREAD argument completes to the running up's threads.
		if got := complete("agent-bridge tail "); len(got) != 1 || got[0] != thread {
			t.Errorf("bash completes \"agent-bridge tail \" to %q, want %s", got, thread)
		}
	}

	// Ctrl-C: up stops and takes its runtime file with it.
	if _, err := os.Stat(runtimeFile); err != nil {
		t.Errorf("up's runtime file: %v", err)
	}
	if err := up.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-upDone:
		if err != nil {
			t.Errorf("up after Ctrl-C: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up did not stop after Ctrl-C")
	}
	if _, err := os.Stat(runtimeFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("up left its runtime file behind: %v", err)
	}
	// With up gone, a command falls back to the default and says how to
	// start one.
	if _, errOut, code := f.run("", "thread", "list", "--url", "http://"+addr); code != 1 || !strings.Contains(errOut, "agent-bridge up") {
		t.Errorf("thread list after up stopped: exit %d, stderr %q", code, errOut)
	}
}
