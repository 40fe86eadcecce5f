package status

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
)

// NewGuard builds the status API's gate, the bridge's own
// (internal/httpguard): Host loopback or status_allowed_hosts, Origin on
// the cancel, and a token: the one the coordinator uses with the bridge
// (bridge_token, else BRIDGE_TOKEN), or any token the bridge says is a
// person's or, for reading only, a read token's (bridgeCredentials), so
// that the runs, their trigger excerpts and the cancel are as closed as
// the bridge's own data. A non-loopback status_addr without a token is a
// *config.Error.
func NewGuard(cfg config.Config, timeout time.Duration) (*httpguard.Guard, error) {
	if err := CheckListen(cfg); err != nil {
		return nil, err
	}
	creds := &bridgeCredentials{url: cfg.BridgeURL}
	g, err := httpguard.New(httpguard.Options{
		Resolve:        creds.resolve,
		Token:          cfg.BridgeToken,
		AllowedHosts:   cfg.StatusAllowedHosts,
		ListenAddr:     cfg.StatusAddr,
		Open:           Open,
		TokenHint:      TokenHint,
		HostHint:       "list it in the coordinator config's status_allowed_hosts",
		OriginHint:     "only the coordinator's own dashboard may",
		RequestTimeout: timeout,
	})
	if err != nil {
		return nil, &config.Error{Key: "status_allowed_hosts", Err: err}
	}
	return g, nil
}

// CheckListen applies the listen-address rule to status_addr on its own,
// so that a command can refuse it before it starts anything (NewGuard
// applies it too): a non-loopback status_addr needs a token, which is the
// one the coordinator uses with the bridge. The error is a *config.Error
// naming status_addr; an empty status_addr (no status API) passes.
func CheckListen(cfg config.Config) error {
	if cfg.StatusAddr == "" {
		return nil
	}
	if err := httpguard.CheckListen(cfg.StatusAddr, cfg.BridgeToken, TokenHint); err != nil {
		return &config.Error{Key: "status_addr", Err: err}
	}
	return nil
}

// credentialTTL bounds how long the status API trusts the bridge's answer
// about a token: a token revoked on the bridge is refused here within it.
// The bridge trusts its own lookups as long again (bridge.credentialTTL),
// so a revocation reaches the status API within the contract's 1 s.
const credentialTTL = 500 * time.Millisecond

// maxCachedCredentials bounds the cache of the bridge's answers; only
// tokens the bridge accepted are kept, so wrong ones cannot grow it.
const maxCachedCredentials = 1024

// bridgeCredentials resolves a token shown to the status API by asking the
// bridge whose it is (GET /auth/whoami), so that every person token (the
// browser's login-link cookie included) and read token opens the status
// API as it opens the bridge. Answers are kept for at most credentialTTL.
type bridgeCredentials struct {
	url string
	// now is the cache's clock (time.Now when nil; tests move it).
	now   func() time.Time
	mu    sync.Mutex
	cache map[[sha256.Size]byte]cachedCredential
}

// cachedCredential is the bridge's answer about one token, and when.
type cachedCredential struct {
	cred httpguard.Credential
	at   time.Time
}

// resolve is the gate's Resolve: a person or read credential, or
// unauthorized (an unknown, revoked or expired token, or another scope);
// a bridge that does not answer is unavailable.
func (b *bridgeCredentials) resolve(ctx context.Context, token string) (httpguard.Credential, error) {
	h := sha256.Sum256([]byte(token))
	now := time.Now()
	if b.now != nil {
		now = b.now()
	}
	b.mu.Lock()
	e, ok := b.cache[h]
	b.mu.Unlock()
	if ok && now.Sub(e.at) < credentialTTL {
		return e.cred, nil
	}
	cred, err := b.whoami(ctx, token)
	if err != nil {
		return httpguard.Credential{}, err
	}
	if cred.Scope != agentbridge.ScopePerson && cred.Scope != agentbridge.ScopeRead {
		return httpguard.Credential{}, agentbridge.Errorf(agentbridge.ECodeUnauthorized,
			"A %s token does not open the coordinator's status API; a person token does, and a read token for reading.", cred.Scope)
	}
	b.mu.Lock()
	if b.cache == nil || len(b.cache) >= maxCachedCredentials {
		b.cache = map[[sha256.Size]byte]cachedCredential{}
	}
	b.cache[h] = cachedCredential{cred: cred, at: now}
	b.mu.Unlock()
	return cred, nil
}

// whoami asks the bridge for the credential of token.
func (b *bridgeCredentials) whoami(ctx context.Context, token string) (httpguard.Credential, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(b.url, "/")+"/auth/whoami", nil)
	if err != nil {
		return httpguard.Credential{}, fmt.Errorf("ask the bridge whose token this is: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return httpguard.Credential{}, agentbridge.Errorf(agentbridge.ECodeUnavailable, "The bridge, which checks tokens, does not answer.")
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return httpguard.Credential{}, agentbridge.Errorf(agentbridge.ECodeUnauthorized, "This token is not valid on the bridge: it is unknown, revoked or expired.")
	case resp.StatusCode != http.StatusOK:
		return httpguard.Credential{}, agentbridge.Errorf(agentbridge.ECodeUnavailable, "The bridge, which checks tokens, answered %s.", resp.Status)
	}
	var who agentbridge.Whoami
	if err := json.Unmarshal(body, &who); err != nil {
		return httpguard.Credential{}, fmt.Errorf("decode the bridge's whoami: %w", err)
	}
	return who.Credential, nil
}

// readOnlyUnlessPerson refuses a state-changing request (the cancel)
// whose credential is not a person's: a read token reads.
func readOnlyUnlessPerson(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := httpguard.CredentialFrom(r.Context()); ok && c.Scope != agentbridge.ScopePerson && httpguard.StateChanging(r.Method) && r.URL.Path != "/auth/login" {
			httpguard.WriteError(w, r, agentbridge.Errorf(agentbridge.ECodeForbiddenScope,
				"A %s token reads the status API; cancelling a run needs a person token.", c.Scope))
			return
		}
		next.ServeHTTP(w, r)
	})
}
