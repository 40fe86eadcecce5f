package bridge

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// handleClaimWait serves POST /claims/{id}/wait (contract 8.5): the holder
// of a run's claim, whose agent hit a usage limit, puts it back to waiting
// until the limit resets; the pair's queued receipt says so meanwhile.
func (s *Server) handleClaimWait(w http.ResponseWriter, r *http.Request) error {
	ws := s.store
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		return agentbridge.Errorf(agentbridge.ECodeNotFound, "There is no claim %q: a claim id is a positive number.", agentbridge.Clip(chi.URLParam(r, "id"), agentbridge.QuoteRunes))
	}
	var req agentbridge.ClaimWaitRequest
	if err := s.decodeStrict(w, r, &req, []string{"coordinator", "instance", "fence", "retry_at", "pending_ttl_ms", "reason"}, false); err != nil {
		return err
	}
	req.ID = id
	due, err := req.Validate()
	if err != nil {
		return err
	}
	if err := checkCoordinatorID(credential(r), req.Coordinator); err != nil {
		return err
	}
	c, rc, err := ws.WaitClaim(r.Context(), req, due)
	if err != nil {
		return storeErr("wait claim", err)
	}
	if rc.Event != "" {
		rc.Thread = c.Thread
		s.receiptHub.add(rc)
	}
	httpjson.Write(w, http.StatusOK, c)
	return nil
}
