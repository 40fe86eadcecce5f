package main

import (
	"fmt"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// answerNotes lets tail say which answer to a permission request counted.
// The bridge stores a second answer too (contract 7.2: it has no effect,
// and only its sender is told so), so a tail that printed "reject" and
// then "allow" would leave the reader believing the last one; the note on
// the second says what the first decided.
type answerNotes struct {
	// requests holds the permission requests tail printed, by id.
	requests map[string]agentbridge.Event
	// first holds, by request id, the first answer tail printed.
	first map[string]agentbridge.Event
}

// note records e and returns what to add to its printed line: for an
// answer to a request already answered (as far as this tail has seen
// both), " — no effect: already answered by X: rejected (“Reject”)";
// "" otherwise.
func (a *answerNotes) note(e agentbridge.Event) string {
	if a.requests == nil {
		a.requests, a.first = map[string]agentbridge.Event{}, map[string]agentbridge.Event{}
	}
	if e.Meta.HasTag("permission") && e.Type == agentbridge.TypeMessage {
		a.requests[e.ID] = e
		return ""
	}
	c := agentbridge.ControlOf(e)
	if c == nil || c.Permission == nil {
		return ""
	}
	req, seen := a.requests[c.Permission.Event]
	if !seen {
		return ""
	}
	first, answered := a.first[req.ID]
	if !answered {
		a.first[req.ID] = e
		return ""
	}
	choice := ""
	if fc := agentbridge.ControlOf(first); fc != nil && fc.Permission != nil {
		if words := agentbridge.PermissionChoice(req, fc.Permission.Option); words != "" {
			choice = ": " + words
		}
	}
	return fmt.Sprintf(" — no effect: already answered by %s%s", first.From, choice)
}
