package bridge

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/notify"
)

// TestServeAnotherListener: a listener handed to Serve (the tailnet's, in
// serve --tailnet) answers with the same gate: a token is needed, its
// allowed name passes and another is refused; login and pairing links name
// the public address; Close closes it with the main listener.
func TestServeAnotherListener(t *testing.T) {
	t.Parallel()
	const public = "https://agent-bridge.tail1234.ts.net"
	ts := newTestServer(t, Options{RequireCredential: true, AllowedHosts: []string{"agent-bridge.tail1234.ts.net"},
		Notify: notify.Options{BaseURL: func() string { return public }}})
	secret, err := agentbridge.NewTokenSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.store.CreateToken(context.Background(), agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: "owner", CreatedBy: "serve"}, agentbridge.HashToken(secret)); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.srv.Serve(ln, "the test's"); err != nil {
		t.Fatal(err)
	}
	other := &testServer{t: t, srv: ts.srv, store: ts.store, url: "http://" + ln.Addr().String()}
	if a := other.do("GET", "/threads", ""); a.status != http.StatusUnauthorized {
		t.Errorf("GET /threads on the other listener without a token = %d, want 401", a.status)
	}
	other.token = secret
	other.must(200, "GET", "/threads", "", "Host: agent-bridge.tail1234.ts.net")
	if a := other.do("GET", "/threads", "", "Host: evil.example"); a.status == http.StatusOK {
		t.Errorf("GET /threads with Host evil.example = %d, want a refusal", a.status)
	}
	link := other.must(200, "POST", "/auth/login-links", "").obj()
	if u, _ := link["url"].(string); !strings.HasPrefix(u, public+"/ui/login#code=") || link["path"] == nil {
		t.Errorf("login link = %v, want its url at %s", link, public)
	}
	pair, err := ts.srv.NewPairLink(context.Background(), " ")
	if err != nil || pair.Name != "phone" || pair.URL != public+"/ui/#pair="+pair.Code {
		t.Errorf("NewPairLink = %+v, %v; want a link named phone at %s", pair, err, public)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the other listener still takes connections after Close")
	}
}
