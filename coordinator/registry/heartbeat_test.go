package registry

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// storeBridge is the bridge as the registrar sees it, over a real SQLite
// store's registrations: what the bridge's /coordinators handlers do,
// without the HTTP a synctest bubble cannot carry (a socket is not a
// durable block, so the bubble's clock would never move). refuse answers
// the next registrations, in order, before the store takes one.
type storeBridge struct {
	st *sqlite.Store

	mu       sync.Mutex
	refuse   []error
	always   error
	attempts []time.Duration // since start, every registration asked
	taken    []time.Duration // since start, those the store took
	start    time.Time
}

func (b *storeBridge) RegisterCoordinator(ctx context.Context, reg agentbridge.Registration) (agentbridge.RegisterResult, error) {
	b.mu.Lock()
	b.attempts = append(b.attempts, time.Since(b.start))
	var err error
	switch {
	case len(b.refuse) > 0:
		err, b.refuse = b.refuse[0], b.refuse[1:]
	case b.always != nil:
		err = b.always
	}
	b.mu.Unlock()
	if err != nil {
		return agentbridge.RegisterResult{}, err
	}
	res, err := b.st.RegisterCoordinator(ctx, reg)
	if err == nil {
		b.mu.Lock()
		b.taken = append(b.taken, time.Since(b.start))
		b.mu.Unlock()
	}
	return res, err
}

func (b *storeBridge) Coordinators(ctx context.Context) (agentbridge.CoordinatorsResponse, error) {
	list, err := b.st.Coordinators(ctx)
	return agentbridge.CoordinatorsResponse{Coordinators: list, Agents: agentbridge.AgentsServed(list)}, err
}

func (b *storeBridge) CoordinatorsServedEver(ctx context.Context, participant, client string) (agentbridge.CoordinatorsResponse, error) {
	res, err := b.Coordinators(ctx)
	if err != nil {
		return res, err
	}
	ever, err := b.st.ServedEver(ctx)
	res.ServedEver = agentbridge.ServedEverFor(ever, participant, client)
	return res, err
}

func (b *storeBridge) DeregisterCoordinator(ctx context.Context, id, instance string) error {
	return b.st.DeregisterCoordinator(ctx, id, instance)
}

// times returns the registrations asked and taken so far.
func (b *storeBridge) times() (attempts, taken []time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.attempts), slices.Clone(b.taken)
}

// logRecords keeps what the registrar logs, for the tests to count.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// count is how many records at level say something containing msg.
func (l *logRecords) count(level slog.Level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level == level && strings.Contains(r.Message, msg) {
			n++
		}
	}
	return n
}

// rig is a registrar over a storeBridge, inside the calling bubble.
type rig struct {
	g   *Registrar
	b   *storeBridge
	cfg atomic.Pointer[config.Config]
	log *logRecords
}

// newRig opens the store and the registrar for coordinator "laptop"
// serving claude, claim_ttl_s ttl. It must be called inside a bubble: the
// store's goroutines are the bubble's, and it is closed before the bubble
// ends.
func newRig(t *testing.T, ttl time.Duration) *rig {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "bridge.db"), sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &rig{b: &storeBridge{st: st, start: time.Now()}, log: &logRecords{}}
	r.cfg.Store(&config.Config{CoordinatorID: "laptop", Host: "mbp", ClaimTTL: ttl, MaxConcurrency: 4,
		Agents: map[string]config.Agent{"claude": {Client: "claude-code"}}})
	r.g = New(Options{Bridge: r.b, Config: r.cfg.Load, Version: "test", Logger: slog.New(r.log)})
	return r
}

// run starts the heartbeat; the returned function stops it and waits.
func (r *rig) run(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.g.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// beatFor registers, heartbeats for d of the bubble's clock, and stops.
func (r *rig) beatFor(ctx context.Context, d time.Duration) {
	r.g.First(ctx)
	stop := r.run(ctx)
	time.Sleep(d)
	synctest.Wait()
	stop()
}

// registered returns the store's registration of id, if any.
func registered(t *testing.T, st *sqlite.Store, id string) (agentbridge.CoordinatorInfo, bool) {
	t.Helper()
	list, err := st.Coordinators(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.ID == id {
			return c, true
		}
	}
	return agentbridge.CoordinatorInfo{}, false
}

func seconds(s ...float64) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, v := range s {
		out[i] = time.Duration(v * float64(time.Second))
	}
	return out
}

// TestHeartbeatEveryThirdOfTTL: the registration is renewed every third
// of claim_ttl_s, a reload is registered with its agents and its ttl from
// the next heartbeat on, and stopping removes the registration.
func TestHeartbeatEveryThirdOfTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 30*time.Second)
		r.g.First(t.Context())
		if !r.g.Registered() {
			t.Fatal("not registered after the first registration")
		}
		stop := r.run(t.Context())
		time.Sleep(25 * time.Second)
		synctest.Wait()
		if _, taken := r.b.times(); !slices.Equal(taken, seconds(0, 10, 20)) {
			t.Fatalf("heartbeats at %v, want every 10s of a 30s ttl", taken)
		}

		next := *r.cfg.Load()
		next.ClaimTTL = 3 * time.Second
		next.Agents = map[string]config.Agent{"claude": {Client: "claude-code"}, "codex": {Client: "codex"}}
		r.cfg.Store(&next)
		time.Sleep(7500 * time.Millisecond) // to 32.5s: the 10s timer, then every second
		synctest.Wait()
		if _, taken := r.b.times(); !slices.Equal(taken, seconds(0, 10, 20, 30, 31, 32)) {
			t.Fatalf("heartbeats at %v, want the reload's 1s from 30s on", taken)
		}
		got, ok := registered(t, r.b.st, "laptop")
		if !ok || got.TTLMillis != 3000 || len(got.Agents) != 2 || got.Host != "mbp" || got.Instance != r.g.Instance() {
			t.Fatalf("registration = %+v, %v; want the reloaded agents and ttl, this host and instance", got, ok)
		}

		stop()
		if got, ok := registered(t, r.b.st, "laptop"); ok {
			t.Fatalf("registration %+v still there after the heartbeat stopped", got)
		}
	})
}

// TestRegistrationRetriedEverySecond: until a registration is taken the
// bridge refuses the coordinator's writes as its agents, so an outage at
// start is retried every second, not every third of the ttl, and said
// once at warn level; from the first success the heartbeat paces itself
// by the ttl.
func TestRegistrationRetriedEverySecond(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 30*time.Second)
		down := &agentbridge.Error{Code: agentbridge.ECodeUnavailable, Status: http.StatusServiceUnavailable, Message: "down"}
		r.b.refuse = []error{down, down, down}
		r.g.First(t.Context())
		if r.g.Registered() {
			t.Fatal("registered although the bridge refused")
		}
		stop := r.run(t.Context())
		defer stop()
		time.Sleep(14 * time.Second)
		synctest.Wait()
		attempts, taken := r.b.times()
		if !slices.Equal(attempts, seconds(0, 1, 2, 3, 13)) || !slices.Equal(taken, seconds(3, 13)) {
			t.Fatalf("asked at %v, taken at %v; want every second until taken at 3s, then at 13s", attempts, taken)
		}
		if !r.g.Registered() {
			t.Error("not registered after the bridge took it")
		}
		if w, d := r.log.count(slog.LevelWarn, "cannot register"), r.log.count(slog.LevelDebug, "cannot register"); w != 1 || d != 2 {
			t.Errorf("the outage logged %d warnings and %d debug lines, want 1 and 2", w, d)
		}
	})
}

// TestRegistrationRefused: a refusal (a token made for another
// coordinator id) is a mistake in the config, said once as an error that
// names the fix, and tried again every second; an older bridge answers
// 404, which is said once, turns Unsupported true, and keeps the ttl's
// pace rather than retrying every second.
func TestRegistrationRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		answer      *agentbridge.Error
		beat        time.Duration
		attempts    []time.Duration
		level       slog.Level
		said        string
		unsupported bool
	}{
		{"a token for another coordinator id", &agentbridge.Error{Code: agentbridge.ECodeForbiddenScope, Status: http.StatusForbidden, Message: "not yours"},
			3500 * time.Millisecond, seconds(0, 1, 2, 3), slog.LevelError, "agent-bridge tokens add --scope coordinator", false},
		{"a bridge without registrations", &agentbridge.Error{Code: agentbridge.ECodeNotFound, Status: http.StatusNotFound, Message: "no such route"},
			25 * time.Second, seconds(0, 10, 20), slog.LevelWarn, "keeps no coordinator registrations", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, 30*time.Second)
				r.b.always = tc.answer
				r.beatFor(t.Context(), tc.beat)
				if attempts, _ := r.b.times(); !slices.Equal(attempts, tc.attempts) {
					t.Fatalf("asked at %v, want at %v", attempts, tc.attempts)
				}
				if n := r.log.count(tc.level, tc.said); n != 1 {
					t.Errorf("said %d times at %s, want once", n, tc.level)
				}
				if r.g.Registered() || r.g.Unsupported() != tc.unsupported {
					t.Errorf("Registered %v, Unsupported %v; want false, %v", r.g.Registered(), r.g.Unsupported(), tc.unsupported)
				}
				if _, known := r.g.ServedElsewhere("codex", ""); known {
					t.Error("ServedElsewhere claims to know without a list")
				}
			})
		})
	}
}

// TestDuplicateWarnedOnce: another live process under this coordinator
// id is warned about once, however many heartbeats meet it; and the list
// read at each heartbeat says who else serves what.
func TestDuplicateWarnedOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 30*time.Second)
		ctx := t.Context()
		other := func() {
			t.Helper()
			if _, err := r.b.st.RegisterCoordinator(ctx, agentbridge.Registration{ID: "laptop", Instance: "other", Host: "old-mbp", TTLMillis: 30000,
				Agents: []agentbridge.CoordinatorAgent{{Name: "claude", Kind: agentbridge.AgentKindAdapter}}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.b.st.RegisterCoordinator(ctx, agentbridge.Registration{ID: "desktop", Instance: "d", Host: "tower", TTLMillis: 600000,
			Agents: []agentbridge.CoordinatorAgent{{Name: "codex", Client: "codex", Kind: agentbridge.AgentKindAdapter}}}); err != nil {
			t.Fatal(err)
		}
		if _, known := r.g.ServedElsewhere("codex", ""); known {
			t.Fatal("ServedElsewhere claims to know before any list was read")
		}
		other()
		r.g.First(ctx)
		stop := r.run(ctx)
		defer stop()
		for range 3 {
			other()
			time.Sleep(10 * time.Second)
			synctest.Wait()
		}
		if n := r.log.count(slog.LevelWarn, "same coordinator_id"); n != 1 {
			t.Errorf("the duplicate was warned about %d times, want once", n)
		}
		if served, known := r.g.ServedElsewhere("codex", ""); !served || !known {
			t.Errorf("codex served elsewhere = %v (known %v), want true: the desktop serves it", served, known)
		}
		if served, _ := r.g.ServedElsewhere("claude", ""); served {
			t.Error("claude served elsewhere, but only this coordinator id serves it")
		}
		if never, known := r.g.NeverServed(ctx, "gemini", ""); !known || !never {
			t.Errorf("gemini never served = %v (known %v), want true", never, known)
		}
		if never, _ := r.g.NeverServed(ctx, "codex", ""); never {
			t.Error("codex never served, but the desktop serves it")
		}
	})
}
