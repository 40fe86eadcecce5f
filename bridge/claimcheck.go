package bridge

import (
	"context"
	"fmt"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// checkClaim is the bridge's check of a run claim before the store decides
// it (contract 8.3, docs/security.md "Claims only for real triggers"): its
// event must be a trigger for its participant by what the bridge can
// decide (agentbridge.CheckClaimTrigger, 400 not_a_trigger), and a claim
// that takes a run now, rather than waiting, must come from a coordinator
// whose registration serves the participant (403 forbidden_sender). It
// sets the claim's client to the participant's invited one, which is what
// the coordinators serving it are matched by. Nothing is stored when it
// refuses. A notice claim passes unchecked: it runs no agent.
func (s *Server) checkClaim(ctx context.Context, cs agentbridge.ClaimStore, req *agentbridge.ClaimRequest) error {
	if !req.IsRun() {
		return nil
	}
	e, found, err := cs.EventByID(ctx, req.Thread, req.Event)
	if err != nil {
		return storeErr("read the claim's event", err)
	}
	if !found {
		if _, err := s.store.Thread(ctx, req.Thread); err != nil {
			return storeErr("read the claim's thread", err)
		}
		return &agentbridge.Error{Code: agentbridge.ECodeEventNotFound, Field: "event", Thread: req.Thread,
			Message: fmt.Sprintf("Thread %s has no event %q to claim.", req.Thread, agentbridge.Clip(req.Event, agentbridge.QuoteRunes))}
	}
	f := agentbridge.ClaimTriggerFacts{Event: e, Humans: s.opts.Humans}
	if e.Seq > 1 {
		if f.Before, _, err = s.store.State(ctx, req.Thread, e.Seq-1); err != nil {
			return storeErr("read the thread's state before the claim's event", err)
		}
	}
	f.Now = f.Before
	if req.FallbackFrom != "" {
		if f.Now, _, err = s.store.State(ctx, req.Thread, 0); err != nil {
			return storeErr("read the thread's state", err)
		}
	}
	if err := agentbridge.CheckClaimTrigger(*req, f); err != nil {
		if filed, lerr := claimFiled(ctx, cs, *req); lerr != nil || filed {
			// Taking over a claim filed already: its taker decides the
			// trigger again and ends the claim when it is none (a
			// claim filed before the bridge checked, say).
			return lerr
		}
		return err
	}
	inv, _ := f.Now.Invited(req.Participant)
	req.Client = inv.Profile.Client
	if req.Wait {
		return nil
	}
	return s.checkClaimantServes(ctx, *req)
}

// checkClaimantServes refuses a run claim by a registered coordinator
// whose registration serves neither the participant by name nor its
// invited client: a claim it holds would keep the coordinators serving it
// from the run. An unregistered claimant is the store's to refuse
// (not_registered, which a coordinator just starting retries).
func (s *Server) checkClaimantServes(ctx context.Context, req agentbridge.ClaimRequest) error {
	list, err := s.registrations(ctx)
	if err != nil {
		return err
	}
	for _, c := range list {
		if c.ID == req.Coordinator && !agentbridge.ServesParticipant(c.Agents, req.Participant, req.Client) {
			return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Thread: req.Thread, Participant: req.Participant,
				Message: fmt.Sprintf("Coordinator %q does not serve %s: its registration lists neither that name nor an agent of client %q, so it may not claim its runs.",
					req.Coordinator, req.Participant, req.Client)}
		}
	}
	return nil
}

// claimFiled reports whether the key of req already has a claim that a
// coordinator may take, waiting or running.
func claimFiled(ctx context.Context, cs agentbridge.ClaimStore, req agentbridge.ClaimRequest) (bool, error) {
	list, err := cs.Claims(ctx, req.Thread)
	if err != nil {
		return false, storeErr("list the thread's claims", err)
	}
	for _, c := range list {
		if c.ClaimKey == req.ClaimKey && (c.State == agentbridge.ClaimWaiting || c.State == agentbridge.ClaimRunning) {
			return true, nil
		}
	}
	return false, nil
}
