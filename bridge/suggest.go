package bridge

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// suggestAnswer is the original's answer of POST /suggest.
type suggestAnswer struct {
	Submitted bool   `json:"submitted"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
}

func (s *Server) handleSuggestPost(w http.ResponseWriter, r *http.Request) error {
	ss := s.store
	var in agentbridge.SuggestionInput
	if err := s.decodeStrict(w, r, &in, []string{"from", "title", "description"}, false); err != nil {
		return err
	}
	if err := s.mayWriteAs(r.Context(), credential(r), "", in.From); err != nil {
		return err
	}
	sg, err := ss.Suggest(r.Context(), in)
	if err != nil {
		return storeErr("suggest", err)
	}
	httpjson.Write(w, http.StatusOK, suggestAnswer{Submitted: true, ID: sg.ID, Timestamp: sg.Timestamp})
	return nil
}

// suggestionsPage is the answer of GET /suggestions.
type suggestionsPage struct {
	Suggestions []agentbridge.Suggestion `json:"suggestions"`
	Count       int                      `json:"count"`
}

func (s *Server) handleSuggestionsGet(w http.ResponseWriter, r *http.Request) error {
	ss := s.store
	q, err := parseQuery(r, querySuggestions)
	if err != nil {
		return err
	}
	status := q.str("status")
	list, err := ss.Suggestions(r.Context(), status)
	if err != nil {
		return storeErr("list suggestions", err)
	}
	httpjson.Write(w, http.StatusOK, suggestionsPage{Suggestions: list, Count: len(list)})
	return nil
}

// handleSuggestionStatusPost sets a suggestion's status and answers the
// suggestion as stored. Who decided is logged: the suggestions table keeps
// the status only.
func (s *Server) handleSuggestionStatusPost(w http.ResponseWriter, r *http.Request) error {
	ss := s.store
	var in agentbridge.SuggestionStatusInput
	if err := s.decodeStrict(w, r, &in, []string{"status", "by"}, false); err != nil {
		return err
	}
	sg, err := ss.SetSuggestionStatus(r.Context(), chi.URLParam(r, "id"), in)
	if err != nil {
		return storeErr("set suggestion status", err)
	}
	s.log.Info("suggestion status set", "suggestion", sg.ID, "status", sg.Status, "by", in.By)
	httpjson.Write(w, http.StatusOK, sg)
	return nil
}
