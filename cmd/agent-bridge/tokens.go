package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// tokensAddCommand is "agent-bridge tokens add": a new token, its secret
// printed once.
func (m *Main) tokensAddCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	scope := fs.String("scope", "", "person, coordinator, agent or read (required)")
	name := fs.String("name", "", "what the token is called in tokens list (required)")
	thread := fs.String("thread", "", "the thread an agent token is bound to")
	participant := fs.String("participant", "", "the participant an agent token writes as (a coordinator token: its own id)")
	ttl := fs.Duration("ttl", 0, "how long the token lives, such as 12h (default: no expiry; an agent token at most 24h)")
	agents := fs.StringSlice("agents", nil, "a coordinator token's allow-list: the agent names (and clients) its registrations may list, such as claude,codex (default: any)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("tokens add: unexpected argument %q", pos[0])
		}
		if len(*agents) > 0 && *scope != agentbridge.ScopeCoordinator {
			return usagef("--agents: only a coordinator token carries a list of agents")
		}
		if *scope == "" || *name == "" {
			return usagef("tokens add: give --scope and --name")
		}
		if *ttl < 0 || (*ttl > 0 && *ttl < time.Second) {
			return usagef("--ttl: %s is not a positive duration of a second or more", *ttl)
		}
		cl, err := m.newClient(cf)
		if err != nil {
			return err
		}
		t, err := cl.CreateToken(ctx, agentbridge.TokenInput{Scope: *scope, Name: *name, Thread: *thread, Participant: *participant, TTLSeconds: int64(*ttl / time.Second), Agents: *agents})
		if err != nil {
			return explain(err, cf.url)
		}
		if cf.json {
			return m.printJSON(t)
		}
		fmt.Fprintln(m.Stdout, t.Secret)
		fmt.Fprintf(m.Stderr, "token %s (%s, %s) made; its secret, above, is shown this once\n", t.ID, t.Name, t.Scope)
		return nil
	}
}

// tokensListCommand is "agent-bridge tokens list".
func (m *Main) tokensListCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	all := fs.Bool("all", false, "also the revoked and expired tokens")
	return func(ctx context.Context, pos []string) error {
		cl, err := m.noArgsClient("tokens list", cf, pos)
		if err != nil {
			return err
		}
		list, err := cl.Tokens(ctx)
		if err != nil {
			return explain(err, cf.url)
		}
		now := time.Now()
		shown := list[:0]
		for _, t := range list {
			if *all || t.Valid(now) {
				shown = append(shown, t)
			}
		}
		if cf.json {
			return m.printJSON(shown)
		}
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSCOPE\tBINDING\tCREATED\tEXPIRES\tREVOKED")
		for _, t := range shown {
			binding := strings.Trim(t.Thread+"/"+t.Participant, "/")
			if t.Agents != "" {
				binding = strings.Trim(binding+" agents:"+t.Agents, " ")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Scope, dash(binding), t.CreatedAt, dash(t.ExpiresAt), dash(t.RevokedAt))
		}
		return tw.Flush()
	}
}

// dash is s, or "-" for nothing.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tokensRevokeCommand is "agent-bridge tokens revoke ID|NAME": by id, or
// every valid token of that name.
func (m *Main) tokensRevokeCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usagef("tokens revoke: give one token id or name")
		}
		cl, err := m.newClient(cf)
		if err != nil {
			return err
		}
		list, err := cl.Tokens(ctx)
		if err != nil {
			return explain(err, cf.url)
		}
		var ids []string
		now := time.Now()
		for _, t := range list {
			if t.ID == pos[0] || (t.Name == pos[0] && t.Valid(now)) {
				ids = append(ids, t.ID)
			}
		}
		if len(ids) == 0 {
			return usagef("tokens revoke: no token has the id %q, and no valid token the name (see agent-bridge tokens list --all)", pos[0])
		}
		for _, id := range ids {
			t, err := cl.RevokeToken(ctx, id)
			if err != nil {
				return explain(err, cf.url)
			}
			if cf.json {
				if err := m.printJSON(t); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(m.Stdout, "revoked %s (%s, %s) at %s\n", t.ID, t.Name, t.Scope, t.RevokedAt)
		}
		return nil
	}
}

// loginLinkCommand is "agent-bridge login-link": a one-time link that
// opens the web UI logged in, as up prints it.
func (m *Main) loginLinkCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	return func(ctx context.Context, pos []string) error {
		cl, err := m.noArgsClient("login-link", cf, pos)
		if err != nil {
			return err
		}
		path, link, err := cl.LoginLink(ctx)
		if err != nil {
			return explain(err, cf.url)
		}
		if link == "" {
			link = strings.TrimRight(cf.url, "/") + path
		}
		fmt.Fprintln(m.Stdout, link)
		return nil
	}
}

// whoamiCommand prints who the CLI's token is (GET /auth/whoami): the
// participant id it writes as, as the web UI posts, and the token's name,
// scope and id; --json prints the bridge's answer.
func (m *Main) whoamiCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	return func(ctx context.Context, pos []string) error {
		cl, err := m.noArgsClient("whoami", cf, pos)
		if err != nil {
			return err
		}
		who, err := cl.Whoami(ctx)
		if err != nil {
			return explain(err, cf.url)
		}
		if cf.json {
			return m.printJSON(who)
		}
		as := who.Sender
		if as == "" {
			as = "nobody (this token may not write)"
		}
		fmt.Fprintf(m.Stdout, "%s: a %s token named %q (id %s)", as, who.Scope, who.Name, who.ID)
		if who.Open {
			fmt.Fprint(m.Stdout, "; the bridge takes requests without a token")
		}
		fmt.Fprintln(m.Stdout)
		return nil
	}
}
