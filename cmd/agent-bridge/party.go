package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agent-bridge/agent-bridge/coordinator/rules"
	"github.com/spf13/cobra"
)

// partyCommand implements `agent-bridge party THREAD on|off`: it posts the
// party control (contract 5.7).
func (m *Main) partyCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who sends the control (party mode counts only from humans)")
	agents := fs.String("agents", "", "comma-separated participant ids the rounds choose from (default: every invited participant)")
	maxAgents := fs.Int("max-agents", 2, "how many agents a round selects, 1 to 16 (mentions may add more)")
	noCrossTalk := fs.Bool("no-cross-talk", false, "skip round 2, the agents' reactions to each other")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 2 || (pos[1] != "on" && pos[1] != "off") {
			return usagef("party: give THREAD and on or off")
		}
		if pos[1] == "off" {
			return m.postControl(ctx, cf, pos[0], *from, map[string]any{"party": map[string]any{"on": false}})
		}
		if *maxAgents < 1 || *maxAgents > 16 {
			return usagef("--max-agents: must be from 1 to 16, not %s", strconv.Itoa(*maxAgents))
		}
		party := map[string]any{"on": true, "max_agents": *maxAgents, "cross_talk": !*noCrossTalk}
		if *agents != "" {
			var ids []string
			for _, id := range strings.Split(*agents, ",") {
				if id = strings.TrimSpace(id); id != "" {
					ids = append(ids, id)
				}
			}
			party["agents"] = ids
		}
		return m.postControl(ctx, cf, pos[0], *from, map[string]any{"party": party})
	}
}

// printPartySelection words a party round's selection for `why`: who was
// selected and why (mention, matched words, rotation), in order, and who
// was not.
func printPartySelection(w io.Writer, sel *rules.PartySelection) {
	if sel == nil {
		return
	}
	crossTalk := "on"
	if !sel.CrossTalk {
		crossTalk = "off"
	}
	fmt.Fprintf(w, "party round: max_agents %d, cross_talk %s; words compared: %s\n", sel.MaxAgents, crossTalk, orNone(sel.Words))
	fmt.Fprintln(w, "party selected (in order):")
	for _, p := range sel.Selected {
		fmt.Fprintf(w, "  %s\n", partyPickLine(p))
	}
	if len(sel.Selected) == 0 {
		fmt.Fprintln(w, "  nobody")
	}
	if len(sel.NotSelected) > 0 {
		fmt.Fprintln(w, "party not selected:")
		for _, p := range sel.NotSelected {
			fmt.Fprintf(w, "  %s\n", partyPickLine(p))
		}
	}
}

func partyPickLine(p rules.PartyPick) string {
	s := p.Participant + ": " + p.Reason
	if len(p.Matched) > 0 {
		s += " (" + strings.Join(p.Matched, ", ") + ")"
	}
	if p.Rank > 0 {
		s += fmt.Sprintf("; rank %d", p.Rank)
	}
	return s + fmt.Sprintf("; %d party turns before", p.Turns)
}

func orNone(words []string) string {
	if len(words) == 0 {
		return "none"
	}
	return strings.Join(words, ", ")
}
