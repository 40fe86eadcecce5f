package agentbridge

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
)

func TestParsePartyControl(t *testing.T) {
	t.Parallel()
	tests := []struct {
		content string
		want    *PartyControl
		field   string // the error's field when the control is refused
	}{
		{`{"party":{"on":true}}`, &PartyControl{On: true, Agents: []string{}, MaxAgents: 2, CrossTalk: true}, ""},
		{`{"party":{"on":false}}`, &PartyControl{On: false, Agents: []string{}, MaxAgents: 2, CrossTalk: true}, ""},
		{`{"party":{"on":true,"agents":["a","b"],"max_agents":3,"cross_talk":false}}`, &PartyControl{On: true, Agents: []string{"a", "b"}, MaxAgents: 3, CrossTalk: false}, ""},
		{`{"party":{"on":true,"agents":["a","b","a"]}}`, nil, "content.party.agents"},
		{`{"party":{"on":true,"agents":null,"max_agents":null}}`, &PartyControl{On: true, Agents: []string{}, MaxAgents: 2, CrossTalk: true}, ""},
		{`"{\"party\":{\"on\":true,\"max_agents\":1}}"`, &PartyControl{On: true, Agents: []string{}, MaxAgents: 1, CrossTalk: true}, ""},
		{`{"party":true}`, nil, "content.party"},
		{`{"party":{}}`, nil, "content.party"},
		{`{"party":{"on":"yes"}}`, nil, "content.party"},
		{`{"party":{"on":true,"max_agent":2}}`, nil, "content.party"},
		{`{"party":{"on":true,"agents":"a"}}`, nil, "content.party.agents"},
		{`{"party":{"on":true,"agents":["bad id"]}}`, nil, "content.party.agents"},
		{`{"party":{"on":true,"max_agents":0}}`, nil, "content.party.max_agents"},
		{`{"party":{"on":true,"max_agents":17}}`, nil, "content.party.max_agents"},
		{`{"party":{"on":true,"max_agents":1.5}}`, nil, "content.party.max_agents"},
		{`{"party":{"on":true,"cross_talk":"no"}}`, nil, "content.party.cross_talk"},
	}
	for _, tt := range tests {
		t.Run(tt.content, func(t *testing.T) {
			c, err := ParseControl(json.RawMessage(tt.content))
			if tt.field != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != ECodeInvalidControl || e.Field != tt.field || !isSentence(e.Message) {
					t.Fatalf("err = %v, want invalid_control on %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Party, tt.want) {
				t.Errorf("party = %+v, want %+v", c.Party, tt.want)
			}
		})
	}
}

func TestInviteExpertise(t *testing.T) {
	t.Parallel()
	c, err := ParseControl(json.RawMessage(`{"invite":{"participant_id":"a","profile":{"client":"c","model":"m","expertise":["databases","security"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Invite.Profile.Expertise, []string{"databases", "security"}) {
		t.Errorf("expertise = %q", c.Invite.Profile.Expertise)
	}
	_, err = ParseControl(json.RawMessage(`{"invite":{"participant_id":"a","profile":{"client":"c","model":"m","expertise":"databases"}}}`))
	var e *Error
	if !errors.As(err, &e) || e.Code != ECodeInvalidControl || e.Field != "content.invite" {
		t.Errorf("err = %v, want invalid_control on content.invite", err)
	}
}

func TestIsPartyExit(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]bool{
		"*exit":                           true,
		"ok *EXIT please":                 true,
		"**exit**":                        true,
		"exit":                            false,
		"Goodbye everyone!":               true,
		"goodbyes":                        false,
		"I quit.":                         true,
		"quite right":                     false,
		"let's END   party now":           true,
		"end\nparty":                      true,
		"the endless party":               false,
		"end of the party":                false,
		"QUIT":                            true,
		"what do you think about caching": false,
		"":                                false,
	} {
		if got := IsPartyExit(text); got != want {
			t.Errorf("IsPartyExit(%q) = %v, want %v", text, got, want)
		}
	}
}

func partyMessage(from, to, text string) Event {
	b, _ := json.Marshal(text)
	return Event{Type: TypeMessage, From: from, To: to, Content: b}
}

func TestFoldParty(t *testing.T) {
	t.Parallel()
	h := DefaultHumans
	on := control("user", `{"party":{"on":true,"agents":["a"],"max_agents":3,"cross_talk":false}}`)
	tests := []struct {
		name   string
		events []Event
		want   Party
	}{
		{"default off", nil, Party{}},
		{"on from a human", []Event{on}, Party{On: true, Agents: []string{"a"}, MaxAgents: 3, CrossTalk: false}},
		{"ignored from an agent", []Event{control("codex", `{"party":{"on":true}}`)}, Party{}},
		{"off keeps the settings", []Event{on, control("user", `{"party":{"on":false}}`)}, Party{On: false, Agents: []string{"a"}, MaxAgents: 3}},
		{"exit word from a human to all", []Event{on, partyMessage("user", ToAll, "ok, goodbye")}, Party{On: false, Agents: []string{"a"}, MaxAgents: 3}},
		{"exit word to one participant does not count", []Event{on, partyMessage("user", "a", "goodbye")}, Party{On: true, Agents: []string{"a"}, MaxAgents: 3}},
		{"exit word from an agent does not count", []Event{on, partyMessage("a", ToAll, "I quit")}, Party{On: true, Agents: []string{"a"}, MaxAgents: 3}},
		{"other messages keep it on", []Event{on, partyMessage("user", ToAll, "what about caching?")}, Party{On: true, Agents: []string{"a"}, MaxAgents: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := foldAll(h, tt.events...)
			if !reflect.DeepEqual(s.Party, tt.want) {
				t.Errorf("party = %+v, want %+v", s.Party, tt.want)
			}
		})
	}
}

func TestNormalizeParty(t *testing.T) {
	t.Parallel()
	got := ThreadState{}.Normalize().Party
	if want := (Party{Agents: []string{}, MaxAgents: 2, CrossTalk: true}); !reflect.DeepEqual(got, want) {
		t.Errorf("normalized party = %+v, want %+v", got, want)
	}
	b, _ := json.Marshal(ThreadState{}.Normalize())
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	if string(m["party"]) != `{"on":false,"agents":[],"max_agents":2,"cross_talk":true}` {
		t.Errorf("party JSON = %s", m["party"])
	}
}

func TestAdmitParty(t *testing.T) {
	t.Parallel()
	s := foldAll(DefaultHumans, inviteEvent("user", "a", "c", "m"))
	in := func(content string) EventInput {
		return EventInput{Type: TypeControl, From: "user", To: ToAll, Content: json.RawMessage(content)}
	}
	for _, ok := range []string{
		`{"party":{"on":true}}`,
		`{"party":{"on":true,"agents":["a"]}}`,
		`{"party":{"on":false,"agents":["zz"]}}`,
		`{"invite":{"participant_id":"b","profile":{"client":"c","model":"m"}},"party":{"on":true,"agents":["a","b"]}}`,
		`{"pause":{"on":true}}`,
	} {
		if err := admitParty("T", s, controlOf(t, in(ok))); err != nil {
			t.Errorf("admitParty(%s) = %v", ok, err)
		}
	}
	err := admitParty("T", s, controlOf(t, in(`{"party":{"on":true,"agents":["a","ghost"]}}`)))
	var e *Error
	if !errors.As(err, &e) || e.Code != ECodeInvalidControl || e.Participant != "ghost" || e.Field != "content.party.agents" || !isSentence(e.Message) {
		t.Errorf("err = %#v, want invalid_control naming ghost", err)
	}
	if err := admitParty("T", s, controlOf(t, EventInput{Type: TypeMessage, From: "user", Content: json.RawMessage(`"hi"`)})); err != nil {
		t.Errorf("a message: %v", err)
	}
}
