package bridge

import (
	"errors"
	"net/http"
	"strconv"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

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
	httpjson.WriteError(w, ae)
}
