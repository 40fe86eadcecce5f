package bridge

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// loginCookie logs in at base with token, sending origin, and returns the
// cookie the answer sets.
func loginCookie(t *testing.T, c *http.Client, base, origin, token string) *http.Cookie {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/auth/login", strings.NewReader(`{"token":"`+token+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", origin)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
		t.Fatalf("login through %s: %s, cookies %v", base, resp.Status, resp.Cookies())
	}
	return resp.Cookies()[0]
}

// TestHTTPS: with a certificate and key the bridge answers over HTTPS
// only, sends HSTS, and its login cookie is Secure.
func TestHTTPS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := testutil.SelfSigned(t, t.TempDir())
	ts := newTestServer(t, Options{Token: "tok", TLSCert: certFile, TLSKey: keyFile})
	if !strings.HasPrefix(ts.url, "https://127.0.0.1:") {
		t.Fatalf("URL %s, want https", ts.url)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(ts.url + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Strict-Transport-Security") != hstsValue {
		t.Errorf("GET /ping over TLS: %s, HSTS %q", resp.Status, resp.Header.Get("Strict-Transport-Security"))
	}
	if ck := loginCookie(t, c, ts.url, ts.url, "tok"); !ck.Secure || !ck.HttpOnly {
		t.Errorf("login cookie over TLS = %+v, want Secure and HttpOnly", ck)
	}
	// Plain HTTP to the TLS listener gets net/http's 400, no API answer.
	if r, err := http.Get(strings.Replace(ts.url, "https:", "http:", 1) + "/ping"); err == nil {
		r.Body.Close()
		if r.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS listener: %s, want 400", r.Status)
		}
	}

	if _, err := NewServer(openStore(t), Options{Addr: "127.0.0.1:0", TLSCert: certFile}); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("a certificate without a key: %v", err)
	}
}

// TestBehindTLSProxy: behind a TLS-terminating reverse proxy (what
// tailscale serve is) the bridge works unchanged: the browser's https
// origin is allowed with --cors-origin, the login cookie is Secure, a
// write and a stream go through.
func TestBehindTLSProxy(t *testing.T) {
	t.Parallel()
	var target atomic.Pointer[url.URL] // set once the bridge listens
	proxy := httptest.NewUnstartedServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target.Load())
			r.SetXForwarded()
		},
	})
	proxy.StartTLS()
	defer proxy.Close()
	// The proxy's origin is what the browser's pages have: the bridge is
	// told it with --cors-origin, as docs/operations.md says.
	ts := newTestServer(t, Options{Token: "tok", CORSOrigins: []string{proxy.URL}})
	u, _ := url.Parse(ts.url)
	target.Store(u)
	c := proxy.Client()
	ck := loginCookie(t, c, proxy.URL, proxy.URL, "tok")
	if !ck.Secure {
		t.Errorf("login cookie through the TLS proxy = %+v, want Secure", ck)
	}
	ts.newThread("t1")
	req, _ := http.NewRequest("POST", proxy.URL+"/threads/t1/events", strings.NewReader(`{"from":"user","content":"from the phone"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", proxy.URL)
	req.AddCookie(ck)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("append through the proxy: %s", resp.Status)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, "GET", proxy.URL+"/threads/t1/events/stream?after=0", nil)
	req.AddCookie(ck)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	got := ""
	for i := 0; i < 20 && !strings.Contains(got, "from the phone"); i++ {
		n, err := resp.Body.Read(buf)
		got += string(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(got, "from the phone") {
		t.Errorf("the stream through the proxy said %q", got)
	}
}
