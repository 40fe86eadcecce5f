package main

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestServeTLS runs `serve --tls-cert --tls-key` with a self-signed
// certificate made here: it answers over HTTPS with HSTS, and the login
// cookie is Secure.
func TestServeTLS(t *testing.T) {
	stack.Heavy(t)
	dir := t.TempDir()
	certFile, keyFile, pool := testutil.SelfSigned(t, dir)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, buildServeBinary(t), filepath.Join(dir, "b.db"), "--tls-cert", certFile, "--tls-key", keyFile, "--token-file", tokenFile)
	if !strings.HasPrefix(p.URL, "https://127.0.0.1:") {
		t.Fatalf("serve logged %s, want an https URL", p.URL)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("POST", p.URL+"/auth/login", strings.NewReader(`{"token":"s3cret"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("login over HTTPS: %s, HSTS %q", resp.Status, resp.Header.Get("Strict-Transport-Security"))
	}
	if cs := resp.Cookies(); len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly {
		t.Errorf("login cookie = %+v, want one Secure, HttpOnly cookie", cs)
	}
}

// TestUpTLS runs `up --tls-cert --tls-key` in an empty folder: the login
// link it prints is https and logs a browser in once over HTTPS (HSTS);
// the README's commands in another shell find up through its runtime
// file, and up's own coordinator reaches the bridge (on its plain
// loopback listener, the self-signed certificate being none it can
// check), so echo answers, as read over HTTPS.
func TestUpTLS(t *testing.T) {
	stack.Heavy(t)
	bin := buildServeBinary(t)
	dir := t.TempDir()
	certFile, keyFile, pool := testutil.SelfSigned(t, dir)
	env := []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}
	up := exec.Command(bin, "up", "--addr", "127.0.0.1:0", "--status-addr", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	up.Dir, up.Env = dir, env
	var upOut, upErr testutil.Buffer
	up.Stdout, up.Stderr = &upOut, &upErr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = up.Process.Signal(os.Interrupt)
		_ = up.Wait()
		if t.Failed() {
			t.Logf("up's output:\n%s\nstderr:\n%s", upOut.String(), upErr.String())
		}
	})
	var bridgeURL, code string
	testutil.WaitFor(t, 30*time.Second, "up to print its login link", func() bool {
		m := regexp.MustCompile(`Open the UI at (\S+)/ui/login#code=(\S+)`).FindStringSubmatch(upOut.String())
		if m != nil {
			bridgeURL, code = m[1], m[2]
		}
		return m != nil
	})
	if !strings.HasPrefix(bridgeURL, "https://127.0.0.1:") || !strings.Contains(upOut.String(), "agent-bridge is up: bridge "+bridgeURL+",") {
		t.Fatalf("up printed the bridge at %s, want an https URL:\n%s", bridgeURL, upOut.String())
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	checkLoginLink(t, tr, bridgeURL, code)

	var thread string
	for _, args := range [][]string{{"thread", "new", "demo"}, {"invite", "demo", "echo"}, {"post", "demo", "hello echo", "--to", "echo"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("agent-bridge %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == "thread" {
			thread = strings.TrimSpace(string(out))
		}
	}
	token, err := os.ReadFile(filepath.Join(dir, "data", "token"))
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	testutil.WaitFor(t, 60*time.Second, "echo's reply, read over HTTPS", func() bool {
		req, _ := http.NewRequest("GET", bridgeURL+"/threads/"+thread+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := c.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var page struct{ Events []agentbridge.Event }
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&page) != nil {
			return false
		}
		for _, e := range page.Events {
			if e.From == "echo" && strings.Contains(string(e.Content), "hello echo") {
				return true
			}
		}
		return false
	})
}
