package agentbridge

import (
	"errors"
	"fmt"
)

// Error codes. They are part of the HTTP API: clients branch on them, so a
// code, once released, never changes meaning.
const (
	ECodeMissingField     = "missing_field"
	ECodeInvalidField     = "invalid_field"
	ECodeInvalidControl   = "invalid_control"
	ECodeUnknownField     = "unknown_field"
	ECodeFieldNotAllowed  = "field_not_allowed"
	ECodeInvalidJSON      = "invalid_json"
	ECodeBodyTooLarge     = "body_too_large"
	ECodeNotFound         = "not_found"
	ECodeMethodNotAllowed = "method_not_allowed"
	ECodeThreadNotFound   = "thread_not_found"
	ECodeThreadExists     = "thread_exists"
	ECodeUnknownReplyTo   = "unknown_reply_to"
	ECodeParticipantMuted = "participant_muted"
	ECodeThreadPaused     = "thread_paused"
	ECodeCursorAhead      = "cursor_ahead"
	ECodeForbiddenHost    = "forbidden_host"
	ECodeForbiddenOrigin  = "forbidden_origin"
	ECodeUnauthorized     = "unauthorized"
	ECodeUnavailable      = "unavailable"
	ECodeInternal         = "internal"
	ECodeEventNotFound    = "event_not_found"
	// ECodeSuggestionNotFound: POST /suggestions/{id}/status names no
	// stored suggestion.
	ECodeSuggestionNotFound = "suggestion_not_found"
	ECodeHeadersTooLarge    = "headers_too_large"
	// ECodeNotRunning: a cancel of an invocation that has already ended.
	ECodeNotRunning = "not_running"
	// ECodeUnsupportedMediaType refuses a body not sent as
	// application/json: a form or text/plain body is what a browser can
	// send to any site without asking (a "simple request").
	ECodeUnsupportedMediaType = "unsupported_media_type"
	// ECodeTooManyStreams refuses a stream (SSE or long-poll) when the
	// listener already holds its cap of open streams.
	ECodeTooManyStreams = "too_many_streams"
	// ECodeRequestTimeout: the request's body did not arrive within the
	// listener's request timeout (10 s).
	ECodeRequestTimeout = "request_timeout"
	// ECodeForbiddenSender: the credential may not write this event: as
	// this sender, in this thread, a human control, or an answer to a
	// permission request or question (contract 7.3).
	ECodeForbiddenSender = "forbidden_sender"
	// ECodeForbiddenScope: the credential's scope may not use this route
	// at all (a read token writing, an agent token managing tokens).
	ECodeForbiddenScope = "forbidden_scope"
	// ECodeTokenNotFound: DELETE /auth/tokens/{id} names no token.
	ECodeTokenNotFound = "token_not_found"
	// ECodeDuplicateKey refuses a request body in which an object holds
	// the same key twice: encoding/json keeps the last silently, other
	// readers the first, so {"from":"user","from":"evil"} would mean one
	// sender to a check and another to the store.
	ECodeDuplicateKey = "duplicate_key"
	// ECodeDetailsTooLarge refuses presence details over the bridge's
	// limit (4 KiB): presence is held in memory and sent to every viewer.
	ECodeDetailsTooLarge = "details_too_large"
	// ECodeTooManyPresence refuses a presence report that would add an
	// entry past the limits per thread or per participant; it passes
	// again once old entries are forgotten.
	ECodeTooManyPresence = "too_many_presence"
	// ECodeIdempotencyConflict refuses an append whose Idempotency-Key
	// names a stored event with another sender or other content: a key is
	// answered only with the event its own retry stored.
	ECodeIdempotencyConflict = "idempotency_conflict"
	// ECodeNoWorkspace refuses a claim of a run whose thread picks a
	// workspace the claiming coordinator has not registered (contract
	// 8.1): only a coordinator that has it runs it.
	ECodeNoWorkspace = "no_workspace"
	// ECodeTooDeep refuses a request body whose arrays and objects nest
	// deeper than MaxJSONDepth: a reader's recursion (and encoding/json's
	// own limit of 10,000 around a stored event) is not a client's to
	// exhaust.
	ECodeTooDeep = "too_deep"
	// ECodeNotATrigger refuses a claim whose event is not, by the trigger
	// rules the bridge can check, a trigger for its participant (contract
	// 8.3); a coordinator ends a claim it takes over with it when its own
	// rules disagree.
	ECodeNotATrigger = "not_a_trigger"
	// ECodeTooMany refuses what would grow past a cap (contract 8.3): one
	// credential's waiting claims, live agent tokens or the names a
	// coordinator ever registered; login and pairing links waiting; push
	// subscriptions. It passes again once one is used, lapses or is
	// removed; the message says which.
	ECodeTooMany = "too_many"
)

// Error is the error a client sees. It is serialised as
// {"error": {"code": ..., "message": ..., ...context}} by the HTTP layer and
// decoded back into this type by the client package, so a CLI prints the
// server's own sentence.
type Error struct {
	// Code is one of the ECode constants, in snake_case.
	Code string `json:"code"`
	// Message is a sentence a person understands.
	Message string `json:"message"`
	// Field names the offending request field, for validation errors.
	Field string `json:"field,omitempty"`
	// Thread and Participant give context for thread-level refusals.
	Thread      string `json:"thread,omitempty"`
	Participant string `json:"participant,omitempty"`
	// Head is the current end of the log for cursor_ahead errors.
	Head *int64 `json:"head,omitempty"`
	// Status is the HTTP status the client received; it is not serialised by
	// the server (the status line carries it).
	Status int `json:"-"`
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf returns an *Error naming the field at fault.
func FieldErrorf(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ThreadNotFound is the error for an unknown thread id, the same from
// every store and handler.
func ThreadNotFound(id string) *Error {
	return &Error{
		Code: ECodeThreadNotFound, Thread: id,
		Message: fmt.Sprintf("There is no thread %q.", Clip(id, QuoteRunes)),
	}
}

// CursorAhead is the error for a cursor past the head of a thread (thread
// set) or of the global log (thread ""), named by field: a client whose
// server was restored from an older backup must learn it, not wait
// forever. Every store and the bridge's streams build it here, so the
// sentence and the head a client resumes from are the same everywhere.
func CursorAhead(thread, field string, cursor, head int64) *Error {
	e := &Error{Code: ECodeCursorAhead, Field: field, Thread: thread, Head: &head}
	if thread == "" {
		e.Message = fmt.Sprintf("The cursor %d is past the end of the log (%d); was the server restored from an older backup? Start again from %d or less.", cursor, head, head)
	} else {
		e.Message = fmt.Sprintf("The cursor %d is past the end of thread %q (its last seq is %d); was the server restored from an older backup? Start again from %d or less.", cursor, thread, head, head)
	}
	return e
}

// ErrorCode returns the code of err if it is (or wraps) an *Error, and
// ECodeInternal otherwise.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ECodeInternal
}
