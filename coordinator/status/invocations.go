package status

import (
	"errors"
	"net/http"
	"strconv"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// InvocationResponse is the body of GET /invocations/{id}: the record and
// its kept progress records, oldest first.
type InvocationResponse struct {
	ledger.Invocation
	Progress []ledger.Progress `json:"progress"`
}

// invocationID parses the {id} path value, writing the error response when
// it is not an invocation number.
func invocationID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeNotFound,
			"There is no invocation %q: invocation ids are the numbers agent-bridge invocations lists.", r.PathValue("id")))
		return 0, false
	}
	return id, true
}

// handleInvocation serves GET /invocations/{id}[?after=PROGRESS_ID]; after
// returns only the progress records newer than one already seen, which is
// how "invocations show --follow" polls.
func (s *Server) handleInvocation(w http.ResponseWriter, r *http.Request) {
	id, ok := invocationID(w, r)
	if !ok {
		return
	}
	var after int64
	if s := r.URL.Query().Get("after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			httpjson.WriteError(w, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "after",
				"after must be the id of a progress record (a whole number, 0 for all)."))
			return
		}
		after = n
	}
	inv, err := s.src.Ledger().Invocation(r.Context(), id)
	if errors.Is(err, ledger.ErrNotFound) {
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeNotFound, "There is no invocation %d in the coordinator's ledger.", id))
		return
	}
	if err != nil {
		s.log.Error("read invocation", "id", id, "err", err)
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeInternal, "The invocation record could not be read."))
		return
	}
	progress, _, err := s.src.Ledger().ProgressOf(r.Context(), id, after)
	if err != nil {
		s.log.Error("read progress", "id", id, "err", err)
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeInternal, "The invocation's progress could not be read."))
		return
	}
	httpjson.Write(w, http.StatusOK, InvocationResponse{Invocation: inv, Progress: progress})
}

// handleCancel serves POST /invocations/{id}/cancel. The gate has already
// refused a request from another site's page (its Origin is not this
// listener's), so a web page cannot stop runs.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	id, ok := invocationID(w, r)
	if !ok {
		return
	}
	inv, err := s.src.Cancel(r.Context(), id, "")
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeNotFound, "There is no invocation %d in the coordinator's ledger.", id))
	case errors.Is(err, ledger.ErrNotRunning):
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeNotRunning,
			"Invocation %d is not queued or running (it is %s), so there is nothing to cancel.", id, inv.Status))
	case err != nil:
		s.log.Error("cancel invocation", "id", id, "err", err)
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeInternal, "The invocation could not be cancelled."))
	default:
		httpjson.Write(w, http.StatusOK, inv)
	}
}
