package state

import (
	"context"
	"fmt"
	"strings"
)

// RunFilter selects invocations for the runs dashboard; zero fields match
// everything.
type RunFilter struct {
	Thread      string
	Participant string
	Status      string
	// Limit caps the count (0 = 100).
	Limit int
}

// Runs lists the invocations matching f, newest first.
func (d *DB) Runs(ctx context.Context, f RunFilter) ([]Invocation, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, v string }{{"thread", f.Thread}, {"participant", f.Participant}, {"status", f.Status}} {
		if c.v != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.v)
		}
	}
	q := `SELECT ` + invocationColumns + ` FROM invocations`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := d.db.QueryContext(ctx, q+" ORDER BY id DESC LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return scanInvocations(rows)
}

// ParticipantUsage is one participant's runs, tokens and cost over a period.
type ParticipantUsage struct {
	Participant  string  `json:"participant"`
	Runs         int64   `json:"runs"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// UsageSince sums usage per participant over the invocations queued at or
// after since (a timestamp in agentbridge.TimeLayout, which sorts as text),
// ordered by participant.
func (d *DB) UsageSince(ctx context.Context, since string) ([]ParticipantUsage, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT participant, count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd)
		FROM invocations WHERE queued_at >= ? GROUP BY participant ORDER BY participant`, since)
	if err != nil {
		return nil, fmt.Errorf("sum usage: %w", err)
	}
	defer rows.Close()
	out := []ParticipantUsage{}
	for rows.Next() {
		var u ParticipantUsage
		if err := rows.Scan(&u.Participant, &u.Runs, &u.InputTokens, &u.OutputTokens, &u.CostUSD); err != nil {
			return nil, fmt.Errorf("scan usage: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sum usage: %w", err)
	}
	return out, nil
}
