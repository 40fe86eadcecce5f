package agentbridge

import (
	"encoding/json"
	"testing"
)

func TestIgnoredEffect(t *testing.T) {
	humans := Humans{"user"}
	invited := ThreadState{Participants: Participants{Invited: []Invite{{ID: "codex"}}}}
	paused := invited
	paused.Paused = true
	muted := invited
	muted.SoftMuted = []string{"codex"}
	running := invited
	running.Scene = &SceneState{Status: SceneRunning}
	ctl := func(from, content string) Event {
		return Event{Type: TypeControl, From: from, Content: json.RawMessage(content)}
	}
	msg := func(from, to string) Event {
		return Event{Type: TypeMessage, From: from, To: to, Content: json.RawMessage(`"hi"`)}
	}
	for _, tc := range []struct {
		name   string
		before ThreadState
		e      Event
		want   string
	}{
		{"pause from an agent", invited, ctl("codex", `{"pause":{"on":true}}`), IgnoredNotHuman},
		{"pause from a human", invited, ctl("user", `{"pause":{"on":true}}`), ""},
		{"prod from an agent", invited, ctl("codex", `{"prod":["codex"]}`), IgnoredNotHuman},
		{"invite from an agent", invited, ctl("codex", `{"invite":{"participant_id":"x","profile":{"client":"c","model":"m"}}}`), ""},
		{"uninvite of a stranger", invited, ctl("user", `{"uninvite":{"participant_id":"gemini"}}`), IgnoredNotInvited},
		{"uninvite of the invited", invited, ctl("user", `{"uninvite":{"participant_id":"codex"}}`), ""},
		{"scene on while one runs", running, ctl("user", `{"scene":{"on":true,"actors":["a","b"]}}`), IgnoredSceneRunning},
		{"scene off without one", invited, ctl("user", `{"scene":{"on":false}}`), IgnoredNoScene},
		{"message to a stranger", invited, msg("user", "claude-code"), IgnoredNotInvited},
		{"message to the invited", invited, msg("user", "codex"), ""},
		{"message to a muted one", muted, msg("user", "codex"), IgnoredMuted},
		{"message while paused", paused, msg("user", "codex"), IgnoredPaused},
		{"message to all", invited, msg("user", ToAll), ""},
		{"message to a human", invited, msg("codex", "user"), ""},
	} {
		got := IgnoredEffect(tc.before, tc.e, ControlOf(tc.e), humans)
		code := ""
		if got != nil {
			code = got.Code
			if got.Reason == "" {
				t.Errorf("%s: a note without a reason", tc.name)
			}
		}
		if code != tc.want {
			t.Errorf("%s: code %q (%+v), want %q", tc.name, code, got, tc.want)
		}
		if code != "" && !NeedsIgnoredCheck(tc.e, humans) {
			t.Errorf("%s: NeedsIgnoredCheck is false for an event IgnoredEffect judges", tc.name)
		}
	}
}
