package status

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
)

// TestStatusCredentialTTL: the status API trusts the bridge's answer about
// a token until it is credentialTTL old on its clock (moved here, no
// sleeps), then asks again and refuses a token revoked meanwhile.
// credentialTTL is at most half the contract's second; the bridge's own
// cache holds the other half (bridge's TestRevokedWithinASecond).
func TestStatusCredentialTTL(t *testing.T) {
	if credentialTTL > 500*time.Millisecond {
		t.Fatalf("credentialTTL = %s, want at most 500ms", credentialTTL)
	}
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "bridge.db"), sqlite.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	srv, err := bridge.NewServer(st, bridge.Options{Addr: "127.0.0.1:0", RequireCredential: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	mint := func(scope string) (agentbridge.Token, string) {
		secret, err := agentbridge.NewTokenSecret()
		if err != nil {
			t.Fatal(err)
		}
		tok, err := st.CreateToken(ctx, agentbridge.TokenInput{Scope: scope, Name: scope, CreatedBy: "test"}, agentbridge.HashToken(secret))
		if err != nil {
			t.Fatal(err)
		}
		return tok, secret
	}
	_, person := mint(agentbridge.ScopePerson)
	read, readSecret := mint(agentbridge.ScopeRead)

	var mu sync.Mutex
	now := time.Now()
	move := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	creds := &bridgeCredentials{url: srv.URL(), now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}}
	if _, err := creds.resolve(ctx, readSecret); err != nil {
		t.Fatalf("a read token: %v", err)
	}
	// Revoked through the bridge, which forgets it at once: from now on
	// only the status API's cache holds it.
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, srv.URL()+"/auth/tokens/"+read.ID, nil)
	req.Header.Set("Authorization", "Bearer "+person)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %s", resp.Status)
	}
	move(credentialTTL - time.Millisecond)
	if _, err := creds.resolve(ctx, readSecret); err != nil {
		t.Fatalf("within the cache's life: %v, want the cached answer", err)
	}
	move(time.Millisecond)
	if _, err := creds.resolve(ctx, readSecret); agentbridge.ErrorCode(err) != agentbridge.ECodeUnauthorized {
		t.Errorf("%s after the answer: %v, want unauthorized", credentialTTL, err)
	}
}
