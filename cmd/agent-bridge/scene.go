package main

import (
	"context"
	"fmt"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/spf13/cobra"
)

// sceneCommand starts or closes a scene (contract 5.8):
// scene THREAD on --actors a,b [--setting S] [--brief a=TEXT]... or
// scene THREAD off.
func (m *Main) sceneCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who sends the control (a human)")
	actors := fs.String("actors", "", "the actors, in turn order, comma-separated (at least two invited participants)")
	setting := fs.String("setting", "", "the scene's setting, given to every actor")
	first := fs.String("first", "", "the actor who speaks first (default the first actor)")
	soft := fs.Int("soft-cap", agentbridge.DefaultSoftCap, "turns per actor after which it is nudged toward an end")
	hard := fs.Int("hard-cap", agentbridge.DefaultHardCap, "turns per actor at which the scene closes")
	var briefs stringList
	fs.Var(&briefs, "brief", "ACTOR=TEXT: the scene from that actor's perspective (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: agent-bridge scene THREAD on --actors a,b [--setting S] [--brief a=TEXT]... [--first a] [--soft-cap N] [--hard-cap N]\n       agent-bridge scene THREAD off")
		fs.PrintDefaults()
	}
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 2 {
			return usagef("scene: give THREAD and on or off")
		}
		on, ok := parseOnOff(pos[1])
		if !ok {
			return usagef("scene: %q is not on or off", pos[1])
		}
		sc := map[string]any{"on": on}
		if on {
			if *actors == "" {
				return usagef("--actors: required to start a scene (such as --actors maria,sam)")
			}
			sc["actors"] = strings.Split(*actors, ",")
			sc["setting"] = *setting
			sc["soft_cap"], sc["hard_cap"] = *soft, *hard
			if *first != "" {
				sc["first"] = *first
			}
			bm := map[string]string{}
			for _, b := range briefs {
				actor, text, ok := strings.Cut(b, "=")
				if !ok || actor == "" {
					return usagef("--brief: %q is not ACTOR=TEXT", b)
				}
				bm[actor] = text
			}
			sc["briefs"] = bm
		}
		return m.postControl(ctx, cf, pos[0], *from, map[string]any{"scene": sc})
	}
}

// journalCommand prints an actor's journal, kept by the coordinator.
func (m *Main) journalCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	base := m.coordinatorURLFlag(fs)
	asJSON := fs.Bool("json", false, "print the entries as JSON")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usagef("journal takes one argument: the participant id")
		}
		var j status.JournalResponse
		if err := m.statusGet(ctx, base(), "/journals/"+pos[0], nil, &j); err != nil {
			return err
		}
		if *asJSON {
			return m.printJSON(j)
		}
		if len(j.Entries) == 0 {
			_, err := fmt.Fprintf(m.Stdout, "%s has no journal entries yet.\n", pos[0])
			return err
		}
		_, err := fmt.Fprint(m.Stdout, j.Text)
		return err
	}
}

// transcriptCommand prints a thread's transcript: its latest scene, or its
// messages, in seed 000's md or json format.
func (m *Main) transcriptCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	format := fs.String("format", agentbridge.TranscriptMarkdown, "md or json")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usagef("transcript: give one THREAD")
		}
		if !agentbridge.ValidTranscriptFormat(*format) {
			return usagef("--format: %q is not md or json", *format)
		}
		if cf.json {
			if fs.Changed("format") && *format != agentbridge.TranscriptJSON {
				return usagef("transcript: --json is --format json; give one of them")
			}
			*format = agentbridge.TranscriptJSON
		}
		c, err := m.newClient(cf)
		if err != nil {
			return err
		}
		out, err := c.Transcript(ctx, pos[0], *format)
		if err != nil {
			return explain(err, cf.url)
		}
		// JSON is data; Markdown is text for a person, escaped.
		w := m.Stdout
		if *format == agentbridge.TranscriptJSON {
			w = m.rawOut()
		}
		_, err = w.Write(out)
		return err
	}
}
