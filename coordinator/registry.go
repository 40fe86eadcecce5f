package coordinator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// The registrar (contract 7.1) tells the bridge what this coordinator
// serves: it registers at start, renews the registration every third of
// claim_ttl_s (the heartbeat), and removes it when the coordinator stops.
// Each heartbeat also reads back the bridge's list of coordinators, which
// says whether some other live coordinator serves a participant this one
// does not: the receipt reporter then leaves that participant to it
// (receipts.go).

// registryDeregister bounds the removal of the registration at shutdown.
const registryDeregister = 2 * time.Second

// registrar is owned by its run goroutine, except what mu guards.
type registrar struct {
	c        *Coordinator
	instance string
	version  string

	mu sync.Mutex
	// list is the bridge's coordinators as of the last heartbeat; known
	// is false until one was read.
	list  []agentbridge.CoordinatorInfo
	known bool
	// servedEver is every agent name (with its client) any registration
	// ever listed, as of the last list read.
	servedEver map[string]string
	// warned holds the other instances already warned about as
	// duplicates, and unsupported is set once a bridge without
	// registrations was logged.
	warned      map[string]bool
	unsupported bool
	// failing is set while heartbeats fail, so that an outage is logged
	// at warn level once.
	failing bool
	// registered is set once a registration succeeded: until then the
	// bridge refuses this coordinator's writes as its agents, so run
	// tries again every registryRetry rather than every third of the ttl.
	registered bool
}

func newRegistrar(c *Coordinator, version string) *registrar {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return &registrar{c: c, instance: hex.EncodeToString(b[:]), version: version, warned: map[string]bool{}}
}

// registration is what the coordinator registers, from cfg: every agent
// entry with its client and kind.
func (g *registrar) registration(cfg *config.Config) agentbridge.Registration {
	host := hostName(cfg)
	agents := make([]agentbridge.CoordinatorAgent, 0, len(cfg.Agents))
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		a := cfg.Agents[name]
		kind := agentbridge.AgentKindAdapter
		if len(a.ACP) > 0 {
			kind = agentbridge.AgentKindACP
		}
		client := a.Client
		if client == "" && a.Profile != nil {
			client = a.Profile.Client
		}
		agents = append(agents, agentbridge.CoordinatorAgent{Name: name, Client: client, Kind: kind})
	}
	return agentbridge.Registration{
		ID: cfg.CoordinatorID, Instance: g.instance, Host: host, Agents: agents,
		Version: g.version, Capacity: cfg.MaxConcurrency, StatusURL: g.c.StatusURL(),
		TTLMillis: cfg.ClaimTTL.Milliseconds(),
	}
}

// first registers once, waiting at most registryFirst.
func (g *registrar) first(ctx context.Context) {
	fctx, cancel := context.WithTimeout(ctx, registryFirst)
	defer cancel()
	g.beat(fctx)
}

// reconfigure registers what cfg, a config about to take effect, serves,
// waiting at most registryFirst: the bridge lets a coordinator token write
// only as the agents its registration lists, so an agent added by a
// reload is registered before the scheduler may run it.
func (g *registrar) reconfigure(cfg *config.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), registryFirst)
	defer cancel()
	g.beatWith(ctx, cfg)
}

// beat registers (or renews the registration) of the config in effect
// and reads the bridge's list of coordinators back.
func (g *registrar) beat(ctx context.Context) {
	g.beatWith(ctx, g.c.cfg.Load())
}

// beatWith is beat for cfg.
func (g *registrar) beatWith(ctx context.Context, cfg *config.Config) {
	reg := g.registration(cfg)
	res, err := g.c.bridge.RegisterCoordinator(ctx, reg)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if bridgeStatus(err, 404) || bridgeStatus(err, 405) {
			g.mu.Lock()
			first := !g.unsupported
			g.unsupported = true
			g.mu.Unlock()
			if first {
				g.c.log.Warn("the bridge keeps no coordinator registrations (an older bridge?): agents served elsewhere cannot be told apart", "err", err)
			}
			return
		}
		// Once per outage: the follow loop says the rest. A refusal (a
		// token bound to another coordinator id, a read token) is no
		// outage but a mistake in the config, said as an error: until it
		// is mended this coordinator answers nothing.
		level, msg := slog.LevelWarn, "cannot register with the bridge; trying again at the next heartbeat"
		if refusedForGood(err) {
			level, msg = slog.LevelError, "the bridge refuses this coordinator's registration, so it answers nothing: give it a coordinator token made for its coordinator_id (agent-bridge tokens add --scope coordinator --name <coordinator_id>); trying again at the next heartbeat"
		}
		g.mu.Lock()
		if g.failing {
			level = slog.LevelDebug
		}
		g.failing = true
		g.mu.Unlock()
		g.c.log.Log(ctx, level, msg, "coordinator_id", reg.ID, "err", err)
		return
	}
	g.mu.Lock()
	g.failing, g.registered = false, true
	g.mu.Unlock()
	if d := res.Duplicate; d != nil && liveDuplicate(*d, g.instance) {
		g.warnDuplicate(*d)
	}
	list, err := g.c.bridge.Coordinators(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.c.log.Warn("cannot read the bridge's coordinators", "err", err)
		}
		return
	}
	for _, other := range list.Coordinators {
		if other.ID == reg.ID && liveDuplicate(other, g.instance) {
			g.warnDuplicate(other)
		}
	}
	g.keep(list)
}

// keep stores a list of coordinators just read.
func (g *registrar) keep(list agentbridge.CoordinatorsResponse) {
	g.mu.Lock()
	g.list, g.servedEver, g.known = list.Coordinators, list.ServedEver, true
	g.mu.Unlock()
}

// neverServed reports whether, by the last list read, no registration
// ever listed participant, by its name or by its invited client; known
// is false when no list was read, or the bridge keeps no such record.
func (g *registrar) neverServed(participant, client string) (never, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.known || g.servedEver == nil {
		return false, false
	}
	if _, ok := g.servedEver[participant]; ok {
		return false, true
	}
	for _, c := range g.servedEver {
		if client != "" && c == client {
			return false, true
		}
	}
	return true, true
}

// liveDuplicate reports whether other, a registration under this
// coordinator's id, is another process that is running. One that has
// missed a heartbeat (older than half its ttl, where a live one renews
// every third) is taken for gone: a standby taking over a PostgreSQL
// ledger's lease finds its dead leader's registration still live.
func liveDuplicate(other agentbridge.CoordinatorInfo, instance string) bool {
	return other.Instance != instance && other.Live && other.AgeMillis*2 <= other.TTLMillis
}

// warnDuplicate logs, once per other process, that another coordinator
// runs under this one's id: both would answer the same triggers.
func (g *registrar) warnDuplicate(other agentbridge.CoordinatorInfo) {
	g.mu.Lock()
	seen := g.warned[other.Instance]
	g.warned[other.Instance] = true
	g.mu.Unlock()
	if !seen {
		g.c.log.Warn("another coordinator is running under the same coordinator_id: give each machine its own coordinator_id",
			"coordinator_id", other.ID, "other_host", other.Host, "other_status_url", other.StatusURL)
	}
}

// registryFirst bounds the first registration, which Run waits for so
// that the receipt reporter starts knowing who else serves what.
const registryFirst = 2 * time.Second

// registryRetry is how soon a registration that has never succeeded is
// tried again.
const registryRetry = time.Second

// run heartbeats until ctx ends, then removes the registration. The
// first registration is the caller's (first).
func (g *registrar) run(ctx context.Context) {
	for {
		every := max(g.c.cfg.Load().ClaimTTL/3, 100*time.Millisecond)
		g.mu.Lock()
		if !g.registered && !g.unsupported {
			every = min(every, registryRetry)
		}
		g.mu.Unlock()
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), registryDeregister)
			if err := g.c.bridge.DeregisterCoordinator(dctx, g.c.cfg.Load().CoordinatorID, g.instance); err != nil {
				g.c.log.Debug("cannot remove the registration at shutdown; it lapses on its own", "err", err)
			}
			cancel()
			return
		case <-t.C:
			g.beat(ctx)
		}
	}
}

// refresh reads the bridge's list of coordinators again.
func (g *registrar) refresh(ctx context.Context) {
	list, err := g.c.bridge.Coordinators(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.c.log.Debug("cannot read the bridge's coordinators", "err", err)
		}
		return
	}
	g.keep(list)
}

// servedElsewhere reports whether another live coordinator, by the last
// list read, serves participant (whose invited client is client); known
// is false when no list was read yet.
func (g *registrar) servedElsewhere(participant, client string) (served, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.known {
		return false, false
	}
	for _, o := range agentbridge.ServingCoordinators(g.list, participant, client) {
		if o.Instance != g.instance {
			return true, true
		}
	}
	return false, true
}

// unsupportedBridge reports whether the bridge answered that it keeps no
// registrations.
func (g *registrar) unsupportedBridge() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unsupported
}

// hostName is the machine name the coordinator registers and shows in
// presence: the config's host, else the machine's host name.
func hostName(cfg *config.Config) string {
	if cfg.Host != "" {
		return cfg.Host
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unknown"
}
