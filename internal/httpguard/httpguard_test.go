package httpguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCheckListen(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr, token string
		insecure    bool
	}{
		{"127.0.0.1:5112", "", false},
		{"[::1]:0", "", false},
		{"localhost:0", "", false},
		{"0.0.0.0:5112", "", true},
		{":5112", "", true},
		{"[::]:0", "", true},
		{"192.168.1.5:5112", "", true},
		{"0.0.0.0:5112", "t", false},
	} {
		err := CheckListen(c.addr, c.token, "a token")
		if got := errors.Is(err, ErrInsecureAddr); got != c.insecure {
			t.Errorf("CheckListen(%q, %q) = %v, want insecure %v", c.addr, c.token, err, c.insecure)
		}
	}
	if err := CheckListen("nonsense", "", "a token"); err == nil || errors.Is(err, ErrInsecureAddr) {
		t.Errorf("CheckListen(nonsense) = %v, want an address error", err)
	}
}

// TestOriginIsTheListenersOwn checks the own-origin rule: a name the
// listener answers to, on the port the connection arrived at (here
// 5112), whatever the Host header says.
func TestOriginIsTheListenersOwn(t *testing.T) {
	t.Parallel()
	g, err := New(Options{AllowedHosts: []string{"bridge.lan"}, CORSOrigins: []string{"https://app.example"}})
	if err != nil {
		t.Fatal(err)
	}
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5112}
	for _, c := range []struct {
		origin, host string
		ok           bool
	}{
		{"http://127.0.0.1:5112", "127.0.0.1:5112", true},
		{"http://localhost:5112", "127.0.0.1:5112", true},
		{"http://[::1]:5112", "127.0.0.1:5112", true},
		{"http://bridge.lan:5112", "bridge.lan:5112", true},
		{"https://app.example", "127.0.0.1:5112", true},
		{"http://127.0.0.1:5111", "127.0.0.1:5112", false},
		// The Host header is the sender's: matching it proves nothing.
		{"http://127.0.0.1:5111", "127.0.0.1:5111", false},
		{"http://evil.example:5112", "evil.example:5112", false},
		{"http://bridge.lan", "bridge.lan", false}, // port 80, not this listener's
		{"null", "127.0.0.1:5112", false},
		{"http://127.0.0.1:5112/path", "127.0.0.1:5112", false},
	} {
		r := httptest.NewRequest("POST", "/", nil)
		r.Host = c.host
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(local)))
		if got := g.originAllowed(c.origin, r); got != c.ok {
			t.Errorf("origin %q with Host %q: allowed %v, want %v", c.origin, c.host, got, c.ok)
		}
	}
}
