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
	// prod, permission), sent by a participant the bridge does not count
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
)

// HumanOnlyKeys are the keys of c that count only from humans, in the
// order ParseControl's Control has them: the one list the ignored check
// and the bridge's credential check (a coordinator or agent token may set
// none of them) share.
func HumanOnlyKeys(c Control) []string {
	var keys []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{"mute", c.Mute != nil}, {"unmute", c.Unmute != nil}, {"pause", c.Pause != nil},
		{"discussion", c.Discussion != nil}, {"invited_auto", c.InvitedAuto != nil},
		{"prod", c.Prod != nil}, {"party", c.Party != nil}, {"scene", c.Scene != nil}, {"cancel", c.Cancel != nil},
		{"permission", c.Permission != nil},
	} {
		if k.set {
			keys = append(keys, k.name)
		}
	}
	return keys
}

// IgnoredEffect decides whether e, appended to a thread whose state was
// before, will have no effect, and why; nil when it may have one. It is
// pure: the bridge calls it with the state as of the event's seq - 1.
//
// Only what the bridge knows is judged: controls, and messages addressed
// to one participant. Whether a message to everyone wakes anyone depends
// on mentions and on the coordinator's config, which receipts report.
func IgnoredEffect(before ThreadState, e Event, humans Humans) *Ignored {
	switch e.Type {
	case TypeControl:
		return ignoredControl(before, e, humans)
	case TypeMessage:
		return ignoredMessage(before, e, humans)
	}
	return nil
}

func ignoredControl(before ThreadState, e Event, humans Humans) *Ignored {
	c, err := ParseControl(e.Content)
	if err != nil {
		return nil
	}
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
