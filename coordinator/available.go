package coordinator

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/registry"
)

// Presence "available" (contract 6.5, docs/api.md): the coordinator reports
// every invited participant it can start (an agent entry resolves for it)
// and that is not running as listening with details {"available": true,
// "via": coordinator_id}, so that the UI shows it as available rather than
// offline once its last run is older than the bridge's presence TTL. The
// reports are sent when a participant is invited (or the coordinator first
// meets the thread) and then renewed every availableHeartbeats presence
// heartbeats (presence_heartbeat_s), under the bridge's TTL; when the coordinator stops they stop, and the entries go
// stale on their own, so a participant shows available only while a
// coordinator that can start it runs. Nothing polls: the bridge passes the
// reports to the pages on its streams.

const (
	// availableHeartbeats is how many presence heartbeats pass between two
	// renewals: 40 s with the default presence_heartbeat_s of 10, a third
	// of the bridge's presence TTL (120 s), so one lost report does not
	// make a participant look offline. More than one heartbeat, because
	// these reports are for every idle pair, not the few running ones.
	availableHeartbeats = 4
	// availableSeedThreads is how many of the most recently updated threads
	// get their participants reported at start, before they speak again.
	availableSeedThreads = 256
	// availableOfflineBudget bounds the "offline" reports sent at shutdown.
	availableOfflineBudget = 2 * time.Second
)

// availability keeps the invited participants of the threads the
// coordinator has met, at most maxCachedThreads of them, and reports those
// it can start.
type availability struct {
	bridge *client.Client
	config func() *config.Config
	log    *slog.Logger
	// presences orders the reports with the runs' own (invoke.go).
	presences *presenceChain
	wake      chan struct{}

	mu      sync.Mutex
	threads map[string][]agentbridge.Invite
	order   []string        // threads in the order first met, for the bound
	fresh   map[string]bool // threads whose participants changed since the last report
	shown   map[pairKey]bool
}

func newAvailability(bridge *client.Client, cfg func() *config.Config, log *slog.Logger, presences *presenceChain) *availability {
	return &availability{
		bridge:    bridge,
		config:    cfg,
		log:       log,
		presences: presences,
		wake:      make(chan struct{}, 1),
		threads:   make(map[string][]agentbridge.Invite),
		fresh:     make(map[string]bool),
		shown:     make(map[pairKey]bool),
	}
}

// note records a thread's participants after an event; a change (or a
// thread met for the first time) is reported at once. It never blocks.
func (a *availability) note(thread string, st agentbridge.ThreadState) {
	a.put(thread, st.Participants.Invited, true)
}

func (a *availability) put(thread string, invited []agentbridge.Invite, replace bool) {
	a.mu.Lock()
	old, had := a.threads[thread]
	if had && (!replace || sameInvites(old, invited)) {
		a.mu.Unlock()
		return
	}
	if !had {
		a.order = append(a.order, thread)
		for len(a.order) > maxCachedThreads {
			drop := a.order[0]
			a.order = a.order[1:]
			delete(a.threads, drop)
			delete(a.fresh, drop)
			for k := range a.shown {
				if k.thread == drop {
					delete(a.shown, k)
				}
			}
		}
	}
	a.threads[thread] = invited
	a.fresh[thread] = true
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func sameInvites(a, b []agentbridge.Invite) bool {
	return slices.EqualFunc(a, b, func(x, y agentbridge.Invite) bool {
		return x.ID == y.ID && x.Profile.Client == y.Profile.Client
	})
}

// run reports until ctx ends: the seed at start, changes when noted, and
// everything every availableHeartbeats presence heartbeats (never when
// presence_heartbeat_s is 0; a reload applies at the next renewal).
func (a *availability) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.seed(ctx)
	}()
	// One timer across wakes, so that frequent changes cannot put the
	// renewal off; re-armed when it fires, with the period of the config
	// in force then.
	var renew *time.Timer
	arm := func() {
		if every := availableHeartbeats * a.config().PresenceHeartbeat; every > 0 {
			renew = time.NewTimer(every)
		} else {
			renew = nil
		}
	}
	arm()
	defer func() {
		if renew != nil {
			renew.Stop()
		}
	}()
	for {
		var fired <-chan time.Time
		if renew != nil {
			fired = renew.C
		}
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
			a.report(ctx, false)
		case <-fired:
			a.report(ctx, true)
			arm()
		}
	}
}

// seed notes the participants of the most recently updated threads, so
// that a thread nobody has spoken in since the start shows its agents
// available too. A thread noted by the follow loop meanwhile keeps that
// newer state.
func (a *availability) seed(ctx context.Context) {
	var all []agentbridge.Thread
	after := ""
	for i := 0; i < 20 && ctx.Err() == nil; i++ {
		page, err := a.bridge.Threads(ctx, after, 500)
		if err != nil {
			a.log.Debug("list threads for availability", "err", err)
			break
		}
		all = append(all, page...)
		if len(page) < 500 {
			break
		}
		after = page[len(page)-1].ID
	}
	sort.Slice(all, func(i, j int) bool { return all[i].UpdatedAt > all[j].UpdatedAt })
	if len(all) > availableSeedThreads {
		all = all[:availableSeedThreads]
	}
	for _, th := range all {
		st, _, err := a.bridge.State(ctx, th.ID, 0)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		a.put(th.ID, st.Participants.Invited, false)
	}
}

// report sends the availability of the changed threads' participants, or
// of all when all is set.
func (a *availability) report(ctx context.Context, all bool) {
	cfg := a.config()
	var pairs []pairKey
	a.mu.Lock()
	for thread, invited := range a.threads {
		if !all && !a.fresh[thread] {
			continue
		}
		st := agentbridge.ThreadState{Participants: agentbridge.Participants{Invited: invited}}
		for _, inv := range invited {
			k := pairKey{thread, inv.ID}
			if _, ok := cfg.ResolveAgent(inv.ID, st); ok && (all || !a.shown[k]) {
				pairs = append(pairs, k)
			}
		}
	}
	clear(a.fresh)
	a.mu.Unlock()
	details := availableDetails(cfg)
	for _, k := range pairs {
		if ctx.Err() != nil {
			return
		}
		if a.reportIdle(ctx, k, agentbridge.PresenceListening, details) {
			a.mu.Lock()
			a.shown[k] = true
			a.mu.Unlock()
		}
	}
}

// offline reports every participant shown available as offline: the
// coordinator is stopping and will not start them. Best effort, within
// availableOfflineBudget.
func (a *availability) offline() {
	a.mu.Lock()
	pairs := make([]pairKey, 0, len(a.shown))
	for k := range a.shown {
		pairs = append(pairs, k)
	}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), availableOfflineBudget)
	defer cancel()
	for _, k := range pairs {
		if ctx.Err() != nil {
			return
		}
		a.reportIdle(ctx, k, agentbridge.PresenceOffline, json.RawMessage("null"))
	}
}

// availableDetails is the presence details of a participant the
// coordinator can start: available, via which coordinator, on which
// machine (contract 7.1: "claude @ laptop").
func availableDetails(cfg *config.Config) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"available": true, "via": cfg.CoordinatorID, "host": registry.HostName(cfg)})
	return b
}

// reportIdle sends one presence report for a pair that is not running: in
// the pair's order of reports, and not at all when a run's reporter is
// active (it reports listening, with the same details, when the run ends).
// It reports whether the report was sent.
func (a *availability) reportIdle(ctx context.Context, k pairKey, st string, details json.RawMessage) bool {
	done, ok := a.presences.nextIfIdle(k)
	if !ok {
		return false
	}
	defer a.presences.finish(k, done)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.bridge.SetPresence(pctx, k.thread, agentbridge.PresenceInput{From: k.participant, State: st, Details: details}); err != nil {
		a.log.Debug("report availability", "participant", k.participant, "thread", k.thread, "state", st, "err", err)
		return false
	}
	return true
}

// nextIfIdle registers a reporter of k when none is active, as next does;
// ok is false when one is.
func (p *presenceChain) nextIfIdle(k pairKey) (done chan struct{}, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last[k] != nil {
		return nil, false
	}
	done = make(chan struct{})
	p.add(k, done)
	return done, true
}
