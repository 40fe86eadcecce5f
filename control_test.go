package agentbridge

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestControlTable holds every key of the parser table to one good value
// (what it parses to) and one bad value (invalid_control on content.<key>),
// so that a key added to the table without a case here fails.
func TestControlTable(t *testing.T) {
	t.Parallel()
	yes := true
	cases := map[string]struct {
		good string
		want Control
		bad  string // "" when every value is accepted
	}{
		"answer":        {`{"event":"01JD0000000000000000000000","fields":{"branch":"main"}}`, Control{Answer: &AnswerControl{Event: "01JD0000000000000000000000", Action: AnswerAccept, Fields: map[string]json.RawMessage{"branch": json.RawMessage(`"main"`)}}}, `{"event":"01JD0000000000000000000000"}`},
		"cancel":        {`{"participant_id":"codex"}`, Control{Cancel: &CancelControl{ParticipantID: "codex"}}, `{"participant_id":"bad id"}`},
		"change":        {`{"discard":{"participant":"codex"}}`, Control{Change: &ChangeControl{Discard: &DiscardChange{Participant: "codex"}}}, `{"merge":{}}`},
		"discussion":    {`{"on":true,"allow_agent_mentions":true}`, Control{Discussion: &DiscussionControl{On: true, AllowAgentMentions: &yes}}, `{"allow_agent_mentions":true}`},
		"invite":        {`{"participant_id":"codex","profile":{"client":"codex","model":"m","nickname":"c","expertise":["db"],"character":"x"}}`, Control{Invite: &InviteControl{ParticipantID: "codex", Profile: Profile{Client: "codex", Model: "m", Nickname: "c", Expertise: []string{"db"}, Character: "x"}}}, `{"participant_id":"codex","profile":{"client":"codex"}}`},
		"invited_auto":  {`{"on":false}`, Control{InvitedAuto: &Toggle{On: false}}, `{"on":"yes"}`},
		"mute":          {`{"targets":["codex"],"mode":"soft"}`, Control{Mute: &MuteControl{Targets: []string{"codex"}, Mode: MuteSoft}}, `{"targets":["codex"],"mode":"loud"}`},
		"party":         {`{"on":true,"max_agents":3}`, Control{Party: &PartyControl{On: true, Agents: []string{}, MaxAgents: 3, CrossTalk: true}}, `{"on":true,"max_agents":99}`},
		"pause":         {`{"on":true}`, Control{Pause: &Toggle{On: true}}, `{}`},
		"permission":    {`{"event":"01JD0000000000000000000000","option":"allow"}`, Control{Permission: &PermissionControl{Event: "01JD0000000000000000000000", Option: "allow"}}, `{"event":"E1"}`},
		"prod":          {`["codex","claude"]`, Control{Prod: []string{"codex", "claude"}}, `[]`},
		"reset_session": {`{"participant_id":"claude"}`, Control{ResetSession: &ResetSessionControl{ParticipantID: "claude"}}, `{"participant_id":""}`},
		"scene":         {`{"on":false}`, Control{Scene: &SceneControl{On: false}}, `{"on":true,"actors":["a"]}`},
		"schedule":      {`{"id":"standup","cron":"0 9 * * 1-5","tz":"Europe/Berlin","event":{"to":"claude","content":"go"}}`, Control{Schedule: &ScheduleControl{ID: "standup", Cron: "0 9 * * 1-5", TZ: "Europe/Berlin", Event: &ScheduleEvent{To: "claude", Content: json.RawMessage(`"go"`)}}}, `{"id":"standup","cron":"0 9 * * *","event":{"content":""}}`},
		"uninvite":      {`{"participant_id":"codex"}`, Control{Uninvite: &UninviteControl{ParticipantID: "codex"}}, `{"id":"codex"}`},
		"unmute":        {`{"targets":["codex"]}`, Control{Unmute: &UnmuteControl{Targets: []string{"codex"}}}, `{"targets":[]}`},
		"workspace":     {`{"name":"app"}`, Control{Workspace: &WorkspaceControl{Name: "app"}}, `{"name":"/etc"}`},
	}
	if got, want := ControlKeys, slices.Sorted(maps.Keys(cases)); !slices.Equal(got, want) {
		t.Fatalf("ControlKeys = %v, want a case for each: %v", got, want)
	}
	for key, tt := range cases {
		t.Run(key, func(t *testing.T) {
			got, err := ParseControl(json.RawMessage(`{"` + key + `":` + tt.good + `}`))
			if err != nil {
				t.Fatalf("good value: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("good value parses to %+v, want %+v", got, tt.want)
			}
			if tt.bad == "" {
				return
			}
			_, err = ParseControl(json.RawMessage(`{"` + key + `":` + tt.bad + `}`))
			var e *Error
			if !errors.As(err, &e) || e.Code != ECodeInvalidControl || !strings.HasPrefix(e.Field, "content."+key) || !isSentence(e.Message) {
				t.Errorf("bad value: %v, want invalid_control on content.%s", err, key)
			}
		})
	}
}

// TestAppendParsesControlOnce: the control AppendRequest.Validate returns
// is the one Admit and FoldParsed take, and folding with it gives what
// Fold (which parses on its own) gives.
func TestAppendParsesControlOnce(t *testing.T) {
	t.Parallel()
	req := AppendRequest{Thread: "t", Input: EventInput{Type: TypeControl, From: "user",
		Content: json.RawMessage(`{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m"}},"party":{"on":true,"agents":["codex"]}}`)}}
	c, err := req.Validate()
	if err != nil || c == nil || c.Invite == nil || c.Party == nil {
		t.Fatalf("Validate = %+v, %v; want the parsed control", c, err)
	}
	if err := Admit("t", ThreadState{}, req.Input, c, ReplyTarget{}, DefaultHumans); err != nil {
		t.Fatalf("Admit: %v", err)
	}
	ev := Event{Seq: 2, Thread: "t", Type: req.Input.Type, From: req.Input.From, To: req.Input.To, Content: req.Input.Content}
	if a, b := FoldParsed(ThreadState{}, ev, c, DefaultHumans), Fold(ThreadState{}, ev, DefaultHumans); !reflect.DeepEqual(a, b) {
		t.Errorf("FoldParsed = %+v, Fold = %+v", a, b)
	}
	msg := AppendRequest{Thread: "t", Input: EventInput{From: "user", Content: json.RawMessage(`"hi"`)}}
	if c, err := msg.Validate(); c != nil || err != nil {
		t.Errorf("a message's Validate = %+v, %v; want no control", c, err)
	}
	for _, bad := range []AppendRequest{
		{Thread: "no such/id", Input: EventInput{From: "user", Content: json.RawMessage(`"hi"`)}},
		{Thread: "t", Input: EventInput{From: "user", Content: json.RawMessage(`"hi"`)}, IdempotencyKey: string(make([]byte, MaxIdempotencyKeyLen+1))},
		{Thread: "t", Input: EventInput{Type: TypeControl, From: "user", Content: json.RawMessage(`{"future":1}`)}},
	} {
		if _, err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want a refusal", bad)
		}
	}
}
