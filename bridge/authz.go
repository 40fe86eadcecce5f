package bridge

import (
	"fmt"
	"net/http"
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
	},
	agentbridge.ScopeAgent: {
		"POST /threads/{id}/events", "POST /threads/{id}/presence",
		"PUT /threads/{id}/receipts/{event}/{participant}", "POST /suggest", "POST /auth/logout",
	},
	agentbridge.ScopeRead: {"POST /auth/logout"},
}

// checkScope refuses a state-changing request that the credential's scope
// may not make on this route (pattern is the route's "METHOD /pattern"),
// and a read of another thread by an agent token.
func checkScope(r *http.Request, pattern string) error {
	cred, ok := httpguard.CredentialFrom(r.Context())
	if !ok || cred.Scope == agentbridge.ScopePerson {
		return nil
	}
	if !httpguard.StateChanging(r.Method) {
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

// mayWriteAs checks that cred may write as participant from in thread
// ("" for a write that belongs to no thread, such as a suggestion).
func (s *Server) mayWriteAs(cred httpguard.Credential, thread, from string) error {
	switch cred.Scope {
	case agentbridge.ScopePerson:
		return nil
	case agentbridge.ScopeCoordinator:
		// A coordinator writes as the agents it runs and as itself. It may
		// write as any participant that is not a human; issue 28 narrows
		// this to the agents its registration serves (coordinatorServes).
		if s.opts.Humans.Has(from) || !s.coordinatorServes(cred, from) {
			return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Participant: from, Thread: thread,
				Message: fmt.Sprintf("A coordinator token may not write as %q, a human; only a person token may.", agentbridge.Clip(from, agentbridge.QuoteRunes))}
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

// coordinatorServes reports whether a coordinator credential may write as
// the non-human participant id: its own id, or any agent for now (the seam
// issue 28 narrows to the agents its registration serves).
func (s *Server) coordinatorServes(cred httpguard.Credential, id string) bool {
	return true
}

// checkAppend applies the credential rules to an event about to be
// appended to thread: the sender, then what only a person may send (a
// control with a human-only key, such as pause or a permission answer).
func (s *Server) checkAppend(r *http.Request, thread string, in agentbridge.EventInput) error {
	cred, ok := httpguard.CredentialFrom(r.Context())
	if !ok || cred.Scope == agentbridge.ScopePerson {
		return nil
	}
	if err := s.mayWriteAs(cred, thread, in.From); err != nil {
		return err
	}
	if cred.Scope == agentbridge.ScopeAgent && in.Type != "" && in.Type != agentbridge.TypeMessage {
		return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Participant: in.From, Thread: thread,
			Message: fmt.Sprintf("An agent token posts messages only, not %q events; a person token may.", agentbridge.Clip(in.Type, agentbridge.QuoteRunes))}
	}
	if in.Type != agentbridge.TypeControl {
		return nil
	}
	c, err := agentbridge.ParseControl(in.Content)
	if err != nil {
		return nil // the store refuses it with its own sentence
	}
	if keys := agentbridge.HumanOnlyKeys(c); len(keys) > 0 {
		return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Participant: in.From, Thread: thread,
			Message: fmt.Sprintf("A %s token may not set %s: only a person may (a human control, or an answer to a permission request).", cred.Scope, strings.Join(keys, ", "))}
	}
	return nil
}

// keyScope is the key space of a credential's idempotency keys (contract
// 7.3): the same key from another principal is another key, so no writer
// can post first under the key another will use. Every person credential
// is one principal, the owner; the coordinator tokens of one coordinator
// id are one (up gives its coordinator a new token each start, and a
// retry after a restart must replay, never post twice); any other token
// is its own.
func keyScope(cred httpguard.Credential) string {
	switch {
	case cred.Scope == agentbridge.ScopePerson:
		return agentbridge.ScopePerson
	case cred.Scope == agentbridge.ScopeCoordinator && cred.Participant != "":
		return agentbridge.ScopeCoordinator + ":" + cred.Participant
	}
	return cred.ID
}
