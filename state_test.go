package agentbridge

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
)

func TestParseControl(t *testing.T) {
	t.Parallel()
	boolPtr := func(b bool) *bool { return &b }
	tests := []struct {
		name    string
		content string
		want    Control
		field   string // "" = valid; else the field of the invalid_control error
	}{
		{name: "invite", content: `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"gpt","roles":["coder"],"nickname":"cody"}}}`,
			want: Control{Invite: &InviteControl{ParticipantID: "codex", Profile: Profile{Client: "codex", Model: "gpt", Roles: []string{"coder"}, Nickname: "cody"}}}},
		{name: "invite minimal profile", content: `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"gpt"}}}`,
			want: Control{Invite: &InviteControl{ParticipantID: "codex", Profile: Profile{Client: "codex", Model: "gpt"}}}},
		{name: "invite without participant_id", content: `{"invite":{"profile":{"client":"c","model":"m"}}}`, field: "content.invite"},
		{name: "invite with invalid id", content: `{"invite":{"participant_id":"a b","profile":{"client":"c","model":"m"}}}`, field: "content.invite"},
		{name: "invite with id not a string", content: `{"invite":{"participant_id":1,"profile":{"client":"c","model":"m"}}}`, field: "content.invite"},
		{name: "invite without profile", content: `{"invite":{"participant_id":"a"}}`, field: "content.invite"},
		{name: "invite with null profile", content: `{"invite":{"participant_id":"a","profile":null}}`, field: "content.invite"},
		{name: "invite with profile not an object", content: `{"invite":{"participant_id":"a","profile":"claude"}}`, field: "content.invite"},
		{name: "invite without client", content: `{"invite":{"participant_id":"a","profile":{"model":"m"}}}`, field: "content.invite"},
		{name: "invite with empty client", content: `{"invite":{"participant_id":"a","profile":{"client":"","model":"m"}}}`, field: "content.invite"},
		{name: "invite without model", content: `{"invite":{"participant_id":"a","profile":{"client":"c"}}}`, field: "content.invite"},
		{name: "invite with roles not strings", content: `{"invite":{"participant_id":"a","profile":{"client":"c","model":"m","roles":[1]}}}`, field: "content.invite"},
		{name: "invite not an object", content: `{"invite":"codex"}`, field: "content.invite"},

		{name: "uninvite", content: `{"uninvite":{"participant_id":"codex"}}`, want: Control{Uninvite: &UninviteControl{ParticipantID: "codex"}}},
		{name: "uninvite without id", content: `{"uninvite":{}}`, field: "content.uninvite"},
		{name: "uninvite with invalid id", content: `{"uninvite":{"participant_id":""}}`, field: "content.uninvite"},

		{name: "mute defaults to hard", content: `{"mute":{"targets":["a","b"]}}`, want: Control{Mute: &MuteControl{Targets: []string{"a", "b"}, Mode: MuteHard}}},
		{name: "mute hard", content: `{"mute":{"targets":["a"],"mode":"hard"}}`, want: Control{Mute: &MuteControl{Targets: []string{"a"}, Mode: MuteHard}}},
		{name: "mute soft", content: `{"mute":{"targets":["a"],"mode":"soft"}}`, want: Control{Mute: &MuteControl{Targets: []string{"a"}, Mode: MuteSoft}}},
		{name: "mute with unknown mode", content: `{"mute":{"targets":["a"],"mode":"loud"}}`, field: "content.mute"},
		{name: "mute without targets", content: `{"mute":{}}`, field: "content.mute"},
		{name: "mute with no targets", content: `{"mute":{"targets":[]}}`, field: "content.mute"},
		{name: "mute with invalid target", content: `{"mute":{"targets":["ok","not ok"]}}`, field: "content.mute"},
		{name: "mute targets not an array", content: `{"mute":{"targets":"a"}}`, field: "content.mute"},

		{name: "unmute", content: `{"unmute":{"targets":["a"]}}`, want: Control{Unmute: &UnmuteControl{Targets: []string{"a"}}}},
		{name: "unmute without targets", content: `{"unmute":{"targets":[]}}`, field: "content.unmute"},
		{name: "unmute not an object", content: `{"unmute":["a"]}`, field: "content.unmute"},

		{name: "pause on", content: `{"pause":{"on":true}}`, want: Control{Pause: &Toggle{On: true}}},
		{name: "pause off", content: `{"pause":{"on":false}}`, want: Control{Pause: &Toggle{On: false}}},
		{name: "pause without on", content: `{"pause":{}}`, field: "content.pause"},
		{name: "pause with on not a bool", content: `{"pause":{"on":"yes"}}`, field: "content.pause"},
		{name: "pause as a bool", content: `{"pause":true}`, field: "content.pause"},

		{name: "invited_auto on", content: `{"invited_auto":{"on":true}}`, want: Control{InvitedAuto: &Toggle{On: true}}},
		{name: "invited_auto without on", content: `{"invited_auto":{"off":true}}`, field: "content.invited_auto"},

		{name: "discussion on", content: `{"discussion":{"on":true}}`, want: Control{Discussion: &DiscussionControl{On: true}}},
		{name: "discussion with agent mentions off", content: `{"discussion":{"on":true,"allow_agent_mentions":false}}`,
			want: Control{Discussion: &DiscussionControl{On: true, AllowAgentMentions: boolPtr(false)}}},
		{name: "discussion without on", content: `{"discussion":{"allow_agent_mentions":true}}`, field: "content.discussion"},
		{name: "discussion with allow not a bool", content: `{"discussion":{"on":true,"allow_agent_mentions":1}}`, field: "content.discussion"},

		{name: "prod", content: `{"prod":["codex","claude"]}`, want: Control{Prod: []string{"codex", "claude"}}},
		{name: "prod empty", content: `{"prod":[]}`, field: "content.prod"},
		{name: "prod not a list", content: `{"prod":"codex"}`, field: "content.prod"},
		{name: "prod with invalid id", content: `{"prod":["a b"]}`, field: "content.prod"},
		{name: "cancel", content: `{"cancel":{"participant_id":"codex"}}`, want: Control{Cancel: &CancelControl{ParticipantID: "codex"}}},
		{name: "cancel without id", content: `{"cancel":{}}`, field: "content.cancel"},
		{name: "cancel with invalid id", content: `{"cancel":{"participant_id":"a b"}}`, field: "content.cancel"},
		{name: "cancel not an object", content: `{"cancel":"codex"}`, field: "content.cancel"},
		{name: "reset_session", content: `{"reset_session":{"participant_id":"claude"}}`, want: Control{ResetSession: &ResetSessionControl{ParticipantID: "claude"}}},
		{name: "reset_session without id", content: `{"reset_session":{}}`, field: "content.reset_session"},
		{name: "reset_session with invalid id", content: `{"reset_session":{"participant_id":" "}}`, field: "content.reset_session"},
		{name: "reset_session not an object", content: `{"reset_session":true}`, field: "content.reset_session"},

		{name: "several controls at once", content: `{"pause":{"on":true},"prod":["a"],"future":{}}`,
			want: Control{Pause: &Toggle{On: true}, Prod: []string{"a"}}},
		{name: "unknown keys only", content: `{"future":{"x":1}}`, want: Control{}},
		{name: "empty object", content: `{}`, want: Control{}},
		{name: "a JSON string holding an object", content: `"{\"pause\":{\"on\":true}}"`, want: Control{Pause: &Toggle{On: true}}},
		{name: "surrounding space", content: " \n{\"pause\":{\"on\":false}} ", want: Control{Pause: &Toggle{On: false}}},

		{name: "a JSON string holding text", content: `"pause"`, field: "content"},
		{name: "a JSON string holding an array", content: `"[1]"`, field: "content"},
		{name: "a JSON string holding a string", content: `"\"{}\""`, field: "content"},
		{name: "an array", content: `[{"pause":{"on":true}}]`, field: "content"},
		{name: "a number", content: `7`, field: "content"},
		{name: "null", content: `null`, field: "content"},
		{name: "empty", content: ``, field: "content"},
		{name: "broken JSON", content: `{"pause":`, field: "content"},
		{name: "broken JSON string", content: `"{`, field: "content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseControl(json.RawMessage(tt.content))
			if tt.field == "" {
				if err != nil {
					t.Fatalf("ParseControl: %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("ParseControl = %+v, want %+v", got, tt.want)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != ECodeInvalidControl || e.Field != tt.field {
				t.Fatalf("err = %v, want invalid_control on %s", err, tt.field)
			}
			if !isSentence(e.Message) {
				t.Errorf("message %q is not a sentence", e.Message)
			}
		})
	}
}

// Helpers building events for Fold.

func control(from, content string) Event {
	return Event{Type: TypeControl, From: from, To: ToAll, TS: "ts-" + from, Content: json.RawMessage(content)}
}

func inviteEvent(from, id, client, model string) Event {
	b, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": id, "profile": map[string]any{"client": client, "model": model}}})
	return control(from, string(b))
}

func message(from string, hop *int) Event {
	return Event{Type: TypeMessage, From: from, To: ToAll, Content: json.RawMessage(`"hi"`), Meta: Meta{Hop: hop}}
}

func foldAll(humans Humans, events ...Event) ThreadState {
	var s ThreadState
	for _, e := range events {
		s = Fold(s, e, humans)
	}
	return s
}

func invitedIDs(s ThreadState) []string {
	var ids []string
	for _, inv := range s.Participants.Invited {
		ids = append(ids, inv.ID)
	}
	return ids
}

func TestFold(t *testing.T) {
	t.Parallel()
	h := DefaultHumans
	hop := func(n int) *int { return &n }
	tests := []struct {
		name   string
		events []Event
		check  func(t *testing.T, s ThreadState)
	}{
		{"empty thread", nil, func(t *testing.T, s ThreadState) {
			if !reflect.DeepEqual(s, ThreadState{}) {
				t.Errorf("state = %+v", s)
			}
		}},
		{"invite from a human", []Event{inviteEvent("user", "codex", "codex", "gpt")}, func(t *testing.T, s ThreadState) {
			inv, ok := s.Invited("codex")
			if !ok || inv.InvitedBy != "user" || inv.InvitedAt != "ts-user" || inv.Profile.Model != "gpt" {
				t.Errorf("invite = %+v, %v", inv, ok)
			}
		}},
		{"invite from an agent counts", []Event{inviteEvent("codex", "claude", "claude", "opus")}, func(t *testing.T, s ThreadState) {
			if inv, ok := s.Invited("claude"); !ok || inv.InvitedBy != "codex" {
				t.Errorf("invite = %+v, %v", inv, ok)
			}
		}},
		{"invitation order kept", []Event{inviteEvent("user", "b", "c", "m"), inviteEvent("user", "a", "c", "m"), inviteEvent("user", "c", "c", "m")}, func(t *testing.T, s ThreadState) {
			if got := invitedIDs(s); !slices.Equal(got, []string{"b", "a", "c"}) {
				t.Errorf("invited = %q", got)
			}
		}},
		{"re-invite updates the profile in place", []Event{
			inviteEvent("user", "a", "c", "m1"), inviteEvent("user", "b", "c", "m"), inviteEvent("codex", "a", "c", "m2"),
		}, func(t *testing.T, s ThreadState) {
			inv, _ := s.Invited("a")
			if got := invitedIDs(s); !slices.Equal(got, []string{"a", "b"}) {
				t.Errorf("invited = %q", got)
			}
			if inv.Profile.Model != "m2" || inv.InvitedBy != "codex" || inv.InvitedAt != "ts-codex" {
				t.Errorf("re-invited = %+v, want the new profile with the latest invitation's by/at", inv)
			}
		}},
		{"uninvite from anyone", []Event{inviteEvent("user", "a", "c", "m"), inviteEvent("user", "b", "c", "m"), control("b", `{"uninvite":{"participant_id":"a"}}`)}, func(t *testing.T, s ThreadState) {
			if got := invitedIDs(s); !slices.Equal(got, []string{"b"}) {
				t.Errorf("invited = %q", got)
			}
		}},
		{"uninvite of a stranger", []Event{inviteEvent("user", "a", "c", "m"), control("user", `{"uninvite":{"participant_id":"x"}}`)}, func(t *testing.T, s ThreadState) {
			if got := invitedIDs(s); !slices.Equal(got, []string{"a"}) {
				t.Errorf("invited = %q", got)
			}
		}},
		{"re-invite after uninvite goes last with a new invitation", []Event{
			inviteEvent("user", "a", "c", "m"), inviteEvent("user", "b", "c", "m"),
			control("user", `{"uninvite":{"participant_id":"a"}}`), inviteEvent("codex", "a", "c", "m3"),
		}, func(t *testing.T, s ThreadState) {
			inv, _ := s.Invited("a")
			if got := invitedIDs(s); !slices.Equal(got, []string{"b", "a"}) || inv.InvitedBy != "codex" {
				t.Errorf("invited = %q, a = %+v", got, inv)
			}
		}},
		{"hard mute, sorted", []Event{control("user", `{"mute":{"targets":["z","a"]}}`)}, func(t *testing.T, s ThreadState) {
			if !slices.Equal(s.Muted, []string{"a", "z"}) || len(s.SoftMuted) != 0 || !s.IsHardMuted("z") || !s.IsMuted("a") {
				t.Errorf("muted = %q, soft = %q", s.Muted, s.SoftMuted)
			}
		}},
		{"soft mute", []Event{control("user", `{"mute":{"targets":["a"],"mode":"soft"}}`)}, func(t *testing.T, s ThreadState) {
			if len(s.Muted) != 0 || !slices.Equal(s.SoftMuted, []string{"a"}) || s.IsHardMuted("a") || !s.IsMuted("a") {
				t.Errorf("muted = %q, soft = %q", s.Muted, s.SoftMuted)
			}
		}},
		{"mute again changes the mode", []Event{control("user", `{"mute":{"targets":["a"]}}`), control("user", `{"mute":{"targets":["a"],"mode":"soft"}}`)}, func(t *testing.T, s ThreadState) {
			if len(s.Muted) != 0 || !slices.Equal(s.SoftMuted, []string{"a"}) {
				t.Errorf("muted = %q, soft = %q", s.Muted, s.SoftMuted)
			}
		}},
		{"mute twice is one entry", []Event{control("user", `{"mute":{"targets":["a","a"]}}`), control("user", `{"mute":{"targets":["a"]}}`)}, func(t *testing.T, s ThreadState) {
			if !slices.Equal(s.Muted, []string{"a"}) {
				t.Errorf("muted = %q", s.Muted)
			}
		}},
		{"unmute clears both modes", []Event{
			control("user", `{"mute":{"targets":["a"]}}`), control("user", `{"mute":{"targets":["b"],"mode":"soft"}}`),
			control("user", `{"unmute":{"targets":["a","b","c"]}}`),
		}, func(t *testing.T, s ThreadState) {
			if len(s.Muted) != 0 || len(s.SoftMuted) != 0 || s.IsMuted("a") || s.IsMuted("b") {
				t.Errorf("muted = %q, soft = %q", s.Muted, s.SoftMuted)
			}
		}},
		{"mute from an agent is ignored", []Event{control("codex", `{"mute":{"targets":["a"]}}`)}, func(t *testing.T, s ThreadState) {
			if s.IsMuted("a") {
				t.Errorf("muted = %q", s.Muted)
			}
		}},
		{"unmute from an agent is ignored", []Event{control("user", `{"mute":{"targets":["codex"]}}`), control("codex", `{"unmute":{"targets":["codex"]}}`)}, func(t *testing.T, s ThreadState) {
			if !s.IsMuted("codex") {
				t.Errorf("an agent unmuted itself")
			}
		}},
		{"pause and resume", []Event{control("user", `{"pause":{"on":true}}`)}, func(t *testing.T, s ThreadState) {
			if !s.Paused {
				t.Errorf("not paused")
			}
			if Fold(s, control("user", `{"pause":{"on":false}}`), h).Paused {
				t.Errorf("still paused")
			}
		}},
		{"pause from an agent is ignored", []Event{control("codex", `{"pause":{"on":true}}`)}, func(t *testing.T, s ThreadState) {
			if s.Paused {
				t.Errorf("paused by an agent")
			}
		}},
		{"discussion on allows agent mentions by default", []Event{control("user", `{"discussion":{"on":true}}`)}, func(t *testing.T, s ThreadState) {
			if s.Discussion != (Discussion{On: true, AllowAgentMentions: true}) {
				t.Errorf("discussion = %+v", s.Discussion)
			}
		}},
		{"discussion on without agent mentions", []Event{control("user", `{"discussion":{"on":true,"allow_agent_mentions":false}}`)}, func(t *testing.T, s ThreadState) {
			if s.Discussion != (Discussion{On: true, AllowAgentMentions: false}) {
				t.Errorf("discussion = %+v", s.Discussion)
			}
		}},
		{"discussion off resets agent mentions", []Event{control("user", `{"discussion":{"on":true}}`), control("user", `{"discussion":{"on":false}}`)}, func(t *testing.T, s ThreadState) {
			if s.Discussion != (Discussion{}) {
				t.Errorf("discussion = %+v", s.Discussion)
			}
		}},
		{"discussion from an agent is ignored", []Event{control("codex", `{"discussion":{"on":true}}`)}, func(t *testing.T, s ThreadState) {
			if s.Discussion.On {
				t.Errorf("discussion = %+v", s.Discussion)
			}
		}},
		{"invited_auto", []Event{control("user", `{"invited_auto":{"on":true}}`)}, func(t *testing.T, s ThreadState) {
			if !s.InvitedAuto.On {
				t.Errorf("invited_auto off")
			}
		}},
		{"invited_auto from an agent is ignored", []Event{control("codex", `{"invited_auto":{"on":true}}`)}, func(t *testing.T, s ThreadState) {
			if s.InvitedAuto.On {
				t.Errorf("invited_auto on")
			}
		}},
		{"an agent's control still invites", []Event{control("codex", `{"pause":{"on":true},"invite":{"participant_id":"x","profile":{"client":"c","model":"m"}}}`)}, func(t *testing.T, s ThreadState) {
			if s.Paused {
				t.Errorf("paused by an agent")
			}
			if _, ok := s.Invited("x"); !ok {
				t.Errorf("invite in the same control was dropped")
			}
		}},
		{"cancel leaves the state alone", []Event{control("user", `{"cancel":{"participant_id":"codex"}}`)}, func(t *testing.T, s ThreadState) {
			if !reflect.DeepEqual(s, ThreadState{}) {
				t.Errorf("state = %+v", s)
			}
		}},
		{"prod leaves the state alone", []Event{control("user", `{"prod":["codex"]}`)}, func(t *testing.T, s ThreadState) {
			if !reflect.DeepEqual(s, ThreadState{}) {
				t.Errorf("state = %+v", s)
			}
		}},
		{"malformed control leaves the state alone", []Event{control("user", `{"pause":{}}`), control("user", `[1]`)}, func(t *testing.T, s ThreadState) {
			if !reflect.DeepEqual(s, ThreadState{}) {
				t.Errorf("state = %+v", s)
			}
		}},
		{"other event types leave the state alone", []Event{
			{Type: TypeThreadCreated, From: "user", Content: json.RawMessage(`"x"`)},
			{Type: "custom", From: "codex", Content: json.RawMessage(`{"pause":{"on":true}}`)},
		}, func(t *testing.T, s ThreadState) {
			if !reflect.DeepEqual(s, ThreadState{}) {
				t.Errorf("state = %+v", s)
			}
		}},
		{"messages track the last hop", []Event{message("user", nil), message("codex", nil), message("claude", nil)}, func(t *testing.T, s ThreadState) {
			if s.LastHop != 2 {
				t.Errorf("LastHop = %d, want 2", s.LastHop)
			}
		}},
		{"a stamped hop wins", []Event{message("codex", hop(4)), message("claude", nil)}, func(t *testing.T, s ThreadState) {
			if s.LastHop != 5 {
				t.Errorf("LastHop = %d, want 5", s.LastHop)
			}
		}},
		{"a human message resets the hop", []Event{message("codex", hop(4)), message("user", nil)}, func(t *testing.T, s ThreadState) {
			if s.LastHop != 0 {
				t.Errorf("LastHop = %d, want 0", s.LastHop)
			}
		}},
		{"controls do not change the hop", []Event{message("codex", hop(3)), control("user", `{"pause":{"on":false}}`)}, func(t *testing.T, s ThreadState) {
			if s.LastHop != 3 {
				t.Errorf("LastHop = %d, want 3", s.LastHop)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, foldAll(h, tt.events...))
		})
	}
}

func TestFoldCustomHumans(t *testing.T) {
	t.Parallel()
	humans := Humans{"alice", "bob"}
	s := foldAll(humans, control("bob", `{"pause":{"on":true}}`), control("user", `{"mute":{"targets":["x"]}}`))
	if !s.Paused {
		t.Error("a listed human's pause did not count")
	}
	if s.IsMuted("x") {
		t.Error("user is not a human here, yet its mute counted")
	}
}

// TestFoldDoesNotMutate keeps the promise that states are values: folding
// from an old state never changes it, even when slices share storage.
func TestFoldDoesNotMutate(t *testing.T) {
	t.Parallel()
	h := DefaultHumans
	base := foldAll(h,
		inviteEvent("user", "a", "c", "m"), inviteEvent("user", "b", "c", "m"), inviteEvent("user", "c", "c", "m"),
		control("user", `{"mute":{"targets":["a","b"]}}`), control("user", `{"mute":{"targets":["c"],"mode":"soft"}}`),
	)
	snapshot, err := json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Event{
		control("user", `{"uninvite":{"participant_id":"a"}}`),
		inviteEvent("user", "b", "c", "other"),
		inviteEvent("user", "d", "c", "m"),
		control("user", `{"unmute":{"targets":["a"]}}`),
		control("user", `{"mute":{"targets":["b"],"mode":"soft"}}`),
		control("user", `{"mute":{"targets":["0"]}}`),
		control("user", `{"unmute":{"targets":["c"]}}`),
		message("codex", nil),
	} {
		_ = Fold(base, e, h)
		after, err := json.Marshal(base)
		if err != nil {
			t.Fatal(err)
		}
		if string(after) != string(snapshot) {
			t.Fatalf("Fold(%s) changed its input:\nbefore %s\nafter  %s", e.Content, snapshot, after)
		}
	}
}

func TestHop(t *testing.T) {
	t.Parallel()
	n := func(v int) *int { return &v }
	tests := []struct {
		name string
		last int
		e    Event
		want int
	}{
		{"human", 5, message("user", nil), 0},
		{"the bridge's hop wins over the human list", 5, message("user", n(3)), 3},
		{"stamped reply", 1, message("codex", n(4)), 4},
		{"stamped zero", 3, message("codex", n(0)), 0},
		{"unstamped agent", 2, message("codex", nil), 3},
		{"first agent message", 0, message("codex", nil), 1},
	}
	for _, tt := range tests {
		if got := Hop(ThreadState{LastHop: tt.last}, tt.e, DefaultHumans); got != tt.want {
			t.Errorf("%s: Hop = %d, want %d", tt.name, got, tt.want)
		}
	}
	if got := Hop(ThreadState{LastHop: 2}, message("user", nil), Humans{"alice"}); got != 3 {
		t.Errorf("user is not a human under Humans{alice}: Hop = %d, want 3", got)
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(ThreadState{}.Normalize())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"paused":false,"muted":[],"discussion":{"on":false,"allow_agent_mentions":false},"invited_auto":{"on":false},"participants":{"invited":[]},"party":{"on":false,"agents":[],"max_agents":2,"cross_talk":true},"last_hop":0}`
	if string(b) != want {
		t.Fatalf("JSON = %s\nwant   %s", b, want)
	}
	if !DefaultHumans.Has("user") || DefaultHumans.Has("codex") {
		t.Fatal("DefaultHumans")
	}
}

func TestHumansSame(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b Humans
		same bool
	}{
		{Humans{"user"}, Humans{"user"}, true},
		{Humans{"bob", "alice"}, Humans{"alice", "bob"}, true},
		{Humans{"user", "user"}, Humans{"user"}, true},
		{Humans{"user"}, Humans{"user", "alice"}, false},
		{Humans{"alice"}, Humans{"user"}, false},
		{Humans{}, nil, true},
	} {
		if got := tc.a.Same(tc.b); got != tc.same {
			t.Errorf("%v.Same(%v) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
