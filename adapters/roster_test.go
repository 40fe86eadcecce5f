package adapters_test

import (
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
)

func TestRoster(t *testing.T) {
	invited := []agentbridge.Invite{
		{ID: "claude", Profile: agentbridge.Profile{Client: "claude", Nickname: "cl"}},
		{ID: "codex", Profile: agentbridge.Profile{Client: "codex", Character: "SECRET sheet"}},
	}
	got := adapters.Roster(invited, map[string]string{"claude": agentbridge.PresenceThinking}, []string{"user", "boss"})
	if len(got) != 4 {
		t.Fatalf("roster = %+v, want two participants then two humans", got)
	}
	if c := got[0]; c.ID != "claude" || c.Mention != "@claude" || c.Presence != "thinking" || c.Profile == nil || c.Profile.Nickname != "cl" || c.Human {
		t.Errorf("claude = %+v", c)
	}
	if c := got[1]; c.Presence != agentbridge.PresenceOffline {
		t.Errorf("codex without presence = %q, want offline", c.Presence)
	}
	if c := got[1]; c.Profile.Character != "" {
		t.Errorf("the roster shows a character sheet: %q", c.Profile.Character)
	}
	for _, h := range got[2:] {
		if !h.Human || h.Profile != nil || h.Mention != "" || h.Presence != "" {
			t.Errorf("human entry %+v carries more than id and human", h)
		}
	}
	if got[2].ID != "user" || got[3].ID != "boss" {
		t.Errorf("humans out of order: %+v", got[2:])
	}
	// Changing the roster's profile never reaches the invite it came from.
	got[0].Profile.Nickname = "changed"
	if invited[0].Profile.Nickname != "cl" {
		t.Error("the roster shares the invite's profile")
	}
}
