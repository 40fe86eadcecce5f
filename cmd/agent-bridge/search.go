package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// searchCommand is `agent-bridge search QUERY...`: GET /search, printed
// one hit to a paragraph, newest first.
func (m *Main) searchCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	var p client.SearchParams
	fs.StringVar(&p.Thread, "thread", "", "only this thread (its id or name)")
	fs.StringVar(&p.From, "from", "", "only events from this participant")
	fs.StringVar(&p.Type, "type", "", "only events of this type (message, …)")
	fs.StringVar(&p.After, "after", "", "only events at or after this time (RFC 3339)")
	fs.StringVar(&p.Before, "before", "", "only events before this time (RFC 3339)")
	fs.IntVar(&p.Limit, "limit", agentbridge.DefaultSearchLimit, fmt.Sprintf("how many hits at most (1 to %d)", agentbridge.MaxSearchLimit))
	fs.StringVar(&p.Cursor, "cursor", "", "the next page: the cursor the previous page printed")
	return func(ctx context.Context, pos []string) error {
		if len(pos) == 0 {
			return usagef("search: give a QUERY: words, a \"phrase\" or a prefix such as decid*")
		}
		if p.Limit < 1 || p.Limit > agentbridge.MaxSearchLimit {
			return usagef("--limit: must be from 1 to %d, not %d", agentbridge.MaxSearchLimit, p.Limit)
		}
		p.Q = strings.Join(pos, " ")
		cl, err := m.newClient(cf)
		if err != nil {
			return err
		}
		q := p
		if q.Thread != "" {
			if q.Thread, err = resolveThread(ctx, cl, q.Thread); err != nil {
				return err
			}
		}
		page, err := cl.Search(ctx, q)
		if err != nil {
			return explain(err, cf.url)
		}
		if cf.json {
			return m.printJSON(page)
		}
		m.writeSearchPage(page)
		return nil
	}
}

// writeSearchPage prints a page of hits: the thread, seq, sender and time,
// then the snippet with its matches in [brackets].
func (m *Main) writeSearchPage(page agentbridge.SearchPage) {
	out := m.Stdout
	if len(page.Results) == 0 {
		fmt.Fprintln(out, "No matches.")
		return
	}
	for _, r := range page.Results {
		name := r.ThreadName
		if name == "" {
			name = r.Thread
		}
		fmt.Fprintf(out, "%s (%s) #%d %s → %s, %s\n", name, r.Thread, r.Event.Seq, r.Event.From, r.Event.To, r.Event.TS)
		fmt.Fprintf(out, "    %s\n", markSnippet(r.Snippet, r.Marks))
	}
	if page.Next != "" {
		fmt.Fprintf(out, "More: add --cursor %s\n", page.Next)
	}
}

// markSnippet puts the marked runs of s (rune offsets) in [brackets].
func markSnippet(s string, marks [][]int) string {
	runes := []rune(s)
	var b strings.Builder
	at := 0
	for _, mk := range marks {
		if len(mk) != 2 || mk[0] < at || mk[1] > len(runes) || mk[0] > mk[1] {
			continue
		}
		b.WriteString(string(runes[at:mk[0]]) + "[" + string(runes[mk[0]:mk[1]]) + "]")
		at = mk[1]
	}
	b.WriteString(string(runes[at:]))
	return b.String()
}

// schedulesCommand is `agent-bridge schedules [THREAD]`: the schedules
// with their next due time.
func (m *Main) schedulesCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 1 {
			return usagef("schedules: give at most one THREAD")
		}
		cl, err := m.newClient(cf)
		if err != nil {
			return err
		}
		thread := ""
		if len(pos) == 1 {
			thread = pos[0]
		}
		list, err := cl.Schedules(ctx, thread)
		if err != nil {
			return explain(err, cf.url)
		}
		if cf.json {
			return m.printJSON(struct {
				Schedules []agentbridge.Schedule `json:"schedules"`
			}{list})
		}
		out := m.Stdout
		if len(list) == 0 {
			fmt.Fprintln(out, "No schedules.")
			return nil
		}
		for _, s := range list {
			next := s.Next
			if next == "" {
				next = "never"
			}
			text := agentbridge.Event{Content: s.Event.Content}.Text()
			fmt.Fprintf(out, "%s  %s  %q %s  next %s  as %s to %s: %s\n", s.Thread, s.ID, s.Cron, s.TZ, next, s.From, s.Event.To, agentbridge.Clip(text, 60))
		}
		return nil
	}
}
