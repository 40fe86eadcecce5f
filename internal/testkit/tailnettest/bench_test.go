package tailnettest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"tailscale.com/envknob"

	"github.com/agent-bridge/agent-bridge/internal/testkit/tailnettest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// BenchmarkRequest times one small HTTP request and its answer, with the
// connection kept: plain HTTP on loopback (what this machine's commands
// use), and HTTPS between two tsnet nodes of one machine (what a phone on
// the tailnet pays at the least: WireGuard in userspace, each node's
// netstack, and TLS on the tailnet's certificate), once the nodes talk
// directly rather than through DERP.
//
//	go test -run '^$' -bench BenchmarkRequest -benchtime 2000x ./internal/testkit/tailnettest/
func BenchmarkRequest(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	b.Run("loopback-http", func(b *testing.B) {
		srv := httptest.NewServer(handler)
		defer srv.Close()
		benchGet(b, srv.Client(), srv.URL+"/")
	})
	b.Run("tailnet-https", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		tn := tailnettest.New(b)
		for _, kv := range tn.Env() {
			k, v, _ := strings.Cut(kv, "=")
			envknob.SetenvForTest(b, k, v)
		}
		server := tn.Node(b, ctx, "bench-server")
		ln, err := server.ListenTLS("tcp", ":443")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: handler}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		phone := tn.Node(b, ctx, "bench-phone")
		c := tn.Client(phone)
		url := "https://bench-server." + tailnettest.Domain + "/"
		lc, err := phone.LocalClient()
		if err != nil {
			b.Fatal(err)
		}
		// The first packets go through DERP while the nodes find their
		// direct path: wait for it, asking meanwhile.
		testutil.WaitFor(b, 2*time.Minute, "a direct path between the nodes", func() bool {
			if resp, err := c.Get(url); err == nil {
				resp.Body.Close()
			}
			st, err := lc.Status(ctx)
			if err != nil {
				return false
			}
			for _, p := range st.Peer {
				if p.HostName == "bench-server" && p.CurAddr != "" {
					return true
				}
			}
			return false
		})
		benchGet(b, c, url)
	})
}

// benchGet times b.N GETs of url, each read whole, on one kept connection.
func benchGet(b *testing.B, c *http.Client, url string) {
	b.Helper()
	get := func() {
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s = %s", url, resp.Status)
		}
	}
	get()
	b.ResetTimer()
	for range b.N {
		get()
	}
}
