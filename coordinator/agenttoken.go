package coordinator

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// Per-run agent tokens (contract 7.3, docs/security.md "Agents are not the
// person"). Each adapter run and each warm ACP agent gets an agent token
// of its own, bound to its (thread, participant), in place of the
// coordinator's credential: the agent may then post as itself in its
// thread, and nothing else. A run's token is revoked once the run has
// ended and its reply is posted, a warm agent's when the agent is closed;
// a coordinator killed with SIGKILL leaves them to expire (their ttl).

const (
	// tokenMargin is added to a run's timeout for its token's ttl: the
	// adapter's kill grace and the time between minting and the start.
	tokenMargin = time.Minute
	// acpTokenLife is how long a warm ACP agent's token lives at least:
	// the agent process keeps one environment for its whole life, so its
	// token cannot be swapped, only the process restarted with a new one
	// (acquire does so when a turn could outlive it).
	acpTokenLife = time.Hour
	// tokenCallTimeout bounds one mint or revoke request.
	tokenCallTimeout = 5 * time.Second
	// spareLife is how long a pair's spare token waits for the pair's
	// next run: a conversation's next turn finds its token ready.
	spareLife = 10 * time.Minute
)

// spareCap bounds the spare tokens kept, one per pair at most: two per
// run that may run at once. With each running run's token and its
// correction run's, and the warm ACP agents', that stays within the
// bridge's cap of the live agent tokens one coordinator holds
// (agentbridge.AgentTokenCap of the capacity it registers,
// docs/security.md).
func spareCap(cfg *config.Config) int {
	return 2 * min(cfg.MaxConcurrency, agentbridge.MaxCoordinatorCapacity)
}

// agentToken is an agent token being minted, then held by a run or a warm
// agent. The zero secret means none: the coordinator has no credential to
// mint with (an open bridge), or minting failed; the agent then runs with
// no token at all, never with the coordinator's.
type agentToken struct {
	done    chan struct{}
	id      string
	secret  string
	expires time.Time
}

// wait returns the token's secret once it is minted ("" for none, and
// for a nil t).
func (t *agentToken) wait() string {
	if t == nil {
		return ""
	}
	<-t.done
	return t.secret
}

// lasts reports whether the token is still valid d from now (or there is
// none, which never expires).
func (t *agentToken) lasts(d time.Duration) bool {
	return t.wait() == "" || time.Now().Add(d).Before(t.expires)
}

// tokenKeeper mints and revokes the coordinator's agent tokens and lets
// shutdown wait for the revocations in flight.
//
// Minting is a write on the bridge, which the wake path should not wait
// for: a run's token is minted while the run is prepared, and once a run
// of an adapter's pair has ended the pair's next token is minted ahead (a
// spare, kept for spareLife), so that a conversation's next turn takes it
// ready. A spare lives its run's ttl plus spareLife; the spares are
// revoked at shutdown.
type tokenKeeper struct {
	bridge *client.Client
	config func() *config.Config
	log    *slog.Logger
	wg     sync.WaitGroup

	mu sync.Mutex
	// unsupported is set once the bridge answered that it makes no tokens
	// (a bridge older than contract 7.3), so that it is said once.
	unsupported bool
	spares      map[pairKey]*agentToken
	closed      bool
}

// mint starts minting an agent token for participant in thread, valid for
// ttl, and returns at once: the caller waits for it (agentToken.wait) only
// when it starts the agent, so that the request runs alongside the run's
// preparation instead of before it.
func (k *tokenKeeper) mint(ctx context.Context, thread, participant, name string, ttl time.Duration) *agentToken {
	t := &agentToken{done: make(chan struct{})}
	cfg := k.config()
	if cfg.BridgeToken == "" {
		// No credential to mint with: the bridge is open, and so is
		// everything an agent could do with a token.
		close(t.done)
		return t
	}
	go func() {
		defer close(t.done)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenCallTimeout)
		defer cancel()
		ttl = min(ttl, agentbridge.MaxAgentTokenTTL)
		asked := time.Now() // the bridge starts the ttl a little later
		nt, err := k.bridge.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeAgent, Name: name,
			Thread: thread, Participant: participant, TTLSeconds: int64(ttl / time.Second)})
		if err != nil {
			k.mintFailed(thread, participant, err)
			return
		}
		t.id, t.secret, t.expires = nt.ID, nt.Secret, asked.Add(ttl)
	}()
	return t
}

// mintFailed logs a token the bridge would not make: the agent runs
// without one (its reply is still posted by the coordinator).
func (k *tokenKeeper) mintFailed(thread, participant string, err error) {
	var ae *agentbridge.Error
	if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed) {
		k.mu.Lock()
		first := !k.unsupported
		k.unsupported = true
		k.mu.Unlock()
		if first {
			k.log.Warn("the bridge makes no agent tokens (it predates them): agents run with no bridge credential", "err", err)
		}
		return
	}
	k.log.Warn("could not get an agent token; the agent runs with no bridge credential",
		"thread", thread, "participant", participant, "err", err)
}

// revoke revokes t in the background once it is minted; wait waits for it.
func (k *tokenKeeper) revoke(t *agentToken) {
	if t == nil {
		return
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		if t.wait() == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), tokenCallTimeout)
		defer cancel()
		if _, err := k.bridge.RevokeToken(ctx, t.id); err != nil {
			// It still expires at its ttl.
			k.log.Warn("could not revoke an agent token; it expires on its own", "token", t.id, "expires", t.expires, "err", err)
		}
	}()
}

// take returns the pair's spare token if it still covers a run of need
// (one being minted does), else nil; a stale spare is revoked.
func (k *tokenKeeper) take(pair pairKey, need time.Duration) *agentToken {
	k.mu.Lock()
	t := k.spares[pair]
	delete(k.spares, pair)
	k.mu.Unlock()
	if t == nil {
		return nil
	}
	select {
	case <-t.done:
		if t.secret == "" || !t.lasts(need) {
			k.revoke(t)
			return nil
		}
	default: // being minted now: fresh
	}
	return t
}

// refill mints the pair's next token ahead, replacing its spare if any.
func (k *tokenKeeper) refill(ctx context.Context, cfg *config.Config, pair pairKey) {
	if cfg.BridgeToken == "" {
		return
	}
	t := k.mint(ctx, pair.thread, pair.participant, runTokenName(pair.participant), runTokenTTL(cfg)+spareLife)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		k.revoke(t)
		return
	}
	if old := k.spares[pair]; old != nil {
		k.revoke(old)
	}
	if k.spares == nil {
		k.spares = make(map[pairKey]*agentToken)
	}
	for p, old := range k.spares {
		if len(k.spares) < spareCap(cfg) {
			break
		}
		delete(k.spares, p)
		k.revoke(old)
	}
	k.spares[pair] = t
}

// close revokes the spares and waits for every revocation started:
// the coordinator's shutdown, once no run is left.
func (k *tokenKeeper) close() {
	k.mu.Lock()
	k.closed = true
	for p, t := range k.spares {
		delete(k.spares, p)
		k.revoke(t)
	}
	k.mu.Unlock()
	k.wg.Wait()
}

// runTokenTTL is an adapter run's token's ttl: the run's timeout and a
// margin (mint caps it at the bridge's 24 hours).
func runTokenTTL(cfg *config.Config) time.Duration { return cfg.AdapterTimeout + tokenMargin }

// acpTokenTTL is a warm ACP agent's token's ttl: acpTokenLife, or the idle
// lifetime and one turn when that is longer, so that an agent used now
// and then is not restarted for its token.
func acpTokenTTL(cfg *config.Config) time.Duration {
	return max(acpTokenLife, cfg.ACPIdle+cfg.AdapterTimeout+tokenMargin)
}

// acpTokenName is the name a warm ACP agent's token is listed under.
func acpTokenName(participant string) string { return tokenName("acp-", participant) }

// runTokenName is the name an adapter run's token is listed under.
func runTokenName(participant string) string { return tokenName("run-", participant) }

// tokenName is prefix and participant, within a token name's 128
// characters (participant ids are ASCII).
func tokenName(prefix, participant string) string {
	name := prefix + participant
	return name[:min(len(name), 128)]
}

// noAgentToken is BRIDGE_TOKEN for an agent that has no token of its own
// (an open bridge, or the bridge would not make one). It is set all the
// same, so that an agent-bridge command inside the agent does not look
// for a token elsewhere and find the person's (the token file next to the
// bridge's database); a bridge with tokens refuses it (401), an open one
// takes it as no token.
const noAgentToken = "none"

// agentEnv is what an agent's environment gets for its credential: its
// token, or noAgentToken, as BRIDGE_TOKEN.
func agentEnv(secret string) []string {
	return []string{adapters.EnvToken + "=" + cmp.Or(secret, noAgentToken)}
}

// runToken is the token of one adapter run of inv: the pair's spare, else
// one minted now (its wait is for whoever starts the run); nil for an ACP
// agent, whose warm process holds a token of its own (acp.Host.Token).
func (c *Coordinator) runToken(ctx context.Context, cfg *config.Config, inv ledger.Invocation) *agentToken {
	if isACP(cfg, inv) {
		return nil
	}
	if t := c.tokens.take(pairKey{inv.Thread, inv.Participant}, runTokenTTL(cfg)); t != nil {
		return t
	}
	return c.tokens.mint(ctx, inv.Thread, inv.Participant, runTokenName(inv.Participant), runTokenTTL(cfg))
}

// nextRunToken mints the pair's next token ahead of its next run (refill),
// once a run of inv has ended; nothing for an ACP agent.
func (c *Coordinator) nextRunToken(ctx context.Context, cfg *config.Config, inv ledger.Invocation) {
	if !isACP(cfg, inv) {
		c.tokens.refill(ctx, cfg, pairKey{inv.Thread, inv.Participant})
	}
}

// isACP reports whether inv's agent is an ACP agent.
func isACP(cfg *config.Config, inv ledger.Invocation) bool {
	entry, ok := cfg.Agents[inv.Agent]
	return ok && len(entry.ACP) > 0
}
