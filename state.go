package agentbridge

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Profile describes an invited participant: which client runs it, with
// which model, under which nickname and roles. Mentions resolve against it.
type Profile struct {
	Client   string   `json:"client"`
	Model    string   `json:"model"`
	Roles    []string `json:"roles,omitempty"`
	Nickname string   `json:"nickname,omitempty"`
	// Expertise lists topics the participant knows well; party mode
	// selects agents whose expertise matches a message's words.
	Expertise []string `json:"expertise,omitempty"`
	// Character is the participant's character sheet when it plays an
	// actor in a scene (contract 5.8): only its own briefing carries it.
	Character string `json:"character,omitempty"`
}

// Invite is one invited participant of a thread.
type Invite struct {
	ID        string  `json:"id"`
	Profile   Profile `json:"profile"`
	InvitedBy string  `json:"invited_by"`
	InvitedAt string  `json:"invited_at"`
}

// Discussion is the thread's discussion mode: when on with
// AllowAgentMentions, non-human participants may wake others by mention.
type Discussion struct {
	On                 bool `json:"on"`
	AllowAgentMentions bool `json:"allow_agent_mentions"`
}

// Toggle is a per-thread on/off switch.
type Toggle struct {
	On bool `json:"on"`
}

// Participants lists a thread's invited participants in invitation order.
type Participants struct {
	Invited []Invite `json:"invited"`
}

// ThreadState is a thread's derived state: the fold of its events. The zero
// value is the state of an empty thread. A ThreadState is a value: Fold
// never mutates its input, so old states can be kept and compared.
type ThreadState struct {
	Paused bool `json:"paused"`
	// Muted lists hard-muted participants, sorted: the bridge refuses their
	// messages and the coordinator never invokes them.
	Muted []string `json:"muted"`
	// SoftMuted lists participants muted with mode "soft": the coordinator
	// does not invoke them, but their own posts are accepted.
	SoftMuted    []string     `json:"soft_muted,omitempty"`
	Discussion   Discussion   `json:"discussion"`
	InvitedAuto  Toggle       `json:"invited_auto"`
	Participants Participants `json:"participants"`
	// Party is the thread's party mode (contract 5.7).
	Party Party `json:"party"`
	// LastHop is the provenance hop count of the thread's latest message
	// (see Hop).
	LastHop int `json:"last_hop"`
	// Scene is the thread's scene (see SceneState); nil until a human
	// starts one. It is replaced, never modified, when it changes.
	Scene *SceneState `json:"scene,omitempty"`
}

// Humans is the set of participant ids whose controls count (the server's
// --humans and the coordinator's human_ids).
type Humans []string

// Has reports whether id is a human.
func (h Humans) Has(id string) bool { return slices.Contains(h, id) }

// Same reports whether h and other name the same participants, in any
// order and counting repeats once: the server's --humans and the
// coordinator's human_ids must (agent-bridge doctor checks it, and the
// coordinator warns at start).
func (h Humans) Same(other Humans) bool {
	a, b := slices.Sorted(slices.Values(h)), slices.Sorted(slices.Values(other))
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// DefaultHumans is the default human set.
var DefaultHumans = Humans{"user"}

// Invited returns the invite of id and whether id is invited.
func (s ThreadState) Invited(id string) (Invite, bool) {
	for _, inv := range s.Participants.Invited {
		if inv.ID == id {
			return inv, true
		}
	}
	return Invite{}, false
}

// IsMuted reports whether id is muted in either mode.
func (s ThreadState) IsMuted(id string) bool {
	return slices.Contains(s.Muted, id) || slices.Contains(s.SoftMuted, id)
}

// IsHardMuted reports whether the bridge must refuse id's messages.
func (s ThreadState) IsHardMuted(id string) bool { return slices.Contains(s.Muted, id) }

// Normalize makes nil slices empty so that the JSON form always has arrays.
func (s ThreadState) Normalize() ThreadState {
	if s.Muted == nil {
		s.Muted = []string{}
	}
	if s.Participants.Invited == nil {
		s.Participants.Invited = []Invite{}
	}
	if s.Party.Agents == nil {
		s.Party.Agents = []string{}
	}
	if s.Party.MaxAgents == 0 {
		// Never configured: show the settings {"on": true} would give.
		s.Party.MaxAgents, s.Party.CrossTalk = DefaultPartyMaxAgents, true
	}
	return s
}

// Hop returns the provenance hop count of message e given the state before
// it: meta.hop, which the bridge assigns to every message (see AssignHop),
// and for a message stored before it did, 0 from a human and otherwise one
// more than the thread's previous message.
func Hop(s ThreadState, e Event, humans Humans) int {
	if e.Meta.Hop != nil {
		return *e.Meta.Hop
	}
	if humans.Has(e.From) {
		return 0
	}
	return s.LastHop + 1
}

// Fold returns the state after event e. Invites and uninvites count from
// anyone; mute, unmute, pause, discussion and invited_auto only from humans.
// Events that are not messages or valid controls leave the state unchanged
// (the bridge has already refused malformed controls, and the coordinator
// must fold whatever the log holds without failing).
func Fold(s ThreadState, e Event, humans Humans) ThreadState {
	s.Scene = foldScene(s.Scene, e, humans)
	switch e.Type {
	case TypeMessage:
		if PartyExits(s, e, humans) {
			s.Party.On = false
		}
		s.LastHop = Hop(s, e, humans)
		return s
	case TypeControl:
	default:
		return s
	}
	c, err := ParseControl(e.Content)
	if err != nil {
		return s
	}
	human := humans.Has(e.From)
	if c.Invite != nil {
		inv := Invite{ID: c.Invite.ParticipantID, Profile: c.Invite.Profile, InvitedBy: e.From, InvitedAt: e.TS}
		list := slices.Clone(s.Participants.Invited)
		if i := slices.IndexFunc(list, func(x Invite) bool { return x.ID == inv.ID }); i >= 0 {
			// In place, but by and at of the latest invite, as the
			// original's state has it.
			list[i] = inv
		} else {
			list = append(list, inv)
		}
		s.Participants.Invited = list
	}
	if c.Uninvite != nil {
		id := c.Uninvite.ParticipantID
		s.Participants.Invited = slices.DeleteFunc(slices.Clone(s.Participants.Invited), func(x Invite) bool { return x.ID == id })
	}
	if !human {
		return s
	}
	if c.Mute != nil {
		for _, t := range c.Mute.Targets {
			s.Muted = remove(s.Muted, t)
			s.SoftMuted = remove(s.SoftMuted, t)
			if c.Mute.Mode == MuteSoft {
				s.SoftMuted = addSorted(s.SoftMuted, t)
			} else {
				s.Muted = addSorted(s.Muted, t)
			}
		}
	}
	if c.Unmute != nil {
		for _, t := range c.Unmute.Targets {
			s.Muted = remove(s.Muted, t)
			s.SoftMuted = remove(s.SoftMuted, t)
		}
	}
	if c.Pause != nil {
		s.Paused = c.Pause.On
	}
	if c.Discussion != nil {
		s.Discussion = Discussion{On: c.Discussion.On, AllowAgentMentions: c.Discussion.On}
		if c.Discussion.AllowAgentMentions != nil {
			s.Discussion.AllowAgentMentions = *c.Discussion.AllowAgentMentions
		}
	}
	if c.InvitedAuto != nil {
		s.InvitedAuto = Toggle{On: c.InvitedAuto.On}
	}
	if c.Party != nil {
		s = foldParty(s, c.Party)
	}
	return s
}

// remove returns a copy of list without v (nil stays nil).
func remove(list []string, v string) []string {
	if !slices.Contains(list, v) {
		return list
	}
	return slices.DeleteFunc(slices.Clone(list), func(x string) bool { return x == v })
}

func addSorted(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	out := append(slices.Clone(list), v)
	sort.Strings(out)
	return out
}

// Mute modes.
const (
	MuteHard = "hard"
	MuteSoft = "soft"
)

// Control is a parsed control event. A control may carry several known keys
// at once; unknown keys are kept in the stored event but ignored here.
type Control struct {
	Invite      *InviteControl
	Uninvite    *UninviteControl
	Mute        *MuteControl
	Unmute      *UnmuteControl
	Pause       *Toggle
	Discussion  *DiscussionControl
	InvitedAuto *Toggle
	// Prod names participants to invoke once (nil when absent).
	Prod []string
	// Party switches party mode (contract 5.7).
	Party *PartyControl
	// Scene starts or closes a scene (see SceneControl).
	Scene *SceneControl
	// Cancel stops a participant's queued and running invocations in the
	// thread (contract 5.4); it leaves the fold's state as it is.
	Cancel *CancelControl
	// ResetSession makes the coordinator forget a participant's CLI
	// sessions in the thread (contract 5.6); any participant may send it,
	// and it leaves the fold's state as it is.
	ResetSession *ResetSessionControl
}

// ResetSessionControl is {"reset_session":{"participant_id"}}.
type ResetSessionControl struct {
	ParticipantID string `json:"participant_id"`
}

// CancelControl is {"cancel":{"participant_id"}}.
type CancelControl struct {
	ParticipantID string `json:"participant_id"`
}

// InviteControl is {"invite":{"participant_id","profile"}}.
type InviteControl struct {
	ParticipantID string  `json:"participant_id"`
	Profile       Profile `json:"profile"`
}

// UninviteControl is {"uninvite":{"participant_id"}}.
type UninviteControl struct {
	ParticipantID string `json:"participant_id"`
}

// MuteControl is {"mute":{"targets":[..],"mode":"hard"}}.
type MuteControl struct {
	Targets []string `json:"targets"`
	Mode    string   `json:"mode"`
}

// UnmuteControl is {"unmute":{"targets":[..]}}.
type UnmuteControl struct {
	Targets []string `json:"targets"`
}

// DiscussionControl is {"discussion":{"on":bool,"allow_agent_mentions":bool}};
// AllowAgentMentions defaults to On when absent.
type DiscussionControl struct {
	On                 bool
	AllowAgentMentions *bool
}

// ControlKeys are the control keys the product acts on: those ParseControl
// reads, and "permission", the answer to an ACP agent's permission request
// (contract 6.6), which the coordinator reads. A control holding none of
// them does nothing anywhere, so the bridge refuses it (contract 6.3);
// unknown keys next to a known one are kept, as v0 kept them.
var ControlKeys = []string{
	"cancel", "discussion", "invite", "invited_auto", "mute", "party", "pause",
	"permission", "prod", "reset_session", "scene", "uninvite", "unmute",
}

// checkControlKeys refuses control content (already parsed by
// ParseControl) that holds no key of ControlKeys.
func checkControlKeys(content json.RawMessage) error {
	content = bytes.TrimSpace(content)
	if len(content) > 0 && content[0] == '"' {
		var s string
		if json.Unmarshal(content, &s) != nil {
			return nil // ParseControl has refused it already
		}
		content = json.RawMessage(s)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(content, &obj) != nil {
		return nil
	}
	for k := range obj {
		if slices.Contains(ControlKeys, k) {
			return nil
		}
	}
	keys := slices.Sorted(maps.Keys(obj))
	for i, k := range keys {
		keys[i] = strconv.Quote(Clip(k, QuoteRunes))
	}
	got := "no key"
	if len(keys) > 0 {
		got = "only " + strings.Join(keys, ", ")
	}
	return FieldErrorf(ECodeInvalidControl, "content",
		"This control has %s, which nothing acts on; a control needs one of %s.", got, strings.Join(ControlKeys, ", "))
}

// ParseControl parses control content: a JSON object, or a JSON string
// holding one (the original UI sends that). A known key with the wrong shape
// is an *Error with code invalid_control naming the key.
func ParseControl(content json.RawMessage) (Control, error) {
	content = bytes.TrimSpace(content)
	var s string
	if len(content) > 0 && content[0] == '"' {
		if err := json.Unmarshal(content, &s); err != nil {
			return Control{}, FieldErrorf(ECodeInvalidControl, "content", "A control's content must be a JSON object.")
		}
		content = json.RawMessage(s)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(content, &obj); err != nil || obj == nil {
		return Control{}, FieldErrorf(ECodeInvalidControl, "content", "A control's content must be a JSON object, such as {\"pause\":{\"on\":true}}.")
	}
	var c Control
	bad := func(key, msg string, args ...any) error {
		return FieldErrorf(ECodeInvalidControl, "content."+key, msg, args...)
	}
	// In key order, so that content with several malformed keys always
	// gets the same error: map order would pick one at random.
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		v := obj[key]
		switch key {
		case "invite":
			var raw struct {
				ParticipantID *string         `json:"participant_id"`
				Profile       json.RawMessage `json:"profile"`
			}
			if err := json.Unmarshal(v, &raw); err != nil || raw.ParticipantID == nil {
				return Control{}, bad(key, "An invite needs {\"participant_id\": ..., \"profile\": {\"client\": ..., \"model\": ...}}.")
			}
			if !ParticipantIDPattern.MatchString(*raw.ParticipantID) {
				return Control{}, bad(key, "The invited participant id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(*raw.ParticipantID, QuoteRunes))
			}
			var p struct {
				Client   *string  `json:"client"`
				Model    *string  `json:"model"`
				Roles    []string `json:"roles"`
				Nickname *string  `json:"nickname"`
				// Expertise is decoded separately so that a wrong type
				// gets its own sentence.
				Expertise json.RawMessage `json:"expertise"`
				Character *string         `json:"character"`
			}
			if len(raw.Profile) == 0 || json.Unmarshal(raw.Profile, &p) != nil || isNull(raw.Profile) {
				return Control{}, bad(key, "An invite needs a profile object with client and model.")
			}
			if p.Client == nil || *p.Client == "" {
				return Control{}, bad(key, "An invite's profile needs a client (such as \"claude\" or \"codex\").")
			}
			if p.Model == nil || *p.Model == "" {
				return Control{}, bad(key, "An invite's profile needs a model.")
			}
			inv := &InviteControl{ParticipantID: *raw.ParticipantID, Profile: Profile{Client: *p.Client, Model: *p.Model, Roles: p.Roles}}
			if p.Nickname != nil {
				inv.Profile.Nickname = *p.Nickname
			}
			if len(p.Expertise) > 0 && !isNull(p.Expertise) {
				if json.Unmarshal(p.Expertise, &inv.Profile.Expertise) != nil {
					return Control{}, bad(key, "An invite's profile expertise must be a list of strings, such as [\"databases\", \"security\"].")
				}
			}
			if p.Character != nil {
				inv.Profile.Character = *p.Character
			}
			c.Invite = inv
		case "uninvite":
			var raw struct {
				ParticipantID *string `json:"participant_id"`
			}
			if err := json.Unmarshal(v, &raw); err != nil || raw.ParticipantID == nil || !ParticipantIDPattern.MatchString(*raw.ParticipantID) {
				return Control{}, bad(key, "An uninvite needs {\"participant_id\": ...} with a valid participant id.")
			}
			c.Uninvite = &UninviteControl{ParticipantID: *raw.ParticipantID}
		case "mute":
			var raw struct {
				Targets []string `json:"targets"`
				Mode    *string  `json:"mode"`
			}
			if err := json.Unmarshal(v, &raw); err != nil || len(raw.Targets) == 0 || !validIDs(raw.Targets) {
				return Control{}, bad(key, "A mute needs {\"targets\": [participant ids], \"mode\": \"hard\"}.")
			}
			m := &MuteControl{Targets: raw.Targets, Mode: MuteHard}
			if raw.Mode != nil {
				if *raw.Mode != MuteHard && *raw.Mode != MuteSoft {
					return Control{}, bad(key, "A mute's mode must be \"hard\" or \"soft\", not %q.", Clip(*raw.Mode, QuoteRunes))
				}
				m.Mode = *raw.Mode
			}
			c.Mute = m
		case "unmute":
			var raw struct {
				Targets []string `json:"targets"`
			}
			if err := json.Unmarshal(v, &raw); err != nil || len(raw.Targets) == 0 || !validIDs(raw.Targets) {
				return Control{}, bad(key, "An unmute needs {\"targets\": [participant ids]}.")
			}
			c.Unmute = &UnmuteControl{Targets: raw.Targets}
		case "pause", "invited_auto":
			var raw struct {
				On *bool `json:"on"`
			}
			if err := json.Unmarshal(v, &raw); err != nil || raw.On == nil {
				return Control{}, bad(key, "A %s control needs {\"on\": true} or {\"on\": false}.", key)
			}
			t := &Toggle{On: *raw.On}
			if key == "pause" {
				c.Pause = t
			} else {
				c.InvitedAuto = t
			}
		case "discussion":
			var raw struct {
				On                 *bool `json:"on"`
				AllowAgentMentions *bool `json:"allow_agent_mentions"`
			}
			if err := json.Unmarshal(v, &raw); err != nil || raw.On == nil {
				return Control{}, bad(key, "A discussion control needs {\"on\": bool} and optionally \"allow_agent_mentions\": bool.")
			}
			c.Discussion = &DiscussionControl{On: *raw.On, AllowAgentMentions: raw.AllowAgentMentions}
		case "prod":
			var ids []string
			if err := json.Unmarshal(v, &ids); err != nil || len(ids) == 0 || !validIDs(ids) {
				return Control{}, bad(key, "A prod needs a list of participant ids, such as {\"prod\": [\"codex\"]}.")
			}
			c.Prod = ids
		case "party":
			p, err := parseParty(v)
			if err != nil {
				return Control{}, err
			}
			c.Party = p
		case "scene":
			sc, err := parseSceneControl(v)
			if err != nil {
				return Control{}, err
			}
			c.Scene = sc
		case "cancel":
			var raw struct {
				ParticipantID *string `json:"participant_id"`
			}
			if err := json.Unmarshal(v, &raw); err != nil || raw.ParticipantID == nil || !ParticipantIDPattern.MatchString(*raw.ParticipantID) {
				return Control{}, bad(key, "A cancel needs {\"participant_id\": ...} with a valid participant id.")
			}
			c.Cancel = &CancelControl{ParticipantID: *raw.ParticipantID}
		case "reset_session":
			var raw struct {
				ParticipantID *string `json:"participant_id"`
			}
			if err := json.Unmarshal(v, &raw); err != nil || raw.ParticipantID == nil || !ParticipantIDPattern.MatchString(*raw.ParticipantID) {
				return Control{}, bad(key, "A reset_session needs {\"participant_id\": ...} with a valid participant id.")
			}
			c.ResetSession = &ResetSessionControl{ParticipantID: *raw.ParticipantID}
		}
	}
	return c, nil
}

func validIDs(ids []string) bool {
	for _, id := range ids {
		if !ParticipantIDPattern.MatchString(id) {
			return false
		}
	}
	return true
}
