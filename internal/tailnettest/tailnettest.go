// Package tailnettest runs a whole tailnet on 127.0.0.1 for tests, with no
// internet: Tailscale's own test control server
// (tailscale.com/tstest/integration/testcontrol), a DERP relay and a STUN
// server (tstest/integration's), and a small ACME certificate authority
// (acme.go) that issues the nodes' HTTPS certificates through the same
// dns-01 exchange over control that Let's Encrypt does for a real tailnet.
// Nodes run in the test (Node) or as processes given Env.
package tailnettest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"tailscale.com/ipn"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
	"tailscale.com/tstest/integration"
	"tailscale.com/tstest/integration/testcontrol"
	"tailscale.com/types/logger"
)

// Domain is the test tailnet's MagicDNS domain: node NAME is NAME.Domain.
const Domain = "tail-scale.ts.net"

// Tailnet is a running test tailnet.
type Tailnet struct {
	// ControlURL is the control server's address, for tsnet.Server's
	// ControlURL or --tailnet-control-url.
	ControlURL string
	// Control is the control server itself.
	Control *testcontrol.Server
	// ACMEURL is the certificate authority's directory.
	ACMEURL string
	// CAFile is a PEM file of the CA's root: a process that must trust the
	// nodes' certificates gets it as SSL_CERT_FILE.
	CAFile string
	// Roots holds the same root, for clients in the test.
	Roots *x509.CertPool
	acme  *acmeServer
}

// New starts the control server, DERP and STUN, and the certificate
// authority on 127.0.0.1; the test's cleanup stops them.
func New(t testing.TB) *Tailnet {
	t.Helper()
	ca, err := newACMEServer()
	if err != nil {
		t.Fatal(err)
	}
	acmeSrv := httptest.NewServer(ca)
	t.Cleanup(acmeSrv.Close)
	ca.base = acmeSrv.URL
	derpMap := integration.RunDERPAndSTUN(t, logger.Discard, "127.0.0.1")
	control := &testcontrol.Server{
		DERPMap: derpMap,
		// Every node must be added by a person, as on a real tailnet
		// without an auth key: control gives a login link, which
		// Login opens.
		RequireAuth:    true,
		DNSConfig:      &tailcfg.DNSConfig{Proxied: true},
		MagicDNSDomain: Domain,
		OnSetDNS:       ca.setTXT,
		Logf:           logger.Discard,
	}
	control.HTTPTestServer = httptest.NewUnstartedServer(control)
	control.HTTPTestServer.Start()
	t.Cleanup(control.HTTPTestServer.Close)
	caFile := filepath.Join(t.TempDir(), "tailnet-ca.pem")
	if err := os.WriteFile(caFile, ca.rootPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.root)
	return &Tailnet{ControlURL: control.HTTPTestServer.URL, Control: control, ACMEURL: acmeSrv.URL + "/directory",
		CAFile: caFile, Roots: roots, acme: ca}
}

// Env is what a node process needs besides its flags: the certificate
// authority in place of Let's Encrypt (Tailscale's TS_DEBUG_ACME_DIRECTORY_URL)
// and, since the test's only network is loopback, no LAN: the machine's
// own interface addresses are not offered to peers
// (TS_DEBUG_OMIT_LOCAL_ADDRS) and no router is asked for a port mapping
// (TS_DISABLE_PORTMAPPER).
func (tn *Tailnet) Env() []string {
	return []string{
		"TS_DEBUG_ACME_DIRECTORY_URL=" + tn.ACMEURL,
		"TS_DEBUG_OMIT_LOCAL_ADDRS=true",
		"TS_DISABLE_PORTMAPPER=true",
	}
}

// Issued lists the names the certificate authority has certified.
func (tn *Tailnet) Issued() []string { return tn.acme.Issued() }

// Node starts a tsnet node named hostname in the test, ephemeral and kept
// in memory, and waits until it runs; the cleanup closes it. The caller
// sets the environment Env names before (t.Setenv), since tsnet reads it.
func (tn *Tailnet) Node(t testing.TB, ctx context.Context, hostname string) *tsnet.Server {
	t.Helper()
	s := &tsnet.Server{
		Dir:        filepath.Join(t.TempDir(), hostname),
		Hostname:   hostname,
		ControlURL: tn.ControlURL,
		Store:      new(mem.Store),
		Ephemeral:  true,
		UserLogf:   logger.Discard,
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Start(); err != nil {
		t.Fatalf("tailnet node %s: %v", hostname, err)
	}
	lc, err := s.LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	w, err := lc.WatchIPNBus(ctx, ipn.NotifyInitialState)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for {
		n, err := w.Next()
		if err != nil {
			t.Fatalf("tailnet node %s did not come up: %v", hostname, err)
		}
		if n.BrowseToURL != nil && *n.BrowseToURL != "" {
			tn.Login(t, *n.BrowseToURL)
		}
		if n.State != nil && *n.State == ipn.Running {
			return s
		}
	}
}

// Login is the person opening a node's login link and approving it.
func (tn *Tailnet) Login(t testing.TB, link string) {
	t.Helper()
	if !tn.Control.CompleteAuth(link) {
		t.Fatalf("control does not know the login link %s", link)
	}
}

// Client is an HTTP client on node that trusts the tailnet's
// certificates, as a phone with the Tailscale app and a browser would be.
func (tn *Tailnet) Client(node *tsnet.Server) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: tn.Transport(node)}
}

// Transport is Client's transport.
func (tn *Tailnet) Transport(node *tsnet.Server) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return node.Dial(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: tn.Roots},
	}
}

// Proxy starts an HTTP proxy on 127.0.0.1 whose CONNECT tunnels go out
// through node, and returns its URL: a process given it as HTTPS_PROXY
// reaches the tailnet's names as a process on a machine running
// tailscaled in userspace mode does through its outbound HTTP proxy
// (tailscaled --outbound-http-proxy-listen). That is how the tests' remote
// coordinator, a separate process, reaches the bridge's tailnet URL, TLS
// and all, with no tailnet code of its own.
func (tn *Tailnet) Proxy(t testing.TB, node *tsnet.Server) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		up, err := node.Dial(r.Context(), "tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			_ = up.Close()
			http.Error(w, "no hijacking", http.StatusInternalServerError)
			return
		}
		down, buf, err := hj.Hijack()
		if err != nil {
			_ = up.Close()
			return
		}
		if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			_ = up.Close()
			_ = down.Close()
			return
		}
		go pipe(up, down, buf.Reader)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// pipe copies both ways until either side ends, then closes both.
func pipe(up, down net.Conn, pending io.Reader) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, pending); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	<-done
	_ = up.Close()
	_ = down.Close()
	<-done
}
