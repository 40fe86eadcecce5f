package main

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// readmeFirstRun returns the commands of the README's first-run example:
// the shell block after "up" prints the web UI's address, without its
// "go build" line (the test has built the binary already).
func readmeFirstRun(t *testing.T) []string {
	t.Helper()
	root, err := testutil.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)Try it from another terminal:\\s*```sh\\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md has no first-run example (\"Try it from another terminal:\" and a sh block)")
	}
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		if !strings.HasPrefix(line, "go build") {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// TestFirstRunAnywhere runs the README's first run with the real binary in
// an empty folder, away from the repository and its config, with a PATH
// that has no agent-bridge on it: up must say it found no config, list the
// built-in echo agent and print a login link that logs a browser in once,
// and the README's commands (which find up's token by themselves) must get
// echo's reply.
func TestFirstRunAnywhere(t *testing.T) {
	t.Parallel()
	bin := buildServeBinary(t)
	dir := t.TempDir()
	local := filepath.Join(dir, "agent-bridge")
	if err := os.Symlink(bin, local); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}

	up := exec.Command(local, "up", "--addr", "127.0.0.1:0", "--status-addr", "127.0.0.1:0")
	up.Dir, up.Env = dir, env
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var upErr testutil.Buffer
	up.Stderr = &upErr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = up.Process.Signal(os.Interrupt)
		_ = up.Wait()
	})
	var upOut testutil.Buffer
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			upOut.Write([]byte(sc.Text() + "\n"))
		}
	}()
	var bridgeURL, code string
	testutil.WaitFor(t, 30*time.Second, "up to list its agents", func() bool {
		out := upOut.String()
		if m := regexp.MustCompile(`Open the UI at (\S+)/ui/login#code=(\S+)`).FindStringSubmatch(out); m != nil && strings.Contains(out, "Agents") {
			bridgeURL, code = m[1], m[2]
			return true
		}
		return false
	})
	checkLoginLink(t, nil, bridgeURL, code)
	out := upOut.String()
	for _, want := range []string{
		"Coordinator config: none found at " + filepath.Join(dir, "coordinator.config.json"),
		"echo         agent-bridge adapter echo",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("up's output lacks %q:\n%s\nstderr:\n%s", want, out, upErr.String())
		}
	}

	// The README's commands, the last one (tail) left running.
	cmds := readmeFirstRun(t)
	if len(cmds) < 2 || !strings.Contains(cmds[len(cmds)-1], " tail ") {
		t.Fatalf("the README's first run should end with tail: %q", cmds)
	}
	script := strings.Join(cmds[:len(cmds)-1], "\n") + "\nexec " + cmds[len(cmds)-1] + "\n"
	sh := exec.Command("/bin/sh", "-euc", script)
	sh.Dir, sh.Env = dir, append(env, "BRIDGE_URL="+bridgeURL)
	var tailOut, tailErr testutil.Buffer
	sh.Stdout, sh.Stderr = &tailOut, &tailErr
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sh.Process.Kill()
		_ = sh.Wait()
		if t.Failed() {
			t.Logf("tail:\n%s\nstderr:\n%s\nup's output:\n%s\nup's stderr:\n%s", tailOut.String(), tailErr.String(), upOut.String(), upErr.String())
		}
	})
	reply := regexp.MustCompile(`(?m)^\[\d+\] \S+ echo → \S+: hello echo$`)
	testutil.WaitFor(t, 60*time.Second, "echo's reply in tail", func() bool {
		return reply.MatchString(tailOut.String())
	})
}

// TestAdapterEcho runs the built-in echo agent in-process: the payload's
// content comes back; anything but a payload on stdin is refused.
func TestAdapterEcho(t *testing.T) {
	t.Parallel()
	run := func(stdin string, args ...string) (string, error) {
		var out testutil.Buffer
		m := &Main{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" }}
		err := m.Run(t.Context(), append([]string{"adapter", "echo"}, args...))
		return out.String(), err
	}
	if out, err := run(`{"thread_id":"t","content":"two\nlines"}`); err != nil || out != "two\nlines\n" {
		t.Errorf("echo = %q, %v; want the content", out, err)
	}
	if _, err := run(`not json`); err == nil {
		t.Error("echo accepted a stdin that is not a payload")
	}
	var ue *usageError
	if _, err := run(`{}`, "extra"); !errors.As(err, &ue) {
		t.Errorf("echo with an argument: %v, want a usage error", err)
	}
	var m Main
	m.Stdin, m.Stdout, m.Stderr, m.Getenv = strings.NewReader(""), io.Discard, io.Discard, func(string) string { return "" }
	if err := m.Run(t.Context(), []string{"adapter", "nope"}); !errors.As(err, &ue) {
		t.Errorf("adapter nope: %v, want a usage error", err)
	}
}

// checkLoginLink opens up's login link as the UI page does: without the
// cookie the API is 401; the code buys the login cookie once, which opens
// the API as a person; the same code a second time is 401. A nil
// transport is net/http's default.
func checkLoginLink(t *testing.T, transport http.RoundTripper, bridgeURL, code string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: transport}
	get := func(path string) int {
		resp, err := browser.Get(bridgeURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	login := func() int {
		resp, err := browser.Post(bridgeURL+"/auth/login", "application/json", strings.NewReader(`{"code":"`+code+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := get("/ui/login"); st != http.StatusOK {
		t.Errorf("GET /ui/login = %d", st)
	}
	if st := get("/threads"); st != http.StatusUnauthorized {
		t.Errorf("GET /threads before the login = %d, want 401", st)
	}
	if st := login(); st != http.StatusOK {
		t.Fatalf("login with the link's code = %d", st)
	}
	if st := get("/threads"); st != http.StatusOK {
		t.Errorf("GET /threads with the login cookie = %d, want 200", st)
	}
	if st := login(); st != http.StatusUnauthorized {
		t.Errorf("the link's code used twice = %d, want 401", st)
	}
}
