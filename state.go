package agentbridge

import (
	"slices"
	"sort"
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
	// Workspace names the coordinator workspace the participant works in,
	// in this thread (contract 8.1); "" leaves it to the thread's
	// workspace control and the agent's config.
	Workspace string `json:"workspace,omitempty"`
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
	// Workspace is the workspace a person's workspace control picked for
	// the thread's agents (contract 8.1); "" for none.
	Workspace string `json:"workspace,omitempty"`
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
// anyone, the other keys only from humans (Control.CountedFrom). Events
// that are not messages or valid controls leave the state unchanged (the
// bridge has already refused malformed controls, and the coordinator must
// fold whatever the log holds without failing).
func Fold(s ThreadState, e Event, humans Humans) ThreadState {
	return FoldParsed(s, e, ControlOf(e), humans)
}

// FoldParsed is Fold given e's control already parsed: c is nil when e is
// not a control or its content does not parse. A store's writer folds what
// it appends with the control AppendRequest.Validate parsed, so that an
// appended control is parsed once; Fold parses it once and hands it on to
// every part of the state it changes.
func FoldParsed(s ThreadState, e Event, c *Control, humans Humans) ThreadState {
	if c != nil {
		counted := c.CountedFrom(e.From, humans)
		c = &counted
	}
	s.Scene = foldScene(s.Scene, e, c)
	switch {
	case e.Type == TypeMessage:
		if PartyExits(s, e, humans) {
			s.Party.On = false
		}
		s.LastHop = Hop(s, e, humans)
		return s
	case e.Type != TypeControl || c == nil:
		return s
	}
	s = foldInvites(s, c, e)
	return foldHumanControl(s, c)
}

// foldInvites applies a control's invite and uninvite, which count from
// anyone.
func foldInvites(s ThreadState, c *Control, e Event) ThreadState {
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
	return s
}

// foldHumanControl applies the parts of a control that count only from a
// human and change the thread's state (mute, unmute, pause, discussion,
// invited_auto, party); c is what counts of the control (CountedFrom), so
// a control from anyone else has none of them.
func foldHumanControl(s ThreadState, c *Control) ThreadState {
	if c.Mute != nil {
		s = foldMute(s, c.Mute)
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
	if c.Workspace != nil {
		s.Workspace = c.Workspace.Name
	}
	return s
}

// foldMute mutes m's targets in m's mode, moving a target muted in the
// other mode.
func foldMute(s ThreadState, m *MuteControl) ThreadState {
	for _, t := range m.Targets {
		s.Muted = remove(s.Muted, t)
		s.SoftMuted = remove(s.SoftMuted, t)
		if m.Mode == MuteSoft {
			s.SoftMuted = addSorted(s.SoftMuted, t)
		} else {
			s.Muted = addSorted(s.Muted, t)
		}
	}
	return s
}

// SnapshotDue reports whether folding e turned before into a state a store
// must keep a snapshot of (when its stored form differs): a control, a
// message ending party mode (an exit word) or a scene event (a speech
// counts a turn). Any other event changes nothing but the last hop, which
// stores keep per event; comparing the scene pointer keeps plain messages
// free of the state's encoding.
func SnapshotDue(before, after ThreadState, e Event) bool {
	return e.Type == TypeControl || (before.Party.On && !after.Party.On) || after.Scene != before.Scene
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
