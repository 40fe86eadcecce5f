package coordinator_test

import (
	"context"
	"encoding/json"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// presenceOf returns a participant's presence in a thread (ok false when it
// has none).
func (s *stack) presenceOf(thread, participant string) (agentbridge.Presence, bool) {
	s.t.Helper()
	ps, err := s.cl.Presence(context.Background(), thread)
	if err != nil {
		s.t.Fatalf("presence: %v", err)
	}
	for _, p := range ps {
		if p.ID == participant {
			return p, true
		}
	}
	return agentbridge.Presence{}, false
}

func isAvailable(p agentbridge.Presence) bool {
	var d struct {
		Available bool   `json:"available"`
		Via       string `json:"via"`
	}
	return p.State == agentbridge.PresenceListening && json.Unmarshal(p.Details, &d) == nil && d.Available && d.Via == "bridge-coordinator"
}

// TestAvailablePresence: the coordinator reports the participants it can
// start as available — those invited before it started (it reads the
// recent threads at start) and those invited while it runs — and not those
// no agent entry serves; after a run the participant is available again;
// when the coordinator stops it reports them offline.
func TestAvailablePresence(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	early := s.thread("early")
	s.invite(early, "alice", agentbridge.Profile{Client: "fake", Model: "m"})
	s.invite(early, "ghost", agentbridge.Profile{Client: "nobody", Model: "m"})
	s.startCoordinator()

	testutil.WaitFor(t, waitLong, "alice available in the thread made before the start", func() bool {
		p, ok := s.presenceOf(early, "alice")
		return ok && isAvailable(p)
	})
	if p, ok := s.presenceOf(early, "ghost"); ok {
		t.Errorf("a participant no agent serves got presence %+v", p)
	}

	late := s.thread("late")
	s.invite(late, "sage", agentbridge.Profile{Client: "claude", Model: "m"})
	testutil.WaitFor(t, waitLong, "sage (served by the claude entry) available once invited", func() bool {
		p, ok := s.presenceOf(late, "sage")
		return ok && isAvailable(p)
	})

	trigger := s.say(early, "alice", "hello")
	s.waitReplies(early, trigger.ID, 1)
	testutil.WaitFor(t, waitLong, "alice available after her run", func() bool {
		p, ok := s.presenceOf(early, "alice")
		return ok && isAvailable(p)
	})

	s.stopCoordinator()
	for _, pair := range [][2]string{{early, "alice"}, {late, "sage"}} {
		if p, ok := s.presenceOf(pair[0], pair[1]); !ok || p.State != agentbridge.PresenceOffline {
			t.Errorf("%s after the coordinator stopped: %+v, want offline", pair[1], p)
		}
	}
}

// TestAvailableRenewed: with nothing happening in the thread, the
// coordinator renews an idle participant's available report before the
// bridge's TTL would make it stale (every 4 presence heartbeats: 4 s here).
func TestAvailableRenewed(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("quiet")
	s.invite(th, "alice", agentbridge.Profile{Client: "fake", Model: "m"})
	var first string
	testutil.WaitFor(t, waitLong, "alice available", func() bool {
		p, ok := s.presenceOf(th, "alice")
		first = p.UpdatedAt
		return ok && isAvailable(p)
	})
	testutil.WaitFor(t, waitLong, "the report renewed", func() bool {
		p, ok := s.presenceOf(th, "alice")
		return ok && isAvailable(p) && p.UpdatedAt > first
	})
}
