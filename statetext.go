package agentbridge

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteStateText renders a thread's derived state as text, the one
// rendering that `agent-bridge state` prints and the MCP server's
// get_state tool answers: the modes (pause, mute, discussion,
// invited_auto, scene, party) one per line, then the invited participants
// with their profiles.
func WriteStateText(w io.Writer, thread string, seq int64, st ThreadState) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	line := func(key, value string) { fmt.Fprintf(tw, "%s:\t%s\n", key, value) }
	fmt.Fprintf(tw, "thread %s at seq %d\n", thread, seq)
	line("paused", onOff(st.Paused))
	line("muted", listOrNone(st.Muted))
	if len(st.SoftMuted) > 0 {
		line("soft-muted", listOrNone(st.SoftMuted))
	}
	line("discussion", fmt.Sprintf("%s (agent mentions %s)", onOff(st.Discussion.On), onOff(st.Discussion.AllowAgentMentions)))
	line("invited_auto", onOff(st.InvitedAuto.On))
	if st.Scene != nil {
		line("scene", st.Scene.String())
	}
	line("party", PartyText(st.Party))
	if len(st.Participants.Invited) == 0 {
		line("invited", "none")
		return tw.Flush()
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "invited:")
	pw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, inv := range st.Participants.Invited {
		p := inv.Profile
		fmt.Fprintf(pw, "  %s\tclient=%s\tmodel=%s", inv.ID, p.Client, p.Model)
		if p.Nickname != "" {
			fmt.Fprintf(pw, "\tnickname=%s", p.Nickname)
		}
		if len(p.Roles) > 0 {
			fmt.Fprintf(pw, "\troles=%s", strings.Join(p.Roles, ","))
		}
		if len(p.Expertise) > 0 {
			fmt.Fprintf(pw, "\texpertise=%s", strings.Join(p.Expertise, ","))
		}
		fmt.Fprintf(pw, "\t(invited by %s)\n", inv.InvitedBy)
	}
	return pw.Flush()
}

// PartyText is party mode in words: "off", or who takes part and how.
func PartyText(p Party) string {
	if !p.On {
		return "off"
	}
	agents := "every invited participant"
	if len(p.Agents) > 0 {
		agents = strings.Join(p.Agents, ", ")
	}
	crossTalk := "with reactions"
	if !p.CrossTalk {
		crossTalk = "without reactions"
	}
	return fmt.Sprintf("on (up to %d of %s, %s)", p.MaxAgents, agents, crossTalk)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}
