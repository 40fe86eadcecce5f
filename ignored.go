package agentbridge

import (
	"fmt"
	"strings"
)

// Ignored says why an event the bridge accepted and stored will have no
// effect (contract 6.4): the append's answer carries it, and the CLI
// prints its reason, so that a control or a post that changes nothing
// does not look like a success.
type Ignored struct {
	// Code is one of the Ignored* codes.
	Code string `json:"code"`
	// Reason is a sentence for a person.
	Reason string `json:"reason"`
}

// Codes of Ignored.
const (
	// IgnoredNotHuman: a control that counts only from a human (mute,
	// unmute, pause, discussion, invited_auto, party, scene, cancel,
	// prod, permission, workspace, change, answer), sent by a participant the bridge does not count
	// as one.
	IgnoredNotHuman = "not_human"
	// IgnoredNotInvited: an uninvite of, or a message to, a participant
	// who is not invited to the thread.
	IgnoredNotInvited = "not_invited"
	// IgnoredMuted: a message to a muted participant, who is not invoked.
	IgnoredMuted = "muted"
	// IgnoredPaused: a message to a participant while the thread is
	// paused; nobody is invoked until it is resumed.
	IgnoredPaused = "paused"
	// IgnoredSceneRunning: a scene start while one runs.
	IgnoredSceneRunning = "scene_running"
	// IgnoredNoScene: a scene close while none runs.
	IgnoredNoScene = "no_scene"
	// IgnoredBadSchedule: a schedule whose cron or time zone the bridge
	// cannot read; the sentence names the field.
	IgnoredBadSchedule = "bad_schedule"
	// IgnoredNoSchedule: a schedule turned off that the thread does not
	// have.
	IgnoredNoSchedule = "no_schedule"
)

// humanOnly is every control key that counts only from a human, in the
// order Control has them, with how to tell it is set and how to drop it:
// the one list the fold (CountedFrom), the ignored check and the
// credential check in AppendRequest.Validate (a coordinator or agent token
// may set none of them) share.
var humanOnly = []struct {
	name string
	set  func(*Control) bool
	drop func(*Control)
}{
	{"mute", func(c *Control) bool { return c.Mute != nil }, func(c *Control) { c.Mute = nil }},
	{"unmute", func(c *Control) bool { return c.Unmute != nil }, func(c *Control) { c.Unmute = nil }},
	{"pause", func(c *Control) bool { return c.Pause != nil }, func(c *Control) { c.Pause = nil }},
	{"discussion", func(c *Control) bool { return c.Discussion != nil }, func(c *Control) { c.Discussion = nil }},
	{"invited_auto", func(c *Control) bool { return c.InvitedAuto != nil }, func(c *Control) { c.InvitedAuto = nil }},
	{"prod", func(c *Control) bool { return c.Prod != nil }, func(c *Control) { c.Prod = nil }},
	{"party", func(c *Control) bool { return c.Party != nil }, func(c *Control) { c.Party = nil }},
	{"scene", func(c *Control) bool { return c.Scene != nil }, func(c *Control) { c.Scene = nil }},
	{"cancel", func(c *Control) bool { return c.Cancel != nil }, func(c *Control) { c.Cancel = nil }},
	{"permission", func(c *Control) bool { return c.Permission != nil }, func(c *Control) { c.Permission = nil }},
	{"workspace", func(c *Control) bool { return c.Workspace != nil }, func(c *Control) { c.Workspace = nil }},
	{"change", func(c *Control) bool { return c.Change != nil }, func(c *Control) { c.Change = nil }},
	{"schedule", func(c *Control) bool { return c.Schedule != nil }, func(c *Control) { c.Schedule = nil }},
	{"answer", func(c *Control) bool { return c.Answer != nil }, func(c *Control) { c.Answer = nil }},
}

// HumanOnlyKeys are the keys of c that count only from humans, in the
// order Control has them.
func HumanOnlyKeys(c Control) []string {
	var keys []string
	for _, k := range humanOnly {
		if k.set(&c) {
			keys = append(keys, k.name)
		}
	}
	return keys
}

// CountedFrom is the part of c that counts when from sends it: all of it
// from a human, and without the human-only keys (HumanOnlyKeys) from anyone
// else.
func (c Control) CountedFrom(from string, humans Humans) Control {
	if humans.Has(from) {
		return c
	}
	for _, k := range humanOnly {
		k.drop(&c)
	}
	return c
}

// IgnoredEffect decides whether e, appended to a thread whose state was
// before, will have no effect, and why; nil when it may have one. c is e's
// control as parsed once on its path (AppendRequest.Validate, or ControlOf
// for a stored event); nil when e is not a control or does not parse. It
// is pure: the bridge calls it with the state as of the event's seq - 1.
//
// Only what the bridge knows is judged: controls, and messages addressed
// to one participant. Whether a message to everyone wakes anyone depends
// on mentions and on the coordinator's config, which receipts report.
func IgnoredEffect(before ThreadState, e Event, c *Control, humans Humans) *Ignored {
	switch e.Type {
	case TypeControl:
		if c == nil {
			return nil
		}
		return ignoredControl(before, e, *c, humans)
	case TypeMessage:
		return ignoredMessage(before, e, humans)
	}
	return nil
}

func ignoredControl(before ThreadState, e Event, c Control, humans Humans) *Ignored {
	if keys := HumanOnlyKeys(c); len(keys) > 0 && !humans.Has(e.From) {
		what := strings.Join(keys, ", ")
		reason := fmt.Sprintf("%s counts only from a human (%s), and %q is not one, so it has no effect", what, strings.Join(humans, ", "), e.From)
		if c.Invite != nil || c.Uninvite != nil || c.ResetSession != nil {
			reason = fmt.Sprintf("%s counts only from a human (%s), and %q is not one; the rest of the control counts", what, strings.Join(humans, ", "), e.From)
		}
		return &Ignored{Code: IgnoredNotHuman, Reason: reason}
	}
	if c.Uninvite != nil {
		if _, ok := before.Invited(c.Uninvite.ParticipantID); !ok {
			return &Ignored{Code: IgnoredNotInvited, Reason: fmt.Sprintf("%q is not invited to this thread, so the uninvite has no effect", c.Uninvite.ParticipantID)}
		}
	}
	if c.Scene != nil {
		switch {
		case c.Scene.On && before.Scene.Running():
			return &Ignored{Code: IgnoredSceneRunning, Reason: "a scene is already running in this thread, so this one does not start; close it first (scene off)"}
		case !c.Scene.On && !before.Scene.Running():
			return &Ignored{Code: IgnoredNoScene, Reason: "no scene is running in this thread, so there is nothing to close"}
		}
	}
	return nil
}

func ignoredMessage(before ThreadState, e Event, humans Humans) *Ignored {
	to := e.To
	if to == "" || to == ToAll || humans.Has(to) {
		return nil
	}
	if _, ok := before.Invited(to); !ok {
		return &Ignored{Code: IgnoredNotInvited, Reason: fmt.Sprintf("%q is not invited to this thread, so no agent answers this message; invite it first", to)}
	}
	if before.IsMuted(to) {
		return &Ignored{Code: IgnoredMuted, Reason: fmt.Sprintf("%q is muted in this thread, so it is not invoked; unmute it first", to)}
	}
	if before.Paused {
		return &Ignored{Code: IgnoredPaused, Reason: fmt.Sprintf("the thread is paused, so %q is not invoked until it is resumed (pause off)", to)}
	}
	return nil
}

// NeedsIgnoredCheck reports whether IgnoredEffect may say anything about
// e, so that the bridge reads the thread's state only for those events.
func NeedsIgnoredCheck(e Event, humans Humans) bool {
	switch e.Type {
	case TypeControl:
		return true
	case TypeMessage:
		return e.To != "" && e.To != ToAll && !humans.Has(e.To)
	}
	return false
}
