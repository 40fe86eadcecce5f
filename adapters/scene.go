package adapters

import (
	"fmt"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// RenderScenePrompt renders an actor's payload in seed 000's briefing
// order: the actor system prompt (the payload's primer), its character,
// its journal, the scene from its perspective (setting, brief and the
// speeches so far), then the instruction for this step. Only the actor's
// own material is in the payload, so only it can be rendered.
func RenderScenePrompt(p Payload) string {
	sc := p.Scene
	var b strings.Builder
	if primer := strings.TrimSpace(p.Primer); primer != "" {
		b.WriteString(primer)
		b.WriteString("\n\n")
	}
	section := func(title, body, empty string) {
		body = strings.TrimSpace(body)
		if body == "" {
			body = empty
		}
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", title, body)
	}
	section("Your character", sc.Character, "(no character sheet was given: play "+sc.Actor+" as the brief describes)")
	section("Your journal", sc.Journal, "(empty: this is your character's first scene)")
	var persp strings.Builder
	if s := strings.TrimSpace(sc.Setting); s != "" {
		fmt.Fprintf(&persp, "Setting: %s\n\n", s)
	}
	if s := strings.TrimSpace(sc.Brief); s != "" {
		fmt.Fprintf(&persp, "%s\n\n", s)
	}
	if len(sc.With) > 0 {
		fmt.Fprintf(&persp, "You are %s. In the scene with you: %s.\n", sc.Actor, strings.Join(sc.With, ", "))
	}
	var lines []string
	for _, e := range p.ContextWindow {
		if e.Type != agentbridge.TypeMessage || e.ID == p.EventID {
			continue
		}
		if m, ok := agentbridge.SceneMetaOf(e); ok && m.Turn > 0 {
			lines = append(lines, fmt.Sprintf("%s: %s", e.From, strings.TrimSpace(e.Text())))
		}
	}
	if len(lines) > 0 {
		persp.WriteString("\nThe scene so far:\n\n")
		persp.WriteString(strings.Join(lines, "\n\n"))
		persp.WriteString("\n")
	}
	section("The scene — your perspective", persp.String(), "")
	b.WriteString("## Instruction\n\n")
	if sc.Step == agentbridge.SceneStepJournal {
		fmt.Fprintf(&b, "%s\n\nWrite only the journal entry, in %s's voice, without tags.\n", strings.TrimSpace(sc.Nudge), sc.Actor)
		return b.String()
	}
	if p.Trigger.Type == agentbridge.TypeMessage && p.From != "" {
		fmt.Fprintf(&b, "%s, speaking to you: %q\n\n", p.From, strings.TrimSpace(p.Content))
	} else {
		b.WriteString("The scene begins now. You speak first.\n\n")
	}
	if n := strings.TrimSpace(sc.Nudge); n != "" {
		fmt.Fprintf(&b, "%s\n\n", n)
	}
	b.WriteString("Answer in character with <thinking>your private thoughts</thinking> followed by <speech>what you say aloud</speech>.\n")
	return b.String()
}
