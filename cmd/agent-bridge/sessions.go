package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"text/tabwriter"

	"github.com/agent-bridge/agent-bridge/coordinator"
)

// runSessions is "sessions [--thread T]", which lists the CLI sessions the
// coordinator keeps, and "sessions reset THREAD ID", which posts the
// reset_session control (docs/coordinator.md#sessions).
func (m *Main) runSessions(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "reset" {
		return m.runSessionsReset(ctx, args[1:])
	}
	fs := m.newFlagSet("sessions")
	thread := fs.String("thread", "", "only this thread")
	asJSON := fs.Bool("json", false, "print the sessions as JSON")
	base := m.coordinatorURLFlag(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("sessions takes no arguments (use --thread T, or sessions reset THREAD ID), got %q", pos[0])
	}
	q := url.Values{}
	if *thread != "" {
		q.Set("thread", *thread)
	}
	var out coordinator.SessionsResponse
	if err := m.statusGet(ctx, *base, "/sessions", q, &out); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out.Sessions)
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

// runSessionsReset posts {"reset_session":{"participant_id":ID}}: through
// the bridge, so it reaches whichever coordinator runs the participant.
func (m *Main) runSessionsReset(ctx context.Context, args []string) error {
	fs := m.newFlagSet("sessions reset")
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who asks for the reset (any participant may)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("sessions reset: give THREAD and the participant ID")
	}
	ctl := map[string]any{"reset_session": map[string]string{"participant_id": pos[1]}}
	return m.postControl(ctx, cf, pos[0], *from, ctl)
}
