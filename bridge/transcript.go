package bridge

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// handleTranscript renders a thread's latest scene, or its messages, as
// seed 000's markdown transcript or JSON event log (contract 5.8). Private
// events are never included (agentbridge.RenderTranscript).
func (s *Server) handleTranscript(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, queryTranscript)
	if err != nil {
		return err
	}
	format := q.str("format")
	if format == "" {
		format = agentbridge.TranscriptMarkdown
	}
	id := chi.URLParam(r, "id")
	th, err := s.store.Thread(r.Context(), id)
	if err != nil {
		return storeErr("thread", err)
	}
	var events []agentbridge.Event
	for after := int64(0); ; {
		page, err := s.store.ThreadEvents(r.Context(), agentbridge.ThreadEventsQuery{Thread: id, After: after, Limit: agentbridge.MaxEventsLimit})
		if err != nil {
			return storeErr("transcript events", err)
		}
		events = append(events, page...)
		if len(page) < agentbridge.MaxEventsLimit {
			break
		}
		after = page[len(page)-1].Seq
	}
	out, err := agentbridge.RenderTranscript(agentbridge.TranscriptSource{ThreadName: th.Name, Events: events, Humans: s.opts.Humans}, format)
	if err != nil {
		return err
	}
	ctype := "text/markdown; charset=utf-8"
	if format == agentbridge.TranscriptJSON {
		ctype = "application/json"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `inline; filename="transcript-`+id+`.`+format+`"`)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return nil
}
