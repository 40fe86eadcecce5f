package main

import (
	"context"

	"github.com/spf13/cobra"
)

// permitCommand answers an ACP agent's permission request (docs/acp.md): it
// posts the control {"permission": {"event", "option"}} naming the request
// message and one of the options it lists.
func (m *Main) permitCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	from := fs.String("from", "user", "who answers (only a human's answer counts)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 3 {
			return usagef("permit: give THREAD, the permission request's EVENT id and the OPTION id it lists")
		}
		ctl := map[string]any{"permission": map[string]string{"event": pos[1], "option": pos[2]}}
		return m.postControl(ctx, cf, pos[0], *from, ctl)
	}
}
