package storecore

import (
	"context"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Suggestions are not events: both stores keep them in one table, in
// arrival order (seq), and only the SQL and who writes it differ.

// NewSuggestion is in as stored: pending, under id, at t.
func NewSuggestion(id string, in agentbridge.SuggestionInput, t time.Time) agentbridge.Suggestion {
	return agentbridge.Suggestion{
		ID: id, From: in.From, Title: in.Title, Description: in.Description,
		Status: agentbridge.SuggestionPending, Timestamp: agentbridge.FormatTime(t),
	}
}

// CheckSuggestionStatus validates a change of suggestion id's status: an
// id that cannot be a suggestion's is suggestion_not_found without a
// query.
func CheckSuggestionStatus(id string, in agentbridge.SuggestionStatusInput) error {
	if err := in.Validate(); err != nil {
		return err
	}
	if !agentbridge.SuggestionIDPattern.MatchString(id) {
		return agentbridge.SuggestionNotFound(id)
	}
	return nil
}

var _ agentbridge.SuggestionStore = (*Engine)(nil)

// Suggest validates in and stores it with status pending. Suggestions are
// not events (no gseq): seq gives them their order, and their timestamps
// strictly increase in one process as events' do.
func (e *Engine) Suggest(ctx context.Context, in agentbridge.SuggestionInput) (_ agentbridge.Suggestion, err error) {
	defer e.GuardWrite(time.Now(), &err)
	if err := in.Validate(); err != nil {
		return agentbridge.Suggestion{}, err
	}
	e.suggestMu.Lock()
	t := NextTime(e.lastSuggestion)
	e.lastSuggestion = t
	e.suggestMu.Unlock()
	// ulid.Make draws from a goroutine-safe, monotonic entropy source.
	sg := NewSuggestion(ulid.Make().String(), in, t)
	err = e.Write(ctx, func(ctx context.Context, c Conn) error {
		if _, err := c.Exec(ctx, `INSERT INTO suggestions (id, sender, title, description, status, ts) VALUES (?, ?, ?, ?, ?, ?)`,
			sg.ID, sg.From, e.text(sg.Title), e.text(sg.Description), sg.Status, sg.Timestamp); err != nil {
			return fmt.Errorf("insert suggestion: %w", err)
		}
		return nil
	})
	if err != nil {
		return agentbridge.Suggestion{}, err
	}
	return sg, nil
}

// SetSuggestionStatus validates in and sets suggestion id's status.
func (e *Engine) SetSuggestionStatus(ctx context.Context, id string, in agentbridge.SuggestionStatusInput) (_ agentbridge.Suggestion, err error) {
	defer e.GuardWrite(time.Now(), &err)
	if err := CheckSuggestionStatus(id, in); err != nil {
		return agentbridge.Suggestion{}, err
	}
	var sg agentbridge.Suggestion
	err = e.Write(ctx, func(ctx context.Context, c Conn) error {
		var err error
		sg, err = ScanSuggestion(c.QueryRow(ctx, `UPDATE suggestions SET status = ? WHERE id = ? RETURNING `+SuggestionColumns, in.Status, id))
		if found, err := Found(err); err != nil {
			return fmt.Errorf("update suggestion: %w", err)
		} else if !found {
			return agentbridge.SuggestionNotFound(id)
		}
		return nil
	})
	if err != nil {
		return agentbridge.Suggestion{}, err
	}
	return sg, nil
}

// Suggestions lists suggestions in arrival order, those of status only
// unless it is "".
func (e *Engine) Suggestions(ctx context.Context, status string) (_ []agentbridge.Suggestion, err error) {
	defer e.Guard(time.Now(), &err)
	q, args := `SELECT `+SuggestionColumns+` FROM suggestions`, []any{}
	if status != "" {
		q, args = q+` WHERE status = ?`, append(args, status)
	}
	return List(ctx, e.Read, "suggestions", ScanSuggestion, q+` ORDER BY seq`, args...)
}
