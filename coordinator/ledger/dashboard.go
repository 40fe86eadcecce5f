package ledger

import (
	"context"
	"fmt"
)

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
		FROM invocations WHERE owner = ? AND queued_at >= ? GROUP BY participant ORDER BY participant`, d.db.owner, since)
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
