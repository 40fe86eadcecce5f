package coordinator_test

import (
	"slices"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// TestContextWindowFromStream: the context window the coordinator builds
// from the events its stream delivered is the one the bridge serves (the
// last context_window_size events up to the trigger), including a control
// and another participant's reply, and in a thread shorter than the window.
func TestContextWindowFromStream(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) { c.ContextWindowSize, c.MaxInvocationsPerMinute = 4, 0 })
	th := s.thread("window")
	s.invite(th, "alice", agentbridge.Profile{})
	first := s.say(th, "alice", "one")
	s.waitReplies(th, first.ID, 1)
	s.invite(th, "bob", agentbridge.Profile{})
	second := s.say(th, "bob", "two")
	s.waitReplies(th, second.ID, 1)
	third := s.say(th, "alice", "three")
	s.waitReplies(th, third.ID, 1)
	evs := s.events(th)
	for _, tc := range []struct {
		trigger     agentbridge.Event
		participant string
	}{{first, "alice"}, {second, "bob"}, {third, "alice"}} {
		i := slices.IndexFunc(evs, func(e agentbridge.Event) bool { return e.ID == tc.trigger.ID })
		var want []string
		for _, e := range evs[max(i-3, 0) : i+1] {
			want = append(want, e.ID)
		}
		var got []string
		for _, e := range s.payload(tc.trigger.ID, tc.participant, 0).ContextWindow {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("window of %s for %s = %v, want %v", tc.trigger.Content, tc.participant, got, want)
		}
	}
}
