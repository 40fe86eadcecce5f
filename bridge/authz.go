package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
)

// The credential rules (contract 7.3, docs/security.md "Scopes"): who may
// write what, checked before anything is stored. A person may do
// everything; a coordinator writes as the agents and as itself; an agent
// writes as its participant in its thread; a read token writes nothing.

// scopeRoutes are the state-changing routes each limited scope may use at
// all; the handlers then check the binding. A person may use every route;
// a read token none (but logging out).
var scopeRoutes = map[string][]string{
	agentbridge.ScopeCoordinator: {
		"POST /threads/{id}/events", "POST /threads/{id}/presence",
		"PUT /threads/{id}/receipts/{event}/{participant}", "POST /suggest",
		"POST /auth/tokens", "DELETE /auth/tokens/{id}", "POST /auth/logout",
		"PUT /coordinators/{id}", "DELETE /coordinators/{id}",
		"POST /claims", "POST /claims/{id}/done", "POST /claims/{id}/wait",
		"POST /threads/{id}/attachments",
	},
	agentbridge.ScopeAgent: {
		"POST /threads/{id}/events", "POST /threads/{id}/presence", "POST /suggest", "POST /auth/logout",
		"POST /threads/{id}/attachments",
	},
	agentbridge.ScopeRead: {"POST /auth/logout"},
}

// anyScopeRoutes are the open routes that make a new credential (a login,
// a pairing): a browser still holding the cookie of a limited token must
// be able to replace it, so no scope is checked there.
var anyScopeRoutes = []string{"POST /auth/login", "POST /auth/pair/redeem"}

// personReads are the reads only a person token may make: the paired
// devices and the Web Push subscriptions name the person's devices and
// their push endpoints.
var personReads = []string{"GET /devices", "GET /push/subscriptions"}

// checkScope refuses a state-changing request that the credential's scope
// may not make on this route (pattern is the route's "METHOD /pattern"),
// a read only a person may make, and a read of another thread by an agent
// token.
func checkScope(r *http.Request, pattern string) error {
	cred, ok := httpguard.CredentialFrom(r.Context())
	if !ok || cred.Scope == agentbridge.ScopePerson || slices.Contains(anyScopeRoutes, pattern) {
		return nil
	}
	if !httpguard.StateChanging(r.Method) {
		if slices.Contains(personReads, pattern) {
			return agentbridge.Errorf(agentbridge.ECodeForbiddenScope,
				"Only a person token may read %s; this one is a %s token.", r.URL.Path, cred.Scope)
		}
		if cred.Scope == agentbridge.ScopeAgent {
			return checkAgentRead(r, cred, pattern)
		}
		return nil
	}
	for _, p := range scopeRoutes[cred.Scope] {
		if p == pattern {
			return nil
		}
	}
	return agentbridge.Errorf(agentbridge.ECodeForbiddenScope,
		"A %s token may not %s %s; a person token may.", cred.Scope, r.Method, r.URL.Path)
}

// checkAgentRead lets an agent token read its own thread and the routes
// that hold no thread's data (the index, ping, healthz, whoami); the
// thread list, the global log and stream and the suggestions are other
// threads' and others' data, so they are refused.
func checkAgentRead(r *http.Request, cred httpguard.Credential, pattern string) error {
	path := strings.TrimPrefix(pattern, r.Method+" ")
	switch {
	case strings.HasPrefix(path, "/threads/{id}"):
		if id := pathThread(r); id != cred.Thread {
			return forbiddenThread(cred, id)
		}
		return nil
	case path == "/" || path == "/ping" || path == "/healthz" || path == "/auth/whoami":
		return nil
	case path == "/attachments/{id}":
		return nil // the handler serves only what its thread holds
	case path == "/search":
		return nil // limited to the threads it may search (searchableThreads)
	}
	return agentbridge.Errorf(agentbridge.ECodeForbiddenScope,
		"An agent token reads its own thread (%s) only, not %s.", cred.Thread, path)
}

// pathThread is the {id} of a /threads/{id}/... request.
func pathThread(r *http.Request) string {
	rest := strings.TrimPrefix(r.URL.Path, "/threads/")
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// forbiddenThread is the refusal of an agent token used in another thread.
func forbiddenThread(cred httpguard.Credential, thread string) error {
	return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Thread: thread,
		Message: fmt.Sprintf("This agent token is for thread %q only, not %q.", cred.Thread, agentbridge.Clip(thread, agentbridge.QuoteRunes))}
}

// coordinatorIDOf is the coordinator id a coordinator credential stands
// for: the participant it is bound to, else its name. It is the one id
// under which the token may register (PUT /coordinators/{id}), write as
// itself and send receipts, and its idempotency keys' scope.
func coordinatorIDOf(cred httpguard.Credential) string {
	if cred.Participant != "" {
		return cred.Participant
	}
	return cred.Name
}

// checkCoordinatorID refuses a coordinator credential acting on the
// registration of another coordinator id; a person may act on any.
func checkCoordinatorID(cred httpguard.Credential, id string) error {
	if cred.Scope != agentbridge.ScopeCoordinator || id == coordinatorIDOf(cred) {
		return nil
	}
	return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Participant: id,
		Message: fmt.Sprintf("This coordinator token is coordinator %q (its participant, else its name) and registers under that id only, not %q; a person token may register any.",
			agentbridge.Clip(coordinatorIDOf(cred), agentbridge.QuoteRunes), agentbridge.Clip(id, agentbridge.QuoteRunes))}
}

// mayWriteAs checks that cred may write as participant from in thread
// ("" for a write that belongs to no thread, such as a suggestion).
func (s *Server) mayWriteAs(ctx context.Context, cred httpguard.Credential, thread, from string) error {
	switch cred.Scope {
	case agentbridge.ScopePerson:
		return nil
	case agentbridge.ScopeCoordinator:
		if s.opts.Humans.Has(from) {
			return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Participant: from, Thread: thread,
				Message: fmt.Sprintf("A coordinator token may not write as %q, a human; only a person token may.", agentbridge.Clip(from, agentbridge.QuoteRunes))}
		}
		ok, err := s.coordinatorServes(ctx, cred, thread, from)
		if err != nil {
			return err
		}
		if !ok {
			return notServed(cred, thread, from)
		}
		return nil
	case agentbridge.ScopeAgent:
		if thread != "" && thread != cred.Thread {
			return forbiddenThread(cred, thread)
		}
		if from != cred.Participant {
			return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Participant: from, Thread: thread,
				Message: fmt.Sprintf("This agent token writes as %q only, not as %q.", cred.Participant, agentbridge.Clip(from, agentbridge.QuoteRunes))}
		}
		return nil
	}
	return agentbridge.Errorf(agentbridge.ECodeForbiddenScope, "A %s token may not write.", cred.Scope)
}

// notServed is the refusal of a coordinator credential writing as an
// agent its registration does not list.
func notServed(cred httpguard.Credential, thread, from string) error {
	return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Participant: from, Thread: thread,
		Message: fmt.Sprintf("Coordinator %q writes as itself and the agents its registration lists, and %q is not one of them: register it (PUT /coordinators/%s) first.",
			agentbridge.Clip(coordinatorIDOf(cred), agentbridge.QuoteRunes), agentbridge.Clip(from, agentbridge.QuoteRunes), agentbridge.Clip(coordinatorIDOf(cred), agentbridge.QuoteRunes))}
}

// coordinatorServes reports whether a coordinator credential may write as
// the non-human participant id in thread: its own coordinator id, or an
// agent that the latest registration under that id (live or not: a
// coordinator whose heartbeat lapsed still posts its runs' endings) serves,
// by name or, in a thread, by the client of the participant's invited
// profile (agentbridge.ServesParticipant, as the coordinator resolves it).
//
// A registration counts only for the agents it may list (contract 8.3,
// checkRegistration): never a human (mayWriteAs), a reserved name or
// another registration's coordinator id, and, for a token with an
// allow-list, only the names and clients the list holds. A registration
// stored before the bridge checked them still lists them; they are
// ignored here.
func (s *Server) coordinatorServes(ctx context.Context, cred httpguard.Credential, thread, id string) (bool, error) {
	cid := coordinatorIDOf(cred)
	if id == cid {
		return true, nil
	}
	list, err := s.registrations(ctx)
	if err != nil {
		return false, err
	}
	others := make([]string, 0, len(list))
	for _, c := range list {
		if c.ID != cid {
			others = append(others, c.ID)
		}
	}
	if agentNameRefused(s.opts.Humans, others, id) != "" {
		return false, nil
	}
	for _, c := range list {
		if c.ID != cid {
			continue
		}
		agents := allowedOf(cred, c.Agents)
		if agentbridge.ServesParticipant(agents, id, "") {
			return true, nil
		}
		client, err := s.invitedClient(ctx, thread, id)
		if err != nil || client == "" {
			return false, err
		}
		return agentbridge.ServesParticipant(agents, id, client), nil
	}
	return false, nil
}

// allowedOf keeps, of a registration's agents, those a coordinator
// credential's allow-list holds (by name, and by client when it names
// one); all of them without a list.
func allowedOf(cred httpguard.Credential, agents []agentbridge.CoordinatorAgent) []agentbridge.CoordinatorAgent {
	allowed := agentbridge.AllowedAgents(cred.Agents)
	if len(allowed) == 0 {
		return agents
	}
	return slices.DeleteFunc(slices.Clone(agents), func(a agentbridge.CoordinatorAgent) bool { return notAllowed(allowed, a) != "" })
}

// registrations are the store's coordinator registrations.
func (s *Server) registrations(ctx context.Context) ([]agentbridge.CoordinatorInfo, error) {
	list, err := s.store.Coordinators(ctx)
	if err != nil {
		return nil, storeErr("list coordinators", err)
	}
	return list, nil
}

// invitedClient is the client of participant's invited profile in thread,
// "" when it is not invited there (or thread is "").
func (s *Server) invitedClient(ctx context.Context, thread, participant string) (string, error) {
	if thread == "" {
		return "", nil
	}
	st, _, err := s.store.State(ctx, thread, 0)
	if err != nil {
		return "", storeErr("read thread state", err)
	}
	for _, inv := range st.Participants.Invited {
		if inv.ID == participant {
			return inv.Profile.Client, nil
		}
	}
	return "", nil
}

// mayWriteReceipt checks a receipt against its writer. A coordinator's
// receipt is from its own coordinator id, for itself, an agent it serves
// (coordinatorServes), or a participant no live coordinator serves (the
// "skipped: no adapter" every coordinator reports alike); an agent token
// writes none (the route is not in its scope).
func (s *Server) mayWriteReceipt(ctx context.Context, cred httpguard.Credential, in agentbridge.ReceiptInput) error {
	if cred.Scope != agentbridge.ScopeCoordinator {
		return s.mayWriteAs(ctx, cred, in.Thread, in.Participant)
	}
	if cid := coordinatorIDOf(cred); in.From != cid {
		return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Participant: in.Participant, Thread: in.Thread,
			Message: fmt.Sprintf("A receipt from this coordinator token is from %q, its coordinator id, not from %q.", agentbridge.Clip(cid, agentbridge.QuoteRunes), agentbridge.Clip(in.From, agentbridge.QuoteRunes))}
	}
	err := s.mayWriteAs(ctx, cred, in.Thread, in.Participant)
	var e *agentbridge.Error
	if err == nil || s.opts.Humans.Has(in.Participant) || !errors.As(err, &e) || e.Code != agentbridge.ECodeForbiddenSender {
		return err
	}
	list, lerr := s.registrations(ctx)
	if lerr != nil {
		return lerr
	}
	client, cerr := s.invitedClient(ctx, in.Thread, in.Participant)
	if cerr != nil {
		return cerr
	}
	if len(agentbridge.ServingCoordinators(list, in.Participant, client)) == 0 {
		return nil
	}
	return err
}

// checkAppend applies the credential rules to an event about to be
// appended to thread: whom the credential may write as, and what an agent
// may put on a message. What only a person may send (a control with a
// human-only key, such as pause or a permission answer) is refused by
// AppendRequest.Validate, given the credential's scope, where the control
// is parsed.
func (s *Server) checkAppend(r *http.Request, thread string, in agentbridge.EventInput) error {
	cred, ok := httpguard.CredentialFrom(r.Context())
	if !ok || cred.Scope == agentbridge.ScopePerson {
		return nil
	}
	if err := s.mayWriteAs(r.Context(), cred, thread, in.From); err != nil {
		return err
	}
	if cred.Scope == agentbridge.ScopeAgent {
		if err := checkAgentMessage(thread, in); err != nil {
			return err
		}
	}
	return nil
}

// coordinatorMarks are the meta keys and tags that phone notifications
// (notify.Classify) and the UI take as the coordinator's word: a
// permission request, the participant a notice speaks for, a question to
// the person, a failed run. An agent token may not put them on a message.
var (
	coordinatorMetaKeys = []string{agentbridge.MetaPermission, agentbridge.MetaQuestion, "participant"}
	coordinatorTags     = []string{"coordinator", "permission", "question", "error"}
)

// checkAgentMessage refuses what an agent token may not post: any event
// but a message, and a message carrying the coordinator's marks.
func checkAgentMessage(thread string, in agentbridge.EventInput) error {
	if in.Type != "" && in.Type != agentbridge.TypeMessage {
		return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Participant: in.From, Thread: thread,
			Message: fmt.Sprintf("An agent token posts messages only, not %q events; a person token may.", agentbridge.Clip(in.Type, agentbridge.QuoteRunes))}
	}
	for _, k := range coordinatorMetaKeys {
		if _, ok := in.Meta.Extra[k]; ok {
			return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Participant: in.From, Thread: thread,
				Message: fmt.Sprintf("An agent token may not set meta.%s: notifications and the UI trust it as the coordinator's; a coordinator token may.", k)}
		}
	}
	for _, tag := range in.Meta.Tags {
		if slices.Contains(coordinatorTags, tag) {
			return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Participant: in.From, Thread: thread,
				Message: fmt.Sprintf("An agent token may not tag a message %q: notifications and the UI trust that tag as the coordinator's; a coordinator token may.", tag)}
		}
	}
	return nil
}

// keyScope is the key space of a credential's idempotency keys (contract
// 7.3): the same key from another principal is another key, so no writer
// can post first under the key another will use. Every person credential
// is one principal, the owner; the coordinator tokens of one coordinator
// id (coordinatorIDOf) are one (up gives its coordinator a new token each
// start, and a retry after a restart must replay, never post twice); any
// other token is its own.
func keyScope(cred httpguard.Credential) string {
	switch cred.Scope {
	case agentbridge.ScopePerson:
		return agentbridge.ScopePerson
	case agentbridge.ScopeCoordinator:
		return agentbridge.ScopeCoordinator + ":" + coordinatorIDOf(cred)
	}
	return cred.ID
}
