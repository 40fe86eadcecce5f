package adapters

import (
	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Payload is the JSON object written to an adapter's stdin (contract §4,
// "Adapter protocol"). It carries the flat fields of the seed's contract and
// the nested ones of the original implementation, because adapter scripts
// written for either read it; docs/adapter-protocol.md and
// testdata/payload.golden.json pin its shape.
type Payload struct {
	ThreadID string `json:"thread_id"`
	EventID  string `json:"event_id"`
	From     string `json:"from"`
	To       string `json:"to"`
	Content  string `json:"content"`
	// ContextWindow holds the thread's last events, oldest first; it is
	// never null in JSON so that adapters can iterate without a check.
	ContextWindow []agentbridge.Event `json:"context_window"`
	Bridge        BridgeInfo          `json:"bridge"`
	Thread        ThreadInfo          `json:"thread"`
	Participant   ParticipantInfo     `json:"participant"`
	Trigger       TriggerInfo         `json:"trigger"`
	// Primer is the text of the primer file (docs/bridge-agent-primer.md by
	// default), sent with every invocation so adapters stay stateless.
	Primer string `json:"primer"`
	// Participants is the room (contract 5.6): every invited participant
	// with its profile, presence and mention handle, then each human.
	// Never null.
	Participants []RosterEntry `json:"participants"`
	// Session is the CLI session the coordinator kept for this
	// (thread, participant, client); its ID is empty for a fresh one.
	Session SessionInfo `json:"session"`
	// SinceLastTurn holds the thread's events after this participant's
	// previous reply, up to and including the trigger, oldest first (at
	// most MaxSinceLastTurn; other participants' private events left
	// out), so a resumed session is sent only what it has not seen. Never
	// null.
	SinceLastTurn []agentbridge.Event `json:"since_last_turn"`
	// Scene is set when the participant plays an actor in a scene
	// (contract 5.8): its own briefing only, never another actor's.
	Scene *ScenePayload `json:"scene,omitempty"`
	// Party is set for a party round's invocations (contract 5.7).
	Party *PartyInfo `json:"party,omitempty"`
	// Attachments are the files the payload's events name (contract
	// 8.2), each with the path of this run's copy. Never null.
	Attachments []Attachment `json:"attachments"`
	// Workspace is set when the participant works in a workspace
	// (contract 8.1): the worktree the adapter runs in.
	Workspace *WorkspaceInfo `json:"workspace,omitempty"`
}

// WorkspaceInfo is the payload's workspace: the config's name for it, the
// worktree's folder (the adapter's working directory), its branch and the
// branch it started from.
type WorkspaceInfo struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Branch string `json:"branch"`
	Base   string `json:"base"`
}

// MaxSinceLastTurn caps Payload.SinceLastTurn: a participant that has been
// away longer gets the most recent events only.
const MaxSinceLastTurn = 200

// RosterEntry is one member of the room. An invited participant has its
// profile, presence (a presence state; offline when it has reported none)
// and Mention, the handle that wakes it; a human has Human set only.
type RosterEntry struct {
	ID       string               `json:"id"`
	Profile  *agentbridge.Profile `json:"profile,omitempty"`
	Presence string               `json:"presence,omitempty"`
	Mention  string               `json:"mention,omitempty"`
	Human    bool                 `json:"human,omitempty"`
}

// SessionInfo is the CLI session to resume: ID is the CLI's own session id
// ("" = start a new one) and Turns how many turns it has had.
type SessionInfo struct {
	ID    string `json:"id"`
	Turns int    `json:"turns"`
}

// Roster builds Payload.Participants from the thread's invites, the
// presence the bridge reports (by participant id) and the human ids. A
// profile's character sheet is left out: it belongs to its actor's own
// scene briefing and is never shown to another participant.
func Roster(invited []agentbridge.Invite, presence map[string]string, humans []string) []RosterEntry {
	out := make([]RosterEntry, 0, len(invited)+len(humans))
	for _, inv := range invited {
		profile := inv.Profile
		profile.Character = ""
		st := presence[inv.ID]
		if st == "" {
			st = agentbridge.PresenceOffline
		}
		out = append(out, RosterEntry{ID: inv.ID, Profile: &profile, Presence: st, Mention: "@" + inv.ID})
	}
	for _, h := range humans {
		out = append(out, RosterEntry{ID: h, Human: true})
	}
	return out
}

// ScenePayload is an actor's briefing: its own character sheet, journal
// and brief, the setting, the turn and, when the coordinator has one, a
// nudge (the correction, soft-cap or journal prompt). Step says whether the
// actor is to speak (turn) or write its journal entry (journal).
type ScenePayload struct {
	Actor     string `json:"actor"`
	Character string `json:"character"`
	Journal   string `json:"journal"`
	Brief     string `json:"brief"`
	Setting   string `json:"setting"`
	Turn      int    `json:"turn"`
	Nudge     string `json:"nudge,omitempty"`
	Step      string `json:"step"`
	// With lists the other actors' ids, so the actor knows whom it is
	// talking to (their sheets and briefs stay private).
	With []string `json:"with"`
}

// PartyInfo tells a party round's agent which round it is in: 1, where it
// answers on its own, or 2, where it has every round-1 answer in its context
// and reacts once or passes. Selected lists the round's agents.
type PartyInfo struct {
	Round    int      `json:"round"`
	Selected []string `json:"selected"`
}

// BridgeInfo tells the adapter where the bridge is, so it can read more of
// the thread than the context window if it wants to.
type BridgeInfo struct {
	URL string `json:"url"`
}

// ThreadInfo names the thread the trigger belongs to.
type ThreadInfo struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ParticipantInfo is who the adapter is speaking for: one adapter command
// can serve several invited participants, each with its own model.
type ParticipantInfo struct {
	ID      string              `json:"id"`
	Profile agentbridge.Profile `json:"profile"`
}

// TriggerInfo is the event that woke the participant, with its content as
// text (a control's JSON object is given as its JSON text).
type TriggerInfo struct {
	ID      string `json:"id"`
	Seq     int64  `json:"seq"`
	TS      string `json:"ts"`
	Type    string `json:"type"`
	From    string `json:"from"`
	To      string `json:"to"`
	Content string `json:"content"`
}

// NewPayload assembles the payload for one (trigger, participant) pair. The
// flat fields repeat the trigger's, as both generations of adapters expect.
// context may be nil; it is sent as an empty array.
//
// A prod (a control event) carries JSON an agent should not have to
// interpret, so its content is replaced by ProdContent's sentence; the
// context window still holds the control itself.
func NewPayload(bridgeURL string, thread agentbridge.Thread, trigger agentbridge.Event, participant string, profile agentbridge.Profile, context []agentbridge.Event, primer string) Payload {
	if context == nil {
		context = []agentbridge.Event{}
	}
	since := context
	if len(since) > MaxSinceLastTurn {
		since = since[len(since)-MaxSinceLastTurn:]
	}
	threadID := trigger.Thread
	if threadID == "" {
		threadID = thread.ID
	}
	content := trigger.Text()
	if trigger.Type == agentbridge.TypeControl {
		content = ProdContent(trigger.From)
	}
	return Payload{
		ThreadID:      threadID,
		EventID:       trigger.ID,
		From:          trigger.From,
		To:            trigger.To,
		Content:       content,
		ContextWindow: context,
		Bridge:        BridgeInfo{URL: bridgeURL},
		Thread:        ThreadInfo{ID: threadID, Name: thread.Name},
		Participant:   ParticipantInfo{ID: participant, Profile: profile},
		Trigger: TriggerInfo{
			ID:      trigger.ID,
			Seq:     trigger.Seq,
			TS:      trigger.TS,
			Type:    trigger.Type,
			From:    trigger.From,
			To:      trigger.To,
			Content: content,
		},
		Primer:        primer,
		Participants:  []RosterEntry{},
		SinceLastTurn: since,
		Attachments:   AttachmentsOf(context),
	}
}

// Environment variable names set for every adapter (contract §4).
const (
	EnvBridgeURL     = agentbridge.EnvBridgeURL
	EnvThreadID      = "BRIDGE_THREAD_ID"
	EnvEventID       = "BRIDGE_EVENT_ID"
	EnvParticipantID = "BRIDGE_PARTICIPANT_ID"
	// EnvAgentBridgeBin is the absolute path of the running agent-bridge
	// binary; the shipped shell adapters use it to run "agent-bridge prompt"
	// without depending on PATH. The coordinator sets it.
	EnvAgentBridgeBin = "AGENT_BRIDGE_BIN"
)

// BridgeEnv returns the BRIDGE_* variables for p as KEY=VALUE entries, to be
// appended after the agent entry's env in Spec.Env (later entries win).
func BridgeEnv(p Payload) []string {
	return []string{
		EnvBridgeURL + "=" + p.Bridge.URL,
		EnvThreadID + "=" + p.ThreadID,
		EnvEventID + "=" + p.EventID,
		EnvParticipantID + "=" + p.Participant.ID,
	}
}

// ProdContent is the message an adapter receives when a human prods its
// participant: a plain request to look at the thread.
func ProdContent(from string) string {
	return from + " prodded you: read the conversation and reply if you have something to add."
}
