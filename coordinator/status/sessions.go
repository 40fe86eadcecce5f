package status

import (
	"net/http"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// SessionsResponse is the body of GET /sessions.
type SessionsResponse struct {
	Sessions []ledger.Session `json:"sessions"`
}

// handleSessions serves GET /sessions[?thread=T].
func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	list, err := s.src.Ledger().Sessions(r.Context(), r.URL.Query().Get("thread"))
	if err != nil {
		s.log.Error("list sessions", "err", err)
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeInternal, "The sessions could not be read."))
		return
	}
	httpjson.Write(w, http.StatusOK, SessionsResponse{Sessions: list})
}
