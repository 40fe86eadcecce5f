package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// Suggest validates in and stores it through the writer (the one
// connection that writes), with Append's ctx rules.
func (s *Store) Suggest(ctx context.Context, in agentbridge.SuggestionInput) (_ agentbridge.Suggestion, err error) {
	defer s.guardWrite(time.Now(), &err)
	if err := in.Validate(); err != nil {
		return agentbridge.Suggestion{}, err
	}
	r := s.newRequest(ctx)
	r.suggest = &in
	resp := s.submit(ctx, r)
	return resp.suggestion, resp.err
}

// insertSuggestion runs inside a group commit (see apply).
func (s *Store) insertSuggestion(ctx context.Context, in agentbridge.SuggestionInput) (response, error) {
	t := storecore.NextTime(s.w.lastSuggestion)
	u, err := ulid.New(ulid.Timestamp(t), s.w.entropy)
	if err != nil {
		return response{}, fmt.Errorf("new suggestion id: %w", err)
	}
	sg := storecore.NewSuggestion(u.String(), in, t)
	if _, err := s.w.conn.ExecContext(ctx, `INSERT INTO suggestions (id, sender, title, description, status, ts) VALUES (?, ?, ?, ?, ?, ?)`,
		sg.ID, sg.From, sg.Title, sg.Description, sg.Status, sg.Timestamp); err != nil {
		return response{}, fmt.Errorf("insert suggestion: %w", err)
	}
	s.w.lastSuggestion = t
	return response{suggestion: sg}, nil
}

// suggestionStatus is a status change the writer applies (see
// SetSuggestionStatus).
type suggestionStatus struct {
	id string
	in agentbridge.SuggestionStatusInput
}

// SetSuggestionStatus validates in and sets suggestion id's status through
// the writer, with Append's ctx rules.
func (s *Store) SetSuggestionStatus(ctx context.Context, id string, in agentbridge.SuggestionStatusInput) (_ agentbridge.Suggestion, err error) {
	defer s.guardWrite(time.Now(), &err)
	if err := storecore.CheckSuggestionStatus(id, in); err != nil {
		return agentbridge.Suggestion{}, err
	}
	r := s.newRequest(ctx)
	r.suggestStatus = &suggestionStatus{id: id, in: in}
	resp := s.submit(ctx, r)
	if resp.err != nil {
		return agentbridge.Suggestion{}, resp.err
	}
	return resp.suggestion, nil
}

// updateSuggestion runs inside a group commit (see apply). Its answer
// always carries the suggestion's id, which keeps it out of the append
// counters, refused or not.
func (s *Store) updateSuggestion(ctx context.Context, c suggestionStatus) (response, error) {
	sg := agentbridge.Suggestion{ID: c.id}
	err := s.w.conn.QueryRowContext(ctx, `UPDATE suggestions SET status = ? WHERE id = ? RETURNING sender, title, description, status, ts`,
		c.in.Status, c.id).Scan(&sg.From, &sg.Title, &sg.Description, &sg.Status, &sg.Timestamp)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return response{suggestion: sg, err: agentbridge.SuggestionNotFound(c.id)}, nil
	case err != nil:
		return response{}, fmt.Errorf("update suggestion: %w", err)
	}
	return response{suggestion: sg}, nil
}

// Suggestions lists suggestions in arrival order, filtered by status
// unless status is "".
func (s *Store) Suggestions(ctx context.Context, status string) (_ []agentbridge.Suggestion, err error) {
	defer s.guard(time.Now(), &err)
	q, args := storecore.SuggestionsQuery(status, `status = ?`)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list suggestions: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "suggestions", storecore.ScanSuggestion)
}
