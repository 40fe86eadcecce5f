package ledger

import (
	"context"
	"fmt"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// JournalEntry is one entry of an actor's journal, written after a scene.
type JournalEntry struct {
	Participant string `json:"participant"`
	Thread      string `json:"thread"`
	ThreadName  string `json:"thread_name"`
	// CreatedAt is an agentbridge.TimeLayout timestamp.
	CreatedAt string `json:"created_at"`
	Entry     string `json:"entry"`
}

// Journal returns a participant's journal entries, oldest first.
func (d *DB) Journal(ctx context.Context, participant string) ([]JournalEntry, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT participant, thread, thread_name, created_at, entry FROM journals
		WHERE participant = ? ORDER BY invocation_id`, participant)
	if err != nil {
		return nil, fmt.Errorf("read journal of %s: %w", participant, err)
	}
	defer rows.Close()
	var out []JournalEntry
	for rows.Next() {
		var j JournalEntry
		if err := rows.Scan(&j.Participant, &j.Thread, &j.ThreadName, &j.CreatedAt, &j.Entry); err != nil {
			return nil, fmt.Errorf("scan journal entry: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read journal of %s: %w", participant, err)
	}
	return out, nil
}

// JournalText renders entries as one markdown text, each under a dated
// header, the form an actor's briefing and `agent-bridge journal` use.
func JournalText(entries []JournalEntry) string {
	var b strings.Builder
	for i, j := range entries {
		if i > 0 {
			b.WriteString("\n")
		}
		when := j.CreatedAt
		if t, err := agentbridge.ParseTime(j.CreatedAt); err == nil {
			when = t.UTC().Format("2006-01-02 15:04 UTC")
		}
		name := j.ThreadName
		if name == "" {
			name = j.Thread
		}
		fmt.Fprintf(&b, "## %s — after the scene in %q\n\n%s\n", when, name, strings.TrimSpace(j.Entry))
	}
	return b.String()
}
