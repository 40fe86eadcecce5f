package agentbridge

import (
	"context"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The statuses of a suggestion. Every suggestion starts pending; a person
// accepts or dismisses it (POST /suggestions/{id}/status), and may set it
// back to pending.
const (
	SuggestionPending   = "pending"
	SuggestionAccepted  = "accepted"
	SuggestionDismissed = "dismissed"
)

// Limits of a suggestion's fields, in bytes.
const (
	MaxSuggestionTitle       = 200
	MaxSuggestionDescription = 64 << 10
)

// SuggestionStatusPattern matches the status filter of GET /suggestions.
var SuggestionStatusPattern = regexp.MustCompile(`^[a-z][a-z_]{0,31}$`)

// SuggestionIDPattern matches what could be a suggestion's id (a ULID);
// stores answer any other id as not found without asking the database.
var SuggestionIDPattern = regexp.MustCompile(`^[0-9A-Za-z]{1,64}$`)

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

// SuggestionStatusInput is the body of POST /suggestions/{id}/status: the
// new status and who set it.
type SuggestionStatusInput struct {
	Status string `json:"status"`
	By     string `json:"by"`
}

// Validate checks a status change: status is one of the three statuses,
// by is a participant id.
func (in SuggestionStatusInput) Validate() error {
	switch in.Status {
	case "":
		return FieldErrorf(ECodeMissingField, "status", "The field \"status\" is required: %q, %q or %q.", SuggestionAccepted, SuggestionDismissed, SuggestionPending)
	case SuggestionPending, SuggestionAccepted, SuggestionDismissed:
	default:
		return FieldErrorf(ECodeInvalidField, "status", "A suggestion's status is %q, %q or %q, not %.64q.", SuggestionAccepted, SuggestionDismissed, SuggestionPending, in.Status)
	}
	switch {
	case in.By == "":
		return FieldErrorf(ECodeMissingField, "by", "The field \"by\" is required: say who decides.")
	case !ParticipantIDPattern.MatchString(in.By):
		return FieldErrorf(ECodeInvalidField, "by", "The id %.64q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", in.By)
	}
	return nil
}

// SuggestionNotFound is the error for a suggestion id no suggestion has.
// Quoted input is cut at 64 runes by the verb's precision (%.64q).
func SuggestionNotFound(id string) *Error {
	return Errorf(ECodeSuggestionNotFound, "There is no suggestion %.64q.", id)
}

// SuggestionStore keeps suggestions durably. The bridge serves POST
// /suggest and GET /suggestions when its store implements it.
type SuggestionStore interface {
	// Suggest validates and stores a suggestion with status pending.
	Suggest(ctx context.Context, in SuggestionInput) (Suggestion, error)
	// Suggestions lists suggestions oldest first, those with the given
	// status only unless status is "".
	Suggestions(ctx context.Context, status string) ([]Suggestion, error)
	// SetSuggestionStatus validates in and sets the status of suggestion
	// id, returning it as stored; an unknown id is ECodeSuggestionNotFound.
	SetSuggestionStatus(ctx context.Context, id string, in SuggestionStatusInput) (Suggestion, error)
}
