package adapters

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// NoOutput is the reply posted for an adapter that succeeded but printed
// nothing, so the thread still shows that the participant answered.
const NoOutput = "[no output]"

// truncatedMarker ends a reply that was cut to fit max_reply_chars, so
// readers see that something is missing.
const truncatedMarker = "\n[truncated]"

// TruncateReply turns adapter output into reply content: surrounding space
// trimmed, empty output as NoOutput, and output longer than max runes cut so
// that the content plus a visible "[truncated]" line fits in max runes.
// max <= 0 means no limit.
func TruncateReply(s string, max int) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return NoOutput
	}
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	marker := []rune(truncatedMarker)
	if max <= len(marker) {
		// No room for any content: keep as much of the marker's word as fits.
		word := []rune(strings.TrimSpace(truncatedMarker))
		return string(word[:min(max, len(word))])
	}
	kept := []rune(s)[:max-len(marker)]
	return strings.TrimRightFunc(string(kept), isSpace) + truncatedMarker
}

func isSpace(r rune) bool { return strings.ContainsRune(" \t\r\n\v\f", r) }

// RenderPrompt renders a payload as one plain-text prompt: the primer, who
// is in the room, the conversation and the message to answer. The shipped
// claude and codex adapters feed it to their CLI through "agent-bridge
// prompt", so an adapter in shell needs neither jq nor python.
//
// A fresh session gets the primer and the whole context window. A resumed
// one (session.id set) has seen both already, so it gets only the messages
// of since_last_turn: that is what keeps a long thread's next turn small.
// The roster is always sent, as people come and go.
func RenderPrompt(p Payload) string {
	if p.Scene != nil {
		return RenderScenePrompt(p)
	}
	resumed := p.Session.ID != "" && len(p.SinceLastTurn) > 0
	var b strings.Builder
	if primer := strings.TrimSpace(p.Primer); primer != "" && !resumed {
		b.WriteString(primer)
		b.WriteString("\n\n")
	}
	triggerID := p.EventID
	if triggerID == "" {
		triggerID = p.Trigger.ID
	}
	threadName := p.Thread.Name
	if threadName == "" {
		threadName = p.ThreadID
	}
	writeRoster(&b, p.Participants, p.Participant.ID)
	source, heading := p.ContextWindow, "## Conversation so far in thread %q (oldest first)\n\n"
	if resumed {
		source, heading = p.SinceLastTurn, "## New in thread %q since your last turn (oldest first)\n\n"
	}
	var history []agentbridge.Event
	for _, e := range source {
		if e.Type == agentbridge.TypeMessage && (triggerID == "" || e.ID != triggerID) {
			history = append(history, e)
		}
	}
	if len(history) > 0 {
		fmt.Fprintf(&b, heading, threadName)
		for _, e := range history {
			fmt.Fprintf(&b, "%s -> %s: %s\n%s\n", e.From, e.To, strings.TrimSpace(e.Text()), attachmentLines(e, p.Attachments))
		}
	}
	from, to, content := p.From, p.To, p.Content
	if from == "" {
		from = p.Trigger.From
	}
	if to == "" {
		to = p.Trigger.To
	}
	if content == "" {
		content = p.Trigger.Content
	}
	b.WriteString("## The message to answer\n\n")
	fmt.Fprintf(&b, "%s -> %s: %s\n%s\n", from, to, strings.TrimSpace(content), attachmentLines(triggerOf(p, source, triggerID), p.Attachments))
	if p.Participant.ID != "" {
		fmt.Fprintf(&b, "You are %q in this thread. ", p.Participant.ID)
	}
	b.WriteString("Your reply (what you print) is posted to the thread for you.\n")
	b.WriteString(partyInstructions(p))
	return b.String()
}

// triggerOf is the trigger as an event of the payload's events (for its
// attachments); an event without any when they do not hold it.
func triggerOf(p Payload, source []agentbridge.Event, id string) agentbridge.Event {
	for _, events := range [][]agentbridge.Event{source, p.ContextWindow, p.SinceLastTurn} {
		for i := len(events) - 1; i >= 0; i-- {
			if events[i].ID == id {
				return events[i]
			}
		}
	}
	return agentbridge.Event{}
}

// writeRoster lists the room, one line each: how to address a participant
// (its mention handle), what it is, and whether it is there now.
func writeRoster(b *strings.Builder, roster []RosterEntry, self string) {
	if len(roster) == 0 {
		return
	}
	b.WriteString("## Who is in this thread\n\n")
	for _, r := range roster {
		if r.Human {
			fmt.Fprintf(b, "- %s: a person\n", r.ID)
			continue
		}
		var about []string
		if r.Profile != nil {
			if r.Profile.Client != "" {
				about = append(about, r.Profile.Client)
			}
			if r.Profile.Model != "" {
				about = append(about, "model "+r.Profile.Model)
			}
			if r.Profile.Nickname != "" {
				about = append(about, "nickname "+r.Profile.Nickname)
			}
			if len(r.Profile.Roles) > 0 {
				about = append(about, "roles "+strings.Join(r.Profile.Roles, ", "))
			}
		}
		if r.Presence != "" {
			about = append(about, r.Presence)
		}
		mention := r.Mention
		if mention == "" {
			mention = "@" + r.ID
		}
		you := ""
		if r.ID == self {
			you = " (you)"
		}
		fmt.Fprintf(b, "- %s%s: %s\n", mention, you, strings.Join(about, ", "))
	}
	b.WriteString("\n")
}

// ErrorMessage words a failed invocation for the thread: why it failed
// (start failure, interruption, timeout, signal or exit code) followed by
// the tail of its stderr, which is usually where the real reason is.
// timeout is the adapter_timeout_s in force, named in the timeout sentence.
func ErrorMessage(r Result, timeout time.Duration) string {
	var msg string
	switch {
	case r.StartErr != nil:
		msg = fmt.Sprintf("The adapter could not be started: %v.", r.StartErr)
	case r.Interrupted:
		msg = "The adapter was interrupted because the coordinator shut down."
	case r.Cancelled:
		msg = "The run was cancelled."
	case r.GaveUp:
		msg = "The adapter reported that its run failed, and was stopped."
	case r.TimedOut:
		msg = fmt.Sprintf("The adapter did not finish within %s and was stopped.", timeout)
	case r.Signaled:
		msg = fmt.Sprintf("The adapter was killed by signal %d (%v).", int(r.Signal), r.Signal)
	case r.ExitCode != 0:
		msg = fmt.Sprintf("The adapter exited with code %d.", r.ExitCode)
	default:
		msg = "The adapter finished without an error."
	}
	if tail := strings.TrimSpace(string(r.StderrTail)); tail != "" {
		msg += "\n\nThe end of its stderr:\n" + tail
	}
	return msg
}

// StripControls removes NUL and the other C0 control characters except
// newline and tab from b, in place: adapter output is stored as a reply,
// and a terminal or a database column should not receive binary noise
// (contract 6.2). Carriage returns go too, so CRLF output becomes LF.
func StripControls(b []byte) []byte {
	out := b[:0]
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\t' {
			continue
		}
		out = append(out, c)
	}
	return out
}
