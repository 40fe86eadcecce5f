// Package httpjson writes JSON answers and errors the one way the bridge,
// the coordinator's status API and the UI handler all answer: the value as
// one JSON line, Content-Type application/json, Cache-Control no-store, and
// an error as {"error": {code, message, ...}}.
package httpjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Write writes v as the JSON answer with the given status. A value that
// cannot be encoded is answered as an internal error instead.
func Write(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = fmt.Appendf(nil, `{"error":{"code":%q,"message":"The server could not encode its answer."}}`, agentbridge.ECodeInternal)
		status = http.StatusInternalServerError
	}
	WriteBytes(w, status, b)
}

// WriteBytes writes b, one JSON value, as the answer with the given
// status. It writes the newline separately rather than appending it, which
// would copy the whole answer, and gives both fixed headers one backing
// array.
func WriteBytes(w http.ResponseWriter, status int, b []byte) {
	vals := make([]string, 2)
	vals[0], vals[1] = "application/json", "no-store"
	h := w.Header()
	h["Content-Type"] = vals[0:1:1]
	h["Cache-Control"] = vals[1:2:2]
	w.WriteHeader(status)
	// A failed write means the client is gone; there is nobody to tell.
	if _, err := w.Write(b); err == nil {
		_, _ = io.WriteString(w, "\n")
	}
}

// errorBody is the shape of every error answer.
type errorBody struct {
	Error *agentbridge.Error `json:"error"`
}

// WriteError answers with e in the API's error shape, with the status
// its code has in the one table (StatusFor): no handler chooses one.
func WriteError(w http.ResponseWriter, e *agentbridge.Error) {
	Write(w, StatusFor(e.Code), errorBody{Error: e})
}

// statusByCode is the one table that maps an error code to its HTTP status,
// for the bridge, the coordinator's status API, the UI handler and the
// security gate alike; the client package maps statuses back, so it must
// stay in step with the contract.
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
	agentbridge.ECodeTooMany:              http.StatusTooManyRequests,
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
	agentbridge.ECodeNotRunning:           http.StatusConflict,
	agentbridge.ECodeUnknownReplyTo:       http.StatusUnprocessableEntity,
	agentbridge.ECodeHeadersTooLarge:      http.StatusRequestHeaderFieldsTooLarge,
	agentbridge.ECodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	agentbridge.ECodeUnavailable:          http.StatusServiceUnavailable,
	agentbridge.ECodeTooManyStreams:       http.StatusServiceUnavailable,
	agentbridge.ECodeRequestTimeout:       http.StatusRequestTimeout,
	agentbridge.ECodeInternal:             http.StatusInternalServerError,
}

// StatusFor returns the HTTP status an error code is answered with, so
// that clients and docs can rely on a single mapping. Unknown codes are
// internal errors.
func StatusFor(code string) int {
	if st, ok := statusByCode[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// DecodeObject is the one decoder of the JSON object bodies of the bridge
// and the coordinator's status API: body must be a JSON object of UTF-8
// text without a key twice at any depth (agentbridge.CheckJSONBody,
// duplicate_key), whose keys are among fields (else unknown_field); it is
// decoded into v, a wrong type being invalid_field. Every refusal is an
// *agentbridge.Error.
func DecodeObject(body []byte, v any, fields []string) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return agentbridge.Errorf(agentbridge.ECodeInvalidJSON, "The request body must be a JSON object.")
	}
	if err := agentbridge.CheckJSONBody(body); err != nil {
		return err
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(fields, k) {
			return agentbridge.FieldErrorf(agentbridge.ECodeUnknownField, k, "The field %q is not accepted here; known fields are %s.", k, strings.Join(fields, ", "))
		}
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, te.Field, "The field %q must be a %s.", te.Field, te.Type.Kind())
		}
		return agentbridge.Errorf(agentbridge.ECodeInvalidJSON, "The request body is not valid JSON.")
	}
	return nil
}
