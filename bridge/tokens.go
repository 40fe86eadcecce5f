package bridge

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// credentialTTL is how long a looked-up token is trusted before the store
// is asked again: the bound on how late a revocation made through another
// bridge process on the same database is seen (this process's own
// revocations drop the entry at once). The coordinator's status API keeps
// the bridge's answers as long again, so a revocation reaches both within
// the contract's 1 s.
const credentialTTL = 500 * time.Millisecond

// maxCachedCredentials bounds the cache; it holds only tokens that were
// found, so a flood of wrong tokens cannot grow it.
const maxCachedCredentials = 4096

// credentialCache remembers the tokens found in the store for at most
// credentialTTL, so that a burst of requests with one token asks the
// store once.
type credentialCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]cachedToken
}

// cachedToken is a token as the store answered, and when it did.
type cachedToken struct {
	token agentbridge.Token
	at    time.Time
}

// get returns the cached token for hash if it was read less than
// credentialTTL before now.
func (c *credentialCache) get(hash [sha256.Size]byte, now time.Time) (agentbridge.Token, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok || now.Sub(e.at) >= credentialTTL {
		return agentbridge.Token{}, false
	}
	return e.token, true
}

// put remembers t under hash, read at now.
func (c *credentialCache) put(hash [sha256.Size]byte, t agentbridge.Token, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxCachedCredentials {
		c.entries = map[[sha256.Size]byte]cachedToken{}
	}
	c.entries[hash] = cachedToken{token: t, at: now}
}

// drop forgets token id, which was just revoked.
func (c *credentialCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, e := range c.entries {
		if e.token.ID == id {
			delete(c.entries, h)
		}
	}
}

// DefaultTokenPruneInterval is how often the server deletes old revoked
// and expired tokens: the coordinator makes an agent token per run, so
// without it the tokens table grows by a row a run for ever.
const DefaultTokenPruneInterval = time.Hour

// pruneTokens deletes the tokens revoked or expired more than
// agentbridge.TokenRetention ago, at once and then every
// TokenPruneInterval, until ctx ends. Recent ones stay, so that tokens
// list --all still shows a run's token for a day. A failure is logged
// and tried again at the next tick.
func (s *Server) pruneTokens(ctx context.Context) {
	tick := time.NewTicker(s.opts.TokenPruneInterval)
	defer tick.Stop()
	for {
		n, err := s.store.PruneTokens(ctx, s.now().Add(-agentbridge.TokenRetention))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("prune tokens", "err", err)
		case n > 0:
			s.log.Info("pruned old tokens", "deleted", n, "retention", agentbridge.TokenRetention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// resolve is the gate's Resolve: the token a request presents, looked up
// by its hash (through the cache), as a credential; unknown, revoked or
// expired is unauthorized, with field "token" and a sentence that says
// which, so that a browser whose sign-in was revoked can say so and how
// to get a new one (the holder of a revoked secret learns nothing else).
func (s *Server) resolve(ctx context.Context, secret string) (httpguard.Credential, error) {
	refuse := agentbridge.FieldErrorf(agentbridge.ECodeUnauthorized, "token", "This token is not known here: it was never made by this bridge, or was removed.")
	hash := sha256.Sum256([]byte(secret))
	now := s.now()
	t, ok := s.credCache.get(hash, now)
	if !ok {
		var err error
		t, ok, err = s.store.TokenByHash(ctx, hash[:])
		if err != nil {
			return httpguard.Credential{}, err
		}
		if !ok {
			return httpguard.Credential{}, refuse
		}
		s.credCache.put(hash, t, now)
	}
	if !t.Valid(now) {
		return httpguard.Credential{}, invalidToken(t)
	}
	return credentialOf(t), nil
}

// invalidToken is the refusal of a stored token that is revoked or
// expired.
func invalidToken(t agentbridge.Token) error {
	if t.RevokedAt != "" {
		return agentbridge.FieldErrorf(agentbridge.ECodeUnauthorized, "token",
			"This token (%q) was revoked at %s: it no longer works here.", t.Name, t.RevokedAt)
	}
	return agentbridge.FieldErrorf(agentbridge.ECodeUnauthorized, "token",
		"This token (%q) expired at %s: it no longer works here.", t.Name, t.ExpiresAt)
}

// credentialOf is the credential a stored token stands for.
func credentialOf(t agentbridge.Token) httpguard.Credential {
	return httpguard.Credential{ID: t.ID, Name: t.Name, Scope: t.Scope, Thread: t.Thread, Participant: t.Participant, Agents: t.Agents}
}

// credential returns the request's credential; every route but the open
// ones has one (the gate refuses a request without).
func credential(r *http.Request) httpguard.Credential {
	c, _ := httpguard.CredentialFrom(r.Context())
	return c
}

// tokenCreated is the answer of POST /auth/tokens: the token, and its
// secret, shown this once.
type tokenCreated struct {
	agentbridge.Token
	Secret string `json:"token"`
}

// handleTokensPost creates a token. A person may create any; a
// coordinator only an agent token bound to a participant it may write as.
func (s *Server) handleTokensPost(w http.ResponseWriter, r *http.Request) error {
	ts := s.store
	cred := credential(r)
	if cred.Scope != agentbridge.ScopePerson && cred.Scope != agentbridge.ScopeCoordinator {
		return agentbridge.Errorf(agentbridge.ECodeForbiddenScope, "A %s token may not create tokens; a person token may, and a coordinator token may create agent tokens.", cred.Scope)
	}
	var in agentbridge.TokenInput
	if err := s.decodeStrict(w, r, &in, []string{"scope", "name", "thread", "participant", "ttl_s", "agents"}, false); err != nil {
		return err
	}
	if err := in.Validate(); err != nil {
		return err
	}
	if cred.Scope == agentbridge.ScopeCoordinator {
		if in.Scope != agentbridge.ScopeAgent {
			return agentbridge.FieldErrorf(agentbridge.ECodeForbiddenScope, "scope", "A coordinator token may create agent tokens only, not %s tokens.", in.Scope)
		}
		if err := s.mayWriteAs(r.Context(), cred, in.Thread, in.Participant); err != nil {
			return err
		}
		var err error
		if in.MaxLive, err = s.agentTokenCap(r.Context(), cred); err != nil {
			return err
		}
	}
	if in.Thread != "" {
		if _, err := s.store.Thread(r.Context(), in.Thread); err != nil {
			return storeErr("create token", err)
		}
	}
	secret, err := agentbridge.NewTokenSecret()
	if err != nil {
		return err
	}
	in.CreatedBy = cred.ID
	t, err := ts.CreateToken(r.Context(), in, agentbridge.HashToken(secret))
	if err != nil {
		return storeErr("create token", err)
	}
	s.log.Info("token created", "token", t.ID, "name", t.Name, "scope", t.Scope, "thread", t.Thread, "participant", t.Participant, "by", cred.ID)
	httpjson.Write(w, http.StatusOK, tokenCreated{Token: t, Secret: secret})
	return nil
}

// agentTokenCap is how many live agent tokens coordinator credential cred
// may hold (contract 8.3): 4 × the capacity its coordinator id registered
// + 16 (16 with no registration yet).
func (s *Server) agentTokenCap(ctx context.Context, cred httpguard.Credential) (int, error) {
	list, err := s.registrations(ctx)
	if err != nil {
		return 0, err
	}
	capacity := 0
	if reg, ok := storecore.Registration(list, coordinatorIDOf(cred)); ok {
		capacity = reg.Capacity
	}
	return agentbridge.AgentTokenCap(capacity), nil
}

// handleTokensGet lists the tokens, never their secrets (person only), a
// page at a time (docs/api.md "Tokens").
func (s *Server) handleTokensGet(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, queryTokens)
	if err != nil {
		return err
	}
	ts := s.store
	if cred := credential(r); cred.Scope != agentbridge.ScopePerson {
		return agentbridge.Errorf(agentbridge.ECodeForbiddenScope, "Only a person token may list tokens; this one is a %s token.", cred.Scope)
	}
	limit := int(q.int("limit", agentbridge.DefaultTokensPage))
	list, pos, err := ts.TokensAfter(r.Context(), q.int("after", 0), limit+1)
	if err != nil {
		return storeErr("list tokens", err)
	}
	page := agentbridge.TokensPage{Tokens: list}
	if len(list) > limit {
		page.Tokens, page.Next = list[:limit], pos[limit-1]
	}
	httpjson.Write(w, http.StatusOK, page)
	return nil
}

// handleTokenDelete revokes a token. A person may revoke any; a
// coordinator only the agent tokens it created.
func (s *Server) handleTokenDelete(w http.ResponseWriter, r *http.Request) error {
	ts := s.store
	cred := credential(r)
	id := chi.URLParam(r, "id")
	switch cred.Scope {
	case agentbridge.ScopePerson:
	case agentbridge.ScopeCoordinator:
		if err := s.coordinatorMayRevoke(r.Context(), ts, cred, id); err != nil {
			return err
		}
	default:
		return agentbridge.Errorf(agentbridge.ECodeForbiddenScope, "A %s token may not revoke tokens; a person token may, and a coordinator token may revoke the agent tokens it made.", cred.Scope)
	}
	t, err := ts.RevokeToken(r.Context(), id)
	if err != nil {
		return storeErr("revoke token", err)
	}
	s.credCache.drop(t.ID)
	s.log.Info("token revoked", "token", t.ID, "name", t.Name, "scope", t.Scope, "by", cred.ID)
	httpjson.Write(w, http.StatusOK, t)
	return nil
}

// coordinatorMayRevoke checks that token id is an agent token cred made.
// An id that names no such token is token_not_found, so that a coordinator
// learns nothing of the others.
func (s *Server) coordinatorMayRevoke(ctx context.Context, ts agentbridge.TokenStore, cred httpguard.Credential, id string) error {
	t, ok, err := ts.TokenByID(ctx, id)
	if err != nil {
		return storeErr("revoke token", err)
	}
	if ok && t.Scope == agentbridge.ScopeAgent && t.CreatedBy == cred.ID {
		return nil
	}
	return agentbridge.TokenNotFound(id)
}

// handleWhoami answers the caller's credential: what a status API or a
// script checks a token with.
func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r, queryNone); err != nil {
		return err
	}
	cred := credential(r)
	httpjson.Write(w, http.StatusOK, agentbridge.Whoami{Credential: cred, Open: s.gate.Open(), Sender: s.senderOf(cred)})
	return nil
}

// senderOf is the participant id a credential writes as unless it says
// otherwise: a person token named after one of the bridge's humans writes
// as that human, any other person token as the first human (a paired
// phone is the person); an agent or coordinator token as the participant
// it is bound to; a read token as nobody.
func (s *Server) senderOf(cred httpguard.Credential) string {
	switch cred.Scope {
	case agentbridge.ScopePerson:
		if s.opts.Humans.Has(cred.Name) {
			return cred.Name
		}
		if len(s.opts.Humans) > 0 {
			return s.opts.Humans[0]
		}
	case agentbridge.ScopeAgent, agentbridge.ScopeCoordinator:
		return cred.Participant
	}
	return ""
}

// LoginCodeTTL is how long a login link works (it works once).
const LoginCodeTTL = 10 * time.Minute

// maxLoginCodes bounds the login codes waiting to be used.
const maxLoginCodes = 64

// loginCodes are the one-time codes of login links not used yet, by the
// SHA-256 of the code, with their expiry.
type loginCodes struct {
	mu    sync.Mutex
	codes map[[sha256.Size]byte]time.Time
}

// NewLoginCode returns a one-time code for a login link
// (/ui/login#code=…, what up prints): POST /auth/login {"code"} exchanges
// it, once and within LoginCodeTTL, for the cookie of a new person token
// named for the browser login. The code is kept only in this process.
func (s *Server) NewLoginCode() (string, error) {
	code, err := agentbridge.NewTokenSecret()
	if err != nil {
		return "", err
	}
	now := time.Now()
	s.logins.mu.Lock()
	defer s.logins.mu.Unlock()
	if s.logins.codes == nil {
		s.logins.codes = map[[sha256.Size]byte]time.Time{}
	}
	for h, exp := range s.logins.codes {
		if !now.Before(exp) {
			delete(s.logins.codes, h)
		}
	}
	if len(s.logins.codes) >= maxLoginCodes {
		// A person asked for many links: their answer, not the bridge's
		// failure (429, not logged as an error).
		return "", agentbridge.Errorf(agentbridge.ECodeTooMany,
			"%d login links are waiting to be used; use one, or wait %s for them to lapse.", maxLoginCodes, LoginCodeTTL)
	}
	s.logins.codes[sha256.Sum256([]byte(code))] = now.Add(LoginCodeTTL)
	return code, nil
}

// redeemLoginCode uses up a login code and makes the person token whose
// secret becomes the browser's cookie. A code that is unknown, used or
// expired is unauthorized.
func (s *Server) redeemLoginCode(ctx context.Context, code string) (agentbridge.Token, string, error) {
	h := sha256.Sum256([]byte(code))
	now := time.Now()
	s.logins.mu.Lock()
	exp, ok := s.logins.codes[h]
	delete(s.logins.codes, h)
	s.logins.mu.Unlock()
	if !ok || !now.Before(exp) {
		return agentbridge.Token{}, "", agentbridge.FieldErrorf(agentbridge.ECodeUnauthorized, "code",
			"This login link is not valid: it was used already or is older than %s. Run agent-bridge login-link for a new one, or paste the token.", LoginCodeTTL)
	}
	secret, err := agentbridge.NewTokenSecret()
	if err != nil {
		return agentbridge.Token{}, "", err
	}
	in := agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: "browser-" + now.UTC().Format("20060102-150405"), CreatedBy: "login-link"}
	t, err := s.store.CreateToken(ctx, in, agentbridge.HashToken(secret))
	if err != nil {
		return agentbridge.Token{}, "", storeErr("create login token", err)
	}
	return t, secret, nil
}

// handleLoginLinkPost makes a one-time login link (NewLoginCode) for a
// person token's holder to open in a browser: what up prints, for a
// bridge started with serve.
func (s *Server) handleLoginLinkPost(w http.ResponseWriter, r *http.Request) error {
	if cred := credential(r); cred.Scope != agentbridge.ScopePerson {
		return agentbridge.Errorf(agentbridge.ECodeForbiddenScope, "Only a person token may make a login link; this one is a %s token.", cred.Scope)
	}
	code, err := s.NewLoginCode()
	if err != nil {
		return err
	}
	path := "/ui/login#code=" + code
	httpjson.Write(w, http.StatusOK, map[string]any{"code": code, "path": path, "url": strings.TrimRight(s.publicURL(), "/") + path,
		"expires_in_s": int(LoginCodeTTL / time.Second)})
	return nil
}
