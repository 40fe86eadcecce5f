package bridge

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// Coordinator registrations (contract 7.1, docs/api.md): each coordinator
// PUTs what it serves and repeats it as its heartbeat; the store keeps
// them with the database's time, so every bridge on one database knows
// which live coordinators serve which agent.

// registrationFields are the fields a registration body may carry.
var registrationFields = []string{"id", "instance", "host", "agents", "version", "capacity", "status_url", "ttl_ms", "workspaces"}

func (s *Server) handleCoordinatorPut(w http.ResponseWriter, r *http.Request) error {
	cs := s.store
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
	if err := s.checkRegistration(r.Context(), credential(r), reg); err != nil {
		return err
	}
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
	cs := s.store
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

// handleCoordinatorsGet lists the registrations. served_ever (every agent
// name ever registered) comes only for one participant asked for
// (?served_ever=<participant>&client=<its client>), the entries naming it
// or its client: every coordinator polls this list with its heartbeat, and
// the names ever registered grow with every coordinator (contract 8.3:
// the answer stays under 64 KiB for 10 coordinators).
func (s *Server) handleCoordinatorsGet(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, queryCoordinators)
	if err != nil {
		return err
	}
	cs := s.store
	list, err := cs.Coordinators(r.Context())
	if err != nil {
		return storeErr("list coordinators", err)
	}
	res := agentbridge.CoordinatorsResponse{Coordinators: list, Agents: agentbridge.AgentsServed(list)}
	if q.has("served_ever") {
		ever, err := cs.ServedEver(r.Context())
		if err != nil {
			return storeErr("list served agents", err)
		}
		res.ServedEver = agentbridge.ServedEverFor(ever, q.str("served_ever"), q.str("client"))
	}
	httpjson.Write(w, http.StatusOK, res)
	return nil
}

// checkRegistration refuses (403 forbidden_sender, nothing stored) a
// registration listing as its agent a human, a reserved name, another
// coordinator's id (another registration's, or one a coordinator token
// stands for), or, from a coordinator token with an allow-list
// (tokens add --agents), a name or client the list does not hold: a
// coordinator token writes as the agents it registers (contract 8.3).
func (s *Server) checkRegistration(ctx context.Context, cred httpguard.Credential, reg agentbridge.Registration) error {
	others, err := s.otherCoordinatorIDs(ctx, reg.ID)
	if err != nil {
		return err
	}
	allowed := agentbridge.AllowedAgents(cred.Agents)
	for _, a := range reg.Agents {
		why := agentNameRefused(s.opts.Humans, others, a.Name)
		if why == "" && cred.Scope == agentbridge.ScopeCoordinator {
			why = notAllowed(allowed, a)
		}
		if why != "" {
			return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Field: "agents", Participant: a.Name,
				Message: fmt.Sprintf("Coordinator %q may not register the agent %q: it is %s.", reg.ID, agentbridge.Clip(a.Name, agentbridge.QuoteRunes), why)}
		}
	}
	return nil
}

// notAllowed says why a coordinator token's allow-list refuses agent a
// ("" when it holds its name, and its client when it names one, or there
// is no list): an agent serves the participants of its client too.
func notAllowed(allowed []string, a agentbridge.CoordinatorAgent) string {
	switch {
	case len(allowed) == 0:
		return ""
	case !slices.Contains(allowed, a.Name):
		return "not in this coordinator token's list of agents (" + strings.Join(allowed, ", ") + ")"
	case a.Client != "" && !slices.Contains(allowed, a.Client):
		return fmt.Sprintf("of client %q, which this coordinator token's list of agents (%s) does not hold: it would serve every participant of that client", a.Client, strings.Join(allowed, ", "))
	}
	return ""
}

// agentNameRefused says why name may not be a coordinator's agent ("" when
// it may): a human, a reserved name, or another coordinator's id (others).
func agentNameRefused(humans agentbridge.Humans, others []string, name string) string {
	switch {
	case humans.Has(name):
		return "a human"
	case agentbridge.ReservedAgentName(name):
		return "a reserved name"
	case slices.Contains(others, name):
		return "another coordinator's id"
	}
	return ""
}

// otherCoordinatorIDs lists the coordinator ids other than id: those of
// the registrations and those the coordinator tokens stand for.
func (s *Server) otherCoordinatorIDs(ctx context.Context, id string) ([]string, error) {
	list, err := s.registrations(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := s.store.CoordinatorTokenIDs(ctx)
	if err != nil {
		return nil, storeErr("list coordinator tokens", err)
	}
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return slices.DeleteFunc(ids, func(o string) bool { return o == id }), nil
}
