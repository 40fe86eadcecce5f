package bridge

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// Coordinator registrations (contract 7.1, docs/api.md): each coordinator
// PUTs what it serves and repeats it as its heartbeat; the store keeps
// them with the database's time, so every bridge on one database knows
// which live coordinators serve which agent.

// coordinators returns the store's registrations, or an error a client
// understands when the store keeps none.
func (s *Server) coordinators() (agentbridge.CoordinatorStore, error) {
	if cs, ok := s.store.(agentbridge.CoordinatorStore); ok {
		return cs, nil
	}
	return nil, agentbridge.Errorf(agentbridge.ECodeNotFound, "This server's store keeps no coordinator registrations.")
}

// registrationFields are the fields a registration body may carry.
var registrationFields = []string{"id", "instance", "host", "agents", "version", "capacity", "status_url", "ttl_ms", "workspaces"}

func (s *Server) handleCoordinatorPut(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.coordinators()
	if err != nil {
		return err
	}
	var reg agentbridge.Registration
	if err := s.decodeStrict(w, r, &reg, registrationFields, false); err != nil {
		return err
	}
	id := chi.URLParam(r, "id")
	if err := checkCoordinatorID(credential(r), id); err != nil {
		return err
	}
	if reg.ID != "" && reg.ID != id {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "id", "The body names coordinator %q but the path names %q: leave \"id\" out or make them agree.", agentbridge.Clip(reg.ID, agentbridge.QuoteRunes), agentbridge.Clip(id, agentbridge.QuoteRunes))
	}
	reg.ID = id
	res, err := cs.RegisterCoordinator(r.Context(), reg)
	if err != nil {
		return storeErr("register coordinator", err)
	}
	if res.Duplicate != nil {
		s.log.Warn("a second coordinator registered under one id", "coordinator", id,
			"host", reg.Host, "instance", reg.Instance, "other_host", res.Duplicate.Host, "other_instance", res.Duplicate.Instance)
	}
	httpjson.Write(w, http.StatusOK, res)
	return nil
}

func (s *Server) handleCoordinatorDelete(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.coordinators()
	if err != nil {
		return err
	}
	if err := checkCoordinatorID(credential(r), chi.URLParam(r, "id")); err != nil {
		return err
	}
	instance := r.URL.Query().Get("instance")
	if instance == "" {
		return agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "instance", "The parameter \"instance\" is required: only the process holding the registration removes it.")
	}
	if err := cs.DeregisterCoordinator(r.Context(), chi.URLParam(r, "id"), instance); err != nil {
		return storeErr("deregister coordinator", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleCoordinatorsGet(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r, queryNone); err != nil {
		return err
	}
	cs, err := s.coordinators()
	if err != nil {
		return err
	}
	list, err := cs.Coordinators(r.Context())
	if err != nil {
		return storeErr("list coordinators", err)
	}
	res := agentbridge.CoordinatorsResponse{Coordinators: list, Agents: agentbridge.AgentsServed(list)}
	if cl, ok := cs.(agentbridge.ClaimStore); ok {
		if res.ServedEver, err = cl.ServedEver(r.Context()); err != nil {
			return storeErr("list served agents", err)
		}
	}
	httpjson.Write(w, http.StatusOK, res)
	return nil
}
