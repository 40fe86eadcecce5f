package mcpserver

import (
	"fmt"
	"io"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// writeEvents renders events one per entry: a header line with what a model
// needs to refer back (seq, id, sender, recipient, reply link) and the
// content, continuation lines indented so entries stay apart.
func writeEvents(w io.Writer, events []agentbridge.Event) {
	for _, e := range events {
		writeEvent(w, e)
	}
}

func writeEvent(w io.Writer, e agentbridge.Event) {
	fmt.Fprintf(w, "#%d id=%s %s %s -> %s", e.Seq, e.ID, shortTime(e.TS), e.From, e.To)
	if e.Type != agentbridge.TypeMessage {
		fmt.Fprintf(w, " [%s]", e.Type)
	}
	if e.Meta.ReplyTo != "" {
		fmt.Fprintf(w, " reply_to=%s", e.Meta.ReplyTo)
	}
	if len(e.Meta.Tags) > 0 {
		fmt.Fprintf(w, " tags=%s", strings.Join(e.Meta.Tags, ","))
	}
	text := strings.TrimRight(e.Text(), "\n")
	fmt.Fprintf(w, ":\n  %s\n", strings.ReplaceAll(text, "\n", "\n  "))
}

// shortTime drops the date's fractional seconds: "2026-11-23 21:09:23Z".
// A timestamp of another shape is shown as it is.
func shortTime(ts string) string {
	if len(ts) >= 19 && ts[10] == 'T' {
		return ts[:10] + " " + ts[11:19] + "Z"
	}
	return ts
}

// writeState renders a thread's state in the lines `agent-bridge state`
// starts with (pause, mute, discussion, invited_auto, the invited); it
// leaves out the scene, party and expertise lines the CLI adds (issue 24:
// one renderer for both is still to come).
func writeState(w io.Writer, thread string, seq int64, st agentbridge.ThreadState) {
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	list := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return strings.Join(l, ", ")
	}
	fmt.Fprintf(w, "Thread %s at seq %d\n", thread, seq)
	fmt.Fprintf(w, "paused: %s\n", onOff(st.Paused))
	fmt.Fprintf(w, "muted: %s\n", list(st.Muted))
	if len(st.SoftMuted) > 0 {
		fmt.Fprintf(w, "soft-muted: %s\n", list(st.SoftMuted))
	}
	fmt.Fprintf(w, "discussion: %s (agent mentions %s)\n", onOff(st.Discussion.On), onOff(st.Discussion.AllowAgentMentions))
	fmt.Fprintf(w, "invited_auto: %s\n", onOff(st.InvitedAuto.On))
	if len(st.Participants.Invited) == 0 {
		fmt.Fprintln(w, "invited: none")
		return
	}
	fmt.Fprintln(w, "invited:")
	for _, inv := range st.Participants.Invited {
		p := inv.Profile
		fmt.Fprintf(w, "  %s: client=%s model=%s", inv.ID, p.Client, p.Model)
		if p.Nickname != "" {
			fmt.Fprintf(w, " nickname=%s", p.Nickname)
		}
		if len(p.Roles) > 0 {
			fmt.Fprintf(w, " roles=%s", strings.Join(p.Roles, ","))
		}
		fmt.Fprintf(w, " (invited by %s)\n", inv.InvitedBy)
	}
}
