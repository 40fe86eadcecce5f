package storecore

import (
	"time"

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

// SuggestionsQuery lists the suggestions in arrival order, those of status
// only unless it is "": byStatus is the store's condition on status with
// its placeholder ("status = ?").
func SuggestionsQuery(status, byStatus string) (string, []any) {
	q := `SELECT ` + SuggestionColumns + ` FROM suggestions`
	if status == "" {
		return q + ` ORDER BY seq`, nil
	}
	return q + ` WHERE ` + byStatus + ` ORDER BY seq`, []any{status}
}
