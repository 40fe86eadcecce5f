package agentbridge

import (
	"context"
	"regexp"
	"strings"
	"unicode/utf8"
)

// SuggestionPending is the status of a new suggestion; the bridge sets no
// other today, and a person reads the list.
const SuggestionPending = "pending"

// Limits of a suggestion's fields, in bytes.
const (
	MaxSuggestionTitle       = 200
	MaxSuggestionDescription = 64 << 10
)

// SuggestionStatusPattern matches the status filter of GET /suggestions.
var SuggestionStatusPattern = regexp.MustCompile(`^[a-z][a-z_]{0,31}$`)

// SuggestionInput is an improvement suggestion an agent (or a person) sends
// with POST /suggest, as the original's agent guide tells agents to.
type SuggestionInput struct {
	From        string `json:"from"`
	Title       string `json:"title"`
	Description string `json:"description"`
}

// Suggestion is a stored suggestion.
type Suggestion struct {
	ID          string `json:"id"`
	From        string `json:"from"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Status      string `json:"status"`
	Timestamp   string `json:"timestamp"`
}

// Validate checks a suggestion: from is a participant id, title is
// non-blank text, description (optional) is bounded.
func (in SuggestionInput) Validate() error {
	switch {
	case in.From == "":
		return FieldErrorf(ECodeMissingField, "from", "The field \"from\" is required: say who suggests this.")
	case !ParticipantIDPattern.MatchString(in.From):
		return FieldErrorf(ECodeInvalidField, "from", "The sender id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(in.From, QuoteRunes))
	case strings.TrimSpace(in.Title) == "":
		return FieldErrorf(ECodeMissingField, "title", "A suggestion needs a title: one line saying what to improve.")
	case len(in.Title) > MaxSuggestionTitle || !utf8.ValidString(in.Title):
		return FieldErrorf(ECodeInvalidField, "title", "A suggestion's title must be text of at most %d bytes.", MaxSuggestionTitle)
	case len(in.Description) > MaxSuggestionDescription || !utf8.ValidString(in.Description):
		return FieldErrorf(ECodeInvalidField, "description", "A suggestion's description must be text of at most %d bytes.", MaxSuggestionDescription)
	}
	return nil
}

// SuggestionStore keeps suggestions durably. The bridge serves POST
// /suggest and GET /suggestions when its store implements it.
type SuggestionStore interface {
	// Suggest validates and stores a suggestion with status pending.
	Suggest(ctx context.Context, in SuggestionInput) (Suggestion, error)
	// Suggestions lists suggestions oldest first, those with the given
	// status only unless status is "".
	Suggestions(ctx context.Context, status string) ([]Suggestion, error)
}
