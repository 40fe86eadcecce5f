package main

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

// TestServeTLS runs `serve --tls-cert --tls-key` with a self-signed
// certificate made here: it answers over HTTPS with HSTS, and the login
// cookie is Secure.
func TestServeTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	dir := t.TempDir()
	certFile, keyFile, pool := testutil.SelfSigned(t, dir)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, buildServeBinary(t), filepath.Join(dir, "b.db"), "--tls-cert", certFile, "--tls-key", keyFile, "--token-file", tokenFile)
	if !strings.HasPrefix(p.url, "https://127.0.0.1:") {
		t.Fatalf("serve logged %s, want an https URL", p.url)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("POST", p.url+"/auth/login", strings.NewReader(`{"token":"s3cret"}`))
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
