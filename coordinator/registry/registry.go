// Package registry is the coordinator's registration with the bridge
// (contract 7.1): it tells the bridge what this coordinator serves, renews
// that every third of claim_ttl_s (the heartbeat), and removes it when the
// coordinator stops. Each heartbeat also reads back the bridge's list of
// coordinators, which says whether some other live coordinator serves a
// participant this one does not: the coordinator then leaves that
// participant to it. The package knows the bridge only through Bridge
// (the client) and the config through a getter, so that its timing is
// tested on a fake clock.
package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// Bridge is what the registrar asks of the bridge; *client.Client is one.
type Bridge interface {
	RegisterCoordinator(ctx context.Context, reg agentbridge.Registration) (agentbridge.RegisterResult, error)
	Coordinators(ctx context.Context) (agentbridge.CoordinatorsResponse, error)
	CoordinatorsServedEver(ctx context.Context, participant, client string) (agentbridge.CoordinatorsResponse, error)
	DeregisterCoordinator(ctx context.Context, id, instance string) error
}

var _ Bridge = (*client.Client)(nil)

// Options configures a Registrar.
type Options struct {
	// Bridge is the coordinator's bridge client.
	Bridge Bridge
	// Config returns the configuration in effect; every heartbeat reads
	// it, so that a reload is registered at the next one.
	Config func() *config.Config
	// StatusURL returns the coordinator's status API (empty without one),
	// registered for `agent-bridge coordinators` to show.
	StatusURL func() string
	// Version is the binary's version, registered.
	Version string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// deregisterTimeout bounds the removal of the registration at shutdown.
const deregisterTimeout = 2 * time.Second

// FirstTimeout bounds the first registration, which the coordinator waits
// for so that the receipt reporter starts knowing who else serves what,
// and the registration of a reloaded config.
const FirstTimeout = 2 * time.Second

// retryEvery is how soon a registration that has never succeeded is tried
// again: until then the bridge refuses this coordinator's writes as its
// agents.
const retryEvery = time.Second

// minEvery bounds how often the heartbeat renews, whatever claim_ttl_s.
const minEvery = 100 * time.Millisecond

// Registrar registers the coordinator and heartbeats. Run owns its loop;
// the other methods are safe to call from any goroutine.
type Registrar struct {
	bridge    Bridge
	cfg       func() *config.Config
	statusURL func() string
	log       *slog.Logger
	instance  string
	version   string

	mu sync.Mutex
	// list is the bridge's coordinators as of the last heartbeat; known
	// is false until one was read.
	list  []agentbridge.CoordinatorInfo
	known bool
	// warned holds the other instances already warned about as
	// duplicates, and unsupported is set once a bridge without
	// registrations was logged.
	warned      map[string]bool
	unsupported bool
	// failing is set while heartbeats fail, so that an outage is logged
	// at warn level once.
	failing bool
	// registered is set once a registration succeeded: until then the
	// bridge refuses this coordinator's writes as its agents, so Run
	// tries again every retryEvery rather than every third of the ttl.
	registered bool
}

// New returns a registrar with an instance id of its own, which tells
// this process apart from another running under the same coordinator id.
func New(opts Options) *Registrar {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	statusURL := opts.StatusURL
	if statusURL == nil {
		statusURL = func() string { return "" }
	}
	return &Registrar{
		bridge: opts.Bridge, cfg: opts.Config, statusURL: statusURL, log: log,
		instance: hex.EncodeToString(b[:]), version: opts.Version, warned: map[string]bool{},
	}
}

// Instance is this process's instance id, which its claims carry.
func (g *Registrar) Instance() string { return g.instance }

// registration is what the coordinator registers, from cfg: every agent
// entry with its client and kind.
func (g *Registrar) registration(cfg *config.Config) agentbridge.Registration {
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
		ID: cfg.CoordinatorID, Instance: g.instance, Host: HostName(cfg), Agents: agents,
		Version: g.version, Capacity: min(cfg.MaxConcurrency, agentbridge.MaxCoordinatorCapacity), StatusURL: g.statusURL(),
		TTLMillis: cfg.ClaimTTL.Milliseconds(), Workspaces: slices.Sorted(maps.Keys(cfg.Workspaces)),
	}
}

// First registers once, waiting at most FirstTimeout.
func (g *Registrar) First(ctx context.Context) {
	fctx, cancel := context.WithTimeout(ctx, FirstTimeout)
	defer cancel()
	g.beat(fctx)
}

// Reconfigure registers what cfg, a config about to take effect, serves,
// waiting at most FirstTimeout: the bridge lets a coordinator token write
// only as the agents its registration lists, so an agent added by a
// reload is registered before the scheduler may run it.
func (g *Registrar) Reconfigure(cfg *config.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), FirstTimeout)
	defer cancel()
	g.beatWith(ctx, cfg)
}

// beat registers (or renews the registration) of the config in effect
// and reads the bridge's list of coordinators back.
func (g *Registrar) beat(ctx context.Context) {
	g.beatWith(ctx, g.cfg())
}

// beatWith is beat for cfg.
func (g *Registrar) beatWith(ctx context.Context, cfg *config.Config) {
	reg := g.registration(cfg)
	res, err := g.bridge.RegisterCoordinator(ctx, reg)
	if err != nil {
		if ctx.Err() == nil {
			g.failed(ctx, reg.ID, err)
		}
		return
	}
	g.mu.Lock()
	g.failing, g.registered = false, true
	g.mu.Unlock()
	if d := res.Duplicate; d != nil && liveDuplicate(*d, g.instance) {
		g.warnDuplicate(*d)
	}
	list, err := g.bridge.Coordinators(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.log.Warn("cannot read the bridge's coordinators", "err", err)
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

// failed logs a registration the bridge did not take: a bridge that keeps
// no registrations once, an outage once (the follow loop says the rest),
// and a refusal (a token bound to another coordinator id, a read token)
// as an error naming the fix, since until it is mended this coordinator
// answers nothing.
func (g *Registrar) failed(ctx context.Context, id string, err error) {
	var ae *agentbridge.Error
	if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed) {
		g.mu.Lock()
		first := !g.unsupported
		g.unsupported = true
		g.mu.Unlock()
		if first {
			g.log.Warn("the bridge keeps no coordinator registrations (an older bridge?): agents served elsewhere cannot be told apart", "err", err)
		}
		return
	}
	level, msg := slog.LevelWarn, "cannot register with the bridge; trying again at the next heartbeat"
	if client.Permanent(err) {
		level, msg = slog.LevelError, "the bridge refuses this coordinator's registration, so it answers nothing: mend what the error says (a coordinator token made for its coordinator_id: agent-bridge tokens add --scope coordinator --name <coordinator_id>; or an agent name the bridge does not let it register); trying again at the next heartbeat"
	}
	g.mu.Lock()
	if g.failing {
		level = slog.LevelDebug
	}
	g.failing = true
	g.mu.Unlock()
	g.log.Log(ctx, level, msg, "coordinator_id", id, "err", err)
}

// keep stores a list of coordinators just read.
func (g *Registrar) keep(list agentbridge.CoordinatorsResponse) {
	g.mu.Lock()
	g.list, g.known = list.Coordinators, true
	g.mu.Unlock()
}

// NeverServed asks the bridge whether no registration ever listed
// participant, by its name or by its invited client; known is false when
// the bridge did not answer, or keeps no such record.
func (g *Registrar) NeverServed(ctx context.Context, participant, client string) (never, known bool) {
	list, err := g.bridge.CoordinatorsServedEver(ctx, participant, client)
	if err != nil {
		if ctx.Err() == nil {
			g.log.Debug("cannot read the agents the bridge's coordinators ever served", "err", err)
		}
		return false, false
	}
	g.keep(list)
	if list.ServedEver == nil {
		return false, false
	}
	if _, ok := list.ServedEver[participant]; ok {
		return false, true
	}
	for _, c := range list.ServedEver {
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
func (g *Registrar) warnDuplicate(other agentbridge.CoordinatorInfo) {
	g.mu.Lock()
	seen := g.warned[other.Instance]
	g.warned[other.Instance] = true
	g.mu.Unlock()
	if !seen {
		g.log.Warn("another coordinator is running under the same coordinator_id: give each machine its own coordinator_id",
			"coordinator_id", other.ID, "other_host", other.Host, "other_status_url", other.StatusURL)
	}
}

// Run heartbeats until ctx ends, then removes the registration. The
// first registration is the caller's (First).
func (g *Registrar) Run(ctx context.Context) {
	for {
		every := max(g.cfg().ClaimTTL/3, minEvery)
		g.mu.Lock()
		if !g.registered && !g.unsupported {
			every = min(every, retryEvery)
		}
		g.mu.Unlock()
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deregisterTimeout)
			if err := g.bridge.DeregisterCoordinator(dctx, g.cfg().CoordinatorID, g.instance); err != nil {
				g.log.Debug("cannot remove the registration at shutdown; it lapses on its own", "err", err)
			}
			cancel()
			return
		case <-t.C:
			g.beat(ctx)
		}
	}
}

// Refresh reads the bridge's list of coordinators again.
func (g *Registrar) Refresh(ctx context.Context) {
	list, err := g.bridge.Coordinators(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.log.Debug("cannot read the bridge's coordinators", "err", err)
		}
		return
	}
	g.keep(list)
}

// ServedElsewhere reports whether another live coordinator, by the last
// list read, serves participant (whose invited client is client); known
// is false when no list was read yet.
func (g *Registrar) ServedElsewhere(participant, client string) (served, known bool) {
	return g.ServedElsewhereIn(participant, client, "")
}

// ServedElsewhereIn is ServedElsewhere by a coordinator that also has
// workspace (contract 8.1); "" asks for none.
func (g *Registrar) ServedElsewhereIn(participant, client, workspace string) (served, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.known {
		return false, false
	}
	for _, o := range agentbridge.ServingCoordinators(g.list, participant, client) {
		if o.Instance != g.instance && (workspace == "" || o.HasWorkspace(workspace)) {
			return true, true
		}
	}
	return false, true
}

// Unsupported reports whether the bridge answered that it keeps no
// registrations.
func (g *Registrar) Unsupported() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unsupported
}

// Registered reports whether a registration of this coordinator
// succeeded.
func (g *Registrar) Registered() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.registered
}

// NotRegistered reports whether err is the bridge refusing a claim by a
// coordinator whose registration it does not hold (yet).
func NotRegistered(err error) bool {
	var ae *agentbridge.Error
	return errors.As(err, &ae) && ae.Code == agentbridge.ECodeNotRegistered
}

// HostName is the machine name the coordinator registers and shows in
// presence: the config's host, else the machine's host name.
func HostName(cfg *config.Config) string {
	if cfg.Host != "" {
		return cfg.Host
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unknown"
}

// ClientOf is the client a live coordinator other than this one registers
// agent name with ("" when it names none); ok is false when none serves it.
func (g *Registrar) ClientOf(name string) (client string, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, o := range g.list {
		if !o.Live || o.Instance == g.instance {
			continue
		}
		for _, a := range o.Agents {
			if a.Name == name {
				return a.Client, true
			}
		}
	}
	return "", false
}
