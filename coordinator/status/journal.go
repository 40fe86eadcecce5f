package status

import (
	"net/http"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// JournalResponse is the body of GET /journals/{participant}: an actor's
// journal entries, oldest first, and the same as one text with dated
// headers (what the actor's next briefing carries).
type JournalResponse struct {
	Participant string                `json:"participant"`
	Entries     []ledger.JournalEntry `json:"entries"`
	Text        string                `json:"text"`
}

func (s *Server) handleJournal(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("participant")
	if !agentbridge.ParticipantIDPattern.MatchString(id) {
		httpjson.WriteError(w, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "participant", "%q is not a valid participant id.", id))
		return
	}
	entries, err := s.src.Ledger().Journal(r.Context(), id)
	if err != nil {
		s.log.Error("read journal", "participant", id, "err", err)
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeInternal, "The journal could not be read."))
		return
	}
	if entries == nil {
		entries = []ledger.JournalEntry{}
	}
	httpjson.Write(w, http.StatusOK, JournalResponse{Participant: id, Entries: entries, Text: ledger.JournalText(entries)})
}
