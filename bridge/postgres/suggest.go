package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// Suggest validates in and stores it with status pending. Suggestions are
// not events (no gseq), so they skip the writer: one INSERT is the whole
// write, and seq gives them their order.
func (s *Store) Suggest(ctx context.Context, in agentbridge.SuggestionInput) (_ agentbridge.Suggestion, err error) {
	defer s.guardWrite(time.Now(), &err)
	if err := in.Validate(); err != nil {
		return agentbridge.Suggestion{}, err
	}
	t := time.Now().UTC().Truncate(time.Microsecond)
	// ulid.Make draws from a goroutine-safe entropy source: Suggest runs
	// on the request's goroutine, not the writer's.
	sg := storecore.NewSuggestion(ulid.Make().String(), in, t)
	if _, err := s.pool.Exec(ctx, `INSERT INTO suggestions (id, sender, title, description, status, ts) VALUES ($1, $2, $3, $4, $5, $6)`,
		sg.ID, sg.From, []byte(sg.Title), []byte(sg.Description), sg.Status, sg.Timestamp); err != nil {
		return agentbridge.Suggestion{}, fmt.Errorf("insert suggestion: %w", err)
	}
	return sg, nil
}

// SetSuggestionStatus validates in and sets suggestion id's status. Like
// Suggest it skips the writer: one UPDATE is the whole write.
func (s *Store) SetSuggestionStatus(ctx context.Context, id string, in agentbridge.SuggestionStatusInput) (_ agentbridge.Suggestion, err error) {
	defer s.guardWrite(time.Now(), &err)
	if err := storecore.CheckSuggestionStatus(id, in); err != nil {
		return agentbridge.Suggestion{}, err
	}
	sg := agentbridge.Suggestion{ID: id}
	var title, desc []byte
	err = s.pool.QueryRow(ctx, `UPDATE suggestions SET status = $1 WHERE id = $2 RETURNING sender, title, description, status, ts`,
		in.Status, id).Scan(&sg.From, &title, &desc, &sg.Status, &sg.Timestamp)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return agentbridge.Suggestion{}, agentbridge.SuggestionNotFound(id)
	case err != nil:
		return agentbridge.Suggestion{}, fmt.Errorf("update suggestion: %w", err)
	}
	sg.Title, sg.Description = string(title), string(desc)
	return sg, nil
}

// Suggestions lists suggestions in arrival order, filtered by status
// unless status is "".
func (s *Store) Suggestions(ctx context.Context, status string) (_ []agentbridge.Suggestion, err error) {
	defer s.guard(time.Now(), &err)
	q, args := storecore.SuggestionsQuery(status, `status = $1`)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list suggestions: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "suggestions", storecore.ScanSuggestion)
}
