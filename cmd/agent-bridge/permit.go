package main

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"
)

// permitCommand answers an ACP agent's permission request (docs/acp.md): it
// posts the control {"permission": {"event", "option"}} naming the request
// message and one of the options it lists. An answer that counts for
// nothing (the request was already answered, or the sender is no human)
// exits 1 after the bridge's sentence on stderr: the person's decision
// was not the one acted on, which a script must be able to tell.
func (m *Main) permitCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who answers (only a human's answer counts)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 3 {
			return usagef("permit: give THREAD, the permission request's EVENT (its id, or its seq as tail shows it) and the OPTION id it lists")
		}
		event := pos[1]
		if _, err := strconv.ParseInt(event, 10, 64); err == nil {
			// A seq, as tail shows it: the request's id is looked up.
			cl, err := m.newClient(cf)
			if err != nil {
				return err
			}
			if event, err = m.eventArg(ctx, cl, pos[0], event); err != nil {
				return explain(err, cf.url)
			}
		}
		return m.postAnswer(ctx, cf, pos[0], *from, "permission", map[string]string{"event": event, "option": pos[2]})
	}
}
