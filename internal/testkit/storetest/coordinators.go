package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// testCoordinators: a registration is stored with the database's time,
// is its own heartbeat, lapses after its ttl, names a live registration of
// another instance under the same id as a duplicate, refuses bad input
// storing nothing, and goes away when its instance deregisters.
func testCoordinators(t *testing.T, newStore Factory) {
	cs, ok := newStore(t, nil).(agentbridge.CoordinatorStore)
	if !ok {
		t.Skip("the store keeps no coordinators")
	}
	ctx := context.Background()
	if list, err := cs.Coordinators(ctx); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("empty store: %v %v, want an empty, non-nil list", list, err)
	}
	laptop := agentbridge.Registration{
		ID: "laptop", Instance: "i1", Host: "laptop.local", Version: "v1", Capacity: 4,
		StatusURL: "http://127.0.0.1:5112",
		Agents: []agentbridge.CoordinatorAgent{
			{Name: "claude", Client: "claude", Kind: agentbridge.AgentKindAdapter},
			{Name: "gemini", Client: "gemini", Kind: agentbridge.AgentKindACP},
		},
		TTLMillis: 800,
	}
	res, err := cs.RegisterCoordinator(ctx, laptop)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Coordinator
	if res.Duplicate != nil || !c.Live || c.Host != "laptop.local" || len(c.Agents) != 2 || c.Agents[1].Kind != "acp" ||
		c.Capacity != 4 || c.StatusURL != laptop.StatusURL || c.Version != "v1" || c.TTLMillis != 800 || c.RegisteredAt == "" {
		t.Fatalf("registered %+v", res)
	}
	if _, err := agentbridge.ParseTime(c.HeartbeatAt); err != nil {
		t.Errorf("heartbeat_at %q: %v", c.HeartbeatAt, err)
	}
	first := c.RegisteredAt

	server := agentbridge.Registration{ID: "server", Instance: "s1", Host: "server",
		Agents: []agentbridge.CoordinatorAgent{{Name: "codex", Client: "codex", Kind: "adapter"}}}
	if res, err := cs.RegisterCoordinator(ctx, server); err != nil || res.Coordinator.TTLMillis != agentbridge.DefaultClaimTTL.Milliseconds() {
		t.Fatalf("a registration without a ttl: %+v %v, want the default ttl", res, err)
	}

	// A heartbeat of the same instance keeps its registration time.
	res, err = cs.RegisterCoordinator(ctx, laptop)
	if err != nil || res.Duplicate != nil || res.Coordinator.RegisteredAt != first {
		t.Fatalf("heartbeat: %+v %v, want registered_at %s kept and no duplicate", res, err, first)
	}
	// Another process under the same id while the first is live.
	second := laptop
	second.Instance, second.Host = "i2", "other-machine"
	res, err = cs.RegisterCoordinator(ctx, second)
	if err != nil || res.Duplicate == nil || res.Duplicate.Instance != "i1" || res.Duplicate.Host != "laptop.local" {
		t.Fatalf("second instance: %+v %v, want the first named as a duplicate", res, err)
	}

	list, err := cs.Coordinators(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "laptop" || list[1].ID != "server" || list[0].Instance != "i2" {
		t.Fatalf("Coordinators = %+v %v", list, err)
	}
	served := agentbridge.AgentsServed(list)
	if got := served["codex"]; len(got) != 1 || got[0] != "server" {
		t.Errorf("codex served by %v", got)
	}

	// Without a heartbeat for its ttl (800 ms) a registration lapses; the
	// database's clock decides.
	testutil.WaitFor(t, 10*time.Second, "the laptop's registration to lapse", func() bool {
		list, err := cs.Coordinators(ctx)
		return err == nil && len(list) == 2 && !list[0].Live && list[0].AgeMillis >= 800 && list[1].Live
	})
	// A registration that replaces a lapsed one is no duplicate.
	if res, err := cs.RegisterCoordinator(ctx, laptop); err != nil || res.Duplicate != nil || !res.Coordinator.Live {
		t.Fatalf("after the lapse: %+v %v", res, err)
	}

	for _, bad := range []agentbridge.Registration{
		{ID: "", Instance: "x", Host: "h"},
		{ID: "bad id", Instance: "x", Host: "h"},
		{ID: "ok", Host: "h"},
		{ID: "ok", Instance: "x"},
		{ID: "ok", Instance: "x", Host: "h", Agents: []agentbridge.CoordinatorAgent{{Name: "a", Kind: "shell"}}},
		{ID: "ok", Instance: "x", Host: "h", TTLMillis: -1},
	} {
		if _, err := cs.RegisterCoordinator(ctx, bad); agentbridge.ErrorCode(err) == agentbridge.ECodeInternal {
			t.Errorf("RegisterCoordinator(%+v) = %v, want a typed error", bad, err)
		}
	}

	// Only the instance holding the id removes it.
	if err := cs.DeregisterCoordinator(ctx, "laptop", "i2"); err != nil {
		t.Fatal(err)
	}
	if list, _ := cs.Coordinators(ctx); len(list) != 2 {
		t.Fatalf("a deregistration by an instance that no longer holds the id removed it: %+v", list)
	}
	if err := cs.DeregisterCoordinator(ctx, "laptop", "i1"); err != nil {
		t.Fatal(err)
	}
	if list, _ := cs.Coordinators(ctx); len(list) != 1 || list[0].ID != "server" {
		t.Fatalf("after deregistering: %+v", list)
	}
}

// testCoordinatorNames: one coordinator id registers at most
// agentbridge.MaxCoordinatorNames agent names ever (429 too_many, the
// registration unchanged); names it registered before may come back, and
// another id has its own count.
func testCoordinatorNames(t *testing.T, newStore Factory) {
	cs, ok := newStore(t, nil).(agentbridge.CoordinatorStore)
	if !ok {
		t.Skip("the store keeps no coordinators")
	}
	ctx := context.Background()
	reg := func(id, prefix string, n int) error {
		agents := make([]agentbridge.CoordinatorAgent, n)
		for i := range agents {
			agents[i] = agentbridge.CoordinatorAgent{Name: fmt.Sprintf("%s%d", prefix, i), Kind: agentbridge.AgentKindAdapter}
		}
		_, err := cs.RegisterCoordinator(ctx, agentbridge.Registration{ID: id, Instance: "i", Host: "h", Agents: agents})
		return err
	}
	for batch := range agentbridge.MaxCoordinatorNames / agentbridge.MaxCoordinatorAgents {
		if err := reg("grow", fmt.Sprintf("b%d-", batch), agentbridge.MaxCoordinatorAgents); err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
	}
	last := fmt.Sprintf("b%d-", agentbridge.MaxCoordinatorNames/agentbridge.MaxCoordinatorAgents-1)
	if agentbridge.ErrorCode(reg("grow", "new-", 1)) != agentbridge.ECodeTooMany {
		t.Fatal("the name past the cap was taken")
	}
	list, _ := cs.Coordinators(ctx)
	if len(list) != 1 || list[0].Agents[0].Name != last+"0" {
		t.Errorf("the refused registration changed the stored one: %+v", list)
	}
	if err := reg("grow", "b0-", 3); err != nil {
		t.Errorf("names registered before: %v", err)
	}
	if err := reg("other", "new-", 3); err != nil {
		t.Errorf("another coordinator's names: %v", err)
	}
}
