package bridge

import (
	"bytes"
	"context"
	"fmt"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// Workspaces at the bridge (contract 8.1): the bridge keeps the workspace
// names each coordinator registers, refuses the claim of a run whose
// thread picks a workspace by a coordinator that lacks it, and says when
// a person's workspace control names one no live coordinator has.

// checkClaimWorkspace refuses (no_workspace) a run claim, other than a
// waiting one, whose thread picks a workspace for the participant (its
// invite's profile, else the thread's workspace control) that the
// claimant's registration does not list. The thread's current state
// decides. A store without registrations, or a missing registration (the
// claim's own check refuses it), leaves the claim to those checks.
func (s *Server) checkClaimWorkspace(ctx context.Context, req agentbridge.ClaimRequest) error {
	if !req.IsRun() || req.Wait {
		return nil
	}
	st, _, err := s.store.State(ctx, req.Thread, 0)
	if err != nil {
		return storeErr("thread state for a claim", err)
	}
	want := st.WorkspaceOf(req.Participant)
	if want == "" {
		return nil
	}
	list, err := s.store.Coordinators(ctx)
	if err != nil {
		return storeErr("coordinators for a claim", err)
	}
	reg, ok := storecore.Registration(list, req.Coordinator)
	if !ok || reg.HasWorkspace(want) {
		return nil
	}
	return &agentbridge.Error{Code: agentbridge.ECodeNoWorkspace, Thread: req.Thread, Participant: req.Participant,
		Message: fmt.Sprintf("Coordinator %q has no workspace %q, which this thread picks for %s: only a coordinator that has it may claim the run.",
			req.Coordinator, want, req.Participant)}
}

// workspaceIgnored is the note for a stored control whose workspace key
// names a workspace no live coordinator has registered
// (agentbridge.IgnoredWorkspace); nil otherwise, and when the
// registrations cannot be read. Only content that mentions a workspace is
// parsed again.
func (s *Server) workspaceIgnored(ctx context.Context, e agentbridge.Event) *agentbridge.Ignored {
	if e.Type != agentbridge.TypeControl || !bytes.Contains(e.Content, []byte("workspace")) {
		return nil
	}
	c := agentbridge.ControlOf(e)
	if c == nil || c.Workspace == nil || c.Workspace.Name == "" || !s.opts.Humans.Has(e.From) {
		return nil
	}
	list, err := s.store.Coordinators(ctx)
	if err != nil {
		s.log.Debug("coordinators for the workspace check", "err", err)
		return nil
	}
	return agentbridge.IgnoredWorkspace(c, list)
}
