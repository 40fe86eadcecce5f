package bridge

import (
	"errors"
	"net/http"
	"strconv"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// statusByCode is the one table that maps an error code to its HTTP status;
// the client package maps statuses back, so it must stay in step with the
// contract.
var statusByCode = map[string]int{
	agentbridge.ECodeMissingField:         http.StatusBadRequest,
	agentbridge.ECodeInvalidField:         http.StatusBadRequest,
	agentbridge.ECodeInvalidControl:       http.StatusBadRequest,
	agentbridge.ECodeUnknownField:         http.StatusBadRequest,
	agentbridge.ECodeFieldNotAllowed:      http.StatusBadRequest,
	agentbridge.ECodeInvalidJSON:          http.StatusBadRequest,
	agentbridge.ECodeDuplicateKey:         http.StatusBadRequest,
	agentbridge.ECodeBodyTooLarge:         http.StatusRequestEntityTooLarge,
	agentbridge.ECodeDetailsTooLarge:      http.StatusRequestEntityTooLarge,
	agentbridge.ECodeTooManyPresence:      http.StatusTooManyRequests,
	agentbridge.ECodeUnauthorized:         http.StatusUnauthorized,
	agentbridge.ECodeForbiddenHost:        http.StatusForbidden,
	agentbridge.ECodeForbiddenOrigin:      http.StatusForbidden,
	agentbridge.ECodeForbiddenSender:      http.StatusForbidden,
	agentbridge.ECodeForbiddenScope:       http.StatusForbidden,
	agentbridge.ECodeTokenNotFound:        http.StatusNotFound,
	agentbridge.ECodeNotFound:             http.StatusNotFound,
	agentbridge.ECodeThreadNotFound:       http.StatusNotFound,
	agentbridge.ECodeEventNotFound:        http.StatusNotFound,
	agentbridge.ECodeSuggestionNotFound:   http.StatusNotFound,
	agentbridge.ECodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	agentbridge.ECodeThreadExists:         http.StatusConflict,
	agentbridge.ECodeParticipantMuted:     http.StatusConflict,
	agentbridge.ECodeThreadPaused:         http.StatusConflict,
	agentbridge.ECodeCursorAhead:          http.StatusConflict,
	agentbridge.ECodeIdempotencyConflict:  http.StatusConflict,
	agentbridge.ECodeFenced:               http.StatusConflict,
	agentbridge.ECodeNotRegistered:        http.StatusConflict,
	agentbridge.ECodeUnknownReplyTo:       http.StatusUnprocessableEntity,
	agentbridge.ECodeHeadersTooLarge:      http.StatusRequestHeaderFieldsTooLarge,
	agentbridge.ECodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	agentbridge.ECodeUnavailable:          http.StatusServiceUnavailable,
	agentbridge.ECodeTooManyStreams:       http.StatusServiceUnavailable,
	agentbridge.ECodeRequestTimeout:       http.StatusRequestTimeout,
	agentbridge.ECodeInternal:             http.StatusInternalServerError,
}

// StatusForCode returns the HTTP status the server answers with for an
// error code, so that clients and docs can rely on a single mapping.
// Unknown codes are internal errors.
func StatusForCode(code string) int {
	if st, ok := statusByCode[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// handlerFunc is the shape of every handler: it returns an error instead of
// writing one, so a forgotten return after an error answer cannot happen.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// h adapts a handlerFunc to http.HandlerFunc, writing any returned error.
func (s *Server) h(fn handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}
}

// writeError answers with err as JSON. Client errors (*agentbridge.Error)
// are sent as they are; anything else is logged with the request id and
// answered with a generic internal error, so internals never leak.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *agentbridge.Error
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &mbe):
		ae = agentbridge.Errorf(agentbridge.ECodeBodyTooLarge, "The request body is larger than the limit of %d bytes.", mbe.Limit)
	default:
		id := requestID(w)
		if r.Context().Err() != nil {
			// The client went away or the server is shutting down; nobody
			// reads this answer, and it is not a fault worth an error log.
			s.log.Debug("request ended by context", "request_id", id, "err", err)
		} else {
			s.log.Error("request failed", "request_id", id, "method", r.Method, "path", r.URL.Path, "err", err)
		}
		ae = agentbridge.Errorf(agentbridge.ECodeInternal, "The server could not handle this request; its log has the details under request id %s.", id)
	}
	switch ae.Code {
	case agentbridge.ECodeUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-bridge"`)
	case agentbridge.ECodeUnavailable:
		// The store's database is unreachable (storecore.Outage); the
		// store logged it once, so nothing is logged per request.
		w.Header().Set("Retry-After", strconv.Itoa(storecore.RetryAfterSeconds))
	}
	httpjson.WriteError(w, StatusForCode(ae.Code), ae)
}
