package main

import (
	"context"
	"fmt"
	"net/url"
	"text/tabwriter"

	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/spf13/cobra"
)

// sessionsCommand is "sessions [--thread T]", which lists the CLI sessions the
// coordinator keeps, and "sessions reset THREAD ID", which posts the
// reset_session control (docs/coordinator.md#sessions).
func (m *Main) sessionsCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	thread := fs.String("thread", "", "only this thread (its name or id)")
	asJSON := fs.Bool("json", false, "print the sessions as JSON")
	base := m.coordinatorURLFlag(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("sessions takes no arguments (use --thread T, or sessions reset THREAD ID), got %q", pos[0])
		}
		q := url.Values{}
		id, err := m.threadFlagID(ctx, *thread)
		if err != nil {
			return err
		}
		if id != "" {
			q.Set("thread", id)
		}
		var out status.SessionsResponse
		if err := m.statusGet(ctx, base(), "/sessions", q, &out); err != nil {
			return err
		}
		if *asJSON {
			return m.printJSON(out.Sessions)
		}
		if len(out.Sessions) == 0 {
			fmt.Fprintln(m.Stdout, "no sessions")
			return nil
		}
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "THREAD\tPARTICIPANT\tCLIENT\tSESSION\tTURNS\tUPDATED")
		for _, s := range out.Sessions {
			client := s.Client
			if client == "" {
				client = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.Thread, s.Participant, client, s.ID, s.Turns, s.UpdatedAt)
		}
		return tw.Flush()
	}
}

// sessionsResetCommand posts {"reset_session":{"participant_id":ID}}: through
// the bridge, so it reaches whichever coordinator runs the participant.
func (m *Main) sessionsResetCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who asks for the reset (any participant may)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 2 {
			return usagef("sessions reset: give THREAD and the participant ID")
		}
		ctl := map[string]any{"reset_session": map[string]string{"participant_id": pos[1]}}
		return m.postControl(ctx, cf, pos[0], *from, ctl)
	}
}
