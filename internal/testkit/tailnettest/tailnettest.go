// Package tailnettest runs a whole tailnet on 127.0.0.1 for tests, with no
// internet: Tailscale's own test control server
// (tailscale.com/tstest/integration/testcontrol), a DERP relay and a STUN
// server (Tailscale's derpserver and stuntest), and a small ACME certificate authority
// (acme.go) that issues the nodes' HTTPS certificates through the same
// dns-01 exchange over control that Let's Encrypt does for a real tailnet.
// Nodes run in the test (Node) or as processes given Env.
package tailnettest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tailscale.com/derp/derpserver"
	"tailscale.com/ipn"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/net/stun/stuntest"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
	"tailscale.com/tstest/integration/testcontrol"
	"tailscale.com/types/key"
	"tailscale.com/types/logger"
	"tailscale.com/types/nettype"
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
	derpMap := startDERP(t)
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

// startDERP starts a DERP relay (HTTPS, with a certificate no node checks:
// InsecureForTests) and a STUN server on 127.0.0.1, and returns the map
// of them control hands the nodes. It is Tailscale's own server, not
// tstest/integration's helper, whose package registers every optional
// feature of tailscaled (AWS, TAP, …) and would make CI download and
// compile them.
func startDERP(t testing.TB) *tailcfg.DERPMap {
	t.Helper()
	d := derpserver.New(key.NewNode(), logger.Discard)
	srv := httptest.NewUnstartedServer(derpserver.Handler(d))
	// DERP upgrades HTTP/1.1 connections: no HTTP/2 over its TLS.
	srv.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	srv.StartTLS()
	stunAddr, stopSTUN := stuntest.ServeWithPacketListener(t, nettype.Std{})
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		_ = d.Close()
		stopSTUN()
	})
	const ip = "127.0.0.1"
	return &tailcfg.DERPMap{Regions: map[int]*tailcfg.DERPRegion{1: {
		RegionID: 1, RegionCode: "test",
		Nodes: []*tailcfg.DERPNode{{
			Name: "1", RegionID: 1, HostName: ip, IPv4: ip, IPv6: "none",
			DERPPort: srv.Listener.Addr().(*net.TCPAddr).Port, STUNPort: stunAddr.Port, STUNTestIP: ip,
			InsecureForTests: true,
		}},
	}}}
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

// InternetSrc is the address Funnel's ingress says its connections come
// from: a documentation address (RFC 5737), some client on the internet.
const InternetSrc = "203.0.113.7:51234"

// FunnelClient is an HTTP client from the internet to the tailnet's
// Funnel names, trusting the tailnet's certificates as a browser trusts
// Let's Encrypt's. ingress plays Tailscale's Funnel relay: on the tailnet
// every node may be one (control grants the ingress capability to all),
// and it hands each connection to the target node's peer API
// (POST /v0/ingress, then the TLS stream as is), exactly as Tailscale's
// relays do. A node that does not serve Funnel on the name refuses it,
// and the dial fails.
func (tn *Tailnet) FunnelClient(ingress *tsnet.Server) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return funnelDial(ctx, ingress, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: tn.Roots},
	}}
}

// funnelDial opens a Funnel connection to target (NAME:PORT) through
// ingress.
func funnelDial(ctx context.Context, ingress *tsnet.Server, target string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, err
	}
	lc, err := ingress.LocalClient()
	if err != nil {
		return nil, err
	}
	st, err := lc.Status(ctx)
	if err != nil {
		return nil, err
	}
	peerAPI := ""
	for _, p := range st.Peer {
		if strings.TrimSuffix(p.DNSName, ".") == host && len(p.PeerAPIURL) > 0 {
			peerAPI = p.PeerAPIURL[0]
		}
	}
	if peerAPI == "" {
		return nil, fmt.Errorf("funnel: no node %s with a peer API on the tailnet", host)
	}
	u, err := url.Parse(peerAPI)
	if err != nil {
		return nil, err
	}
	c, err := ingress.Dial(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	req := "POST /v0/ingress HTTP/1.1\r\nHost: peer\r\nTailscale-Ingress-Src: " + InternetSrc +
		"\r\nTailscale-Ingress-Target: " + target + "\r\nContent-Length: 0\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		_ = c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("funnel: the peer API of %s: %w", host, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		_ = c.Close()
		return nil, fmt.Errorf("funnel: %s refused the connection: %s", host, resp.Status)
	}
	return &bufferedConn{Conn: c, r: br}, nil
}

// bufferedConn reads what its reader buffered past the peer API's answer
// before the connection itself.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

// Read reads the buffered bytes first.
func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
