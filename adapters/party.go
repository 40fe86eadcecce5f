package adapters

import (
	"fmt"
	"strings"
)

// partyInstructions tells a party round's agent what the round expects
// (seed 002's two sub-agent prompts, in short): an answer of its own in
// round 1, a reaction or [PASS] in round 2. Empty outside party mode.
func partyInstructions(p Payload) string {
	if p.Party == nil {
		return ""
	}
	others := make([]string, 0, len(p.Party.Selected))
	for _, id := range p.Party.Selected {
		if id != p.Participant.ID {
			others = append(others, id)
		}
	}
	with := "the other agents"
	if len(others) > 0 {
		with += " (" + strings.Join(others, ", ") + ")"
	}
	if p.Party.Round < 2 {
		return fmt.Sprintf("This thread is in party mode, round 1: %s answer the same message in parallel, and you do not see their answers yet. "+
			"Give your own view, in character and to the point (a few paragraphs at most), without referring to the others. "+
			"To ask the person something only they can decide, start a line with [USER QUESTION]:.\n", with)
	}
	return fmt.Sprintf("This thread is in party mode, round 2: the conversation above ends with the round-1 answers (yours among them). "+
		"React once to what %s said: build on a point, disagree and say why, ask one of them something, or add what everyone missed (one to three paragraphs). "+
		"If you have nothing meaningful to add, reply exactly [PASS] and nothing is posted. "+
		"To ask the person a question, start a line with [USER QUESTION]:.\n", with)
}
