package bridge

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// Claims (contract 7.1, docs/api.md "Claims"): a coordinator claims a run
// or a notice before it starts it, the store decides who holds it and at
// which fence, and writes carrying a stale fence (the Bridge-Claim header)
// are refused. The store keeps every claim, so several bridges on one
// database agree; the sweeper here only reacts to lapsed holders and
// expired waits, each step a conditional transaction of the store.

// DefaultClaimSweep is how often the bridge looks for lapsed holders and
// expired waiting claims.
const DefaultClaimSweep = time.Second

// queryClaims is what GET /claims takes: one of the two.
var queryClaims = endpointQuery{params: map[string]paramKind{"claimable": kindEventID, "thread": kindEventID}}

// claimFields are the fields a claim body may carry.
var claimFields = []string{"thread", "event", "participant", "round", "notice", "coordinator", "instance", "client", "wait", "pending_ttl_ms", "fallback_from"}

func (s *Server) handleClaimsPost(w http.ResponseWriter, r *http.Request) error {
	cs := s.store
	var req agentbridge.ClaimRequest
	if err := s.decodeStrict(w, r, &req, claimFields, false); err != nil {
		return err
	}
	if err := checkCoordinatorID(credential(r), req.Coordinator); err != nil {
		return err
	}
	if err := s.checkClaimWorkspace(r.Context(), req); err != nil {
		return err
	}
	res, err := cs.Claim(r.Context(), req)
	if err != nil {
		return storeErr("claim", err)
	}
	if res.Claim.State == agentbridge.ClaimWaiting && res.Claim.IsRun() {
		s.announceReceipt(r.Context(), res.Claim)
	}
	httpjson.Write(w, http.StatusOK, res)
	return nil
}

// announceReceipt tells the streams about the receipt of c's pair, which
// the store may just have written with the claim; a failed read only
// leaves the streams to the next change.
func (s *Server) announceReceipt(ctx context.Context, c agentbridge.Claim) {
	list, err := s.store.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: c.Thread, Event: c.Event})
	if err != nil {
		s.log.Debug("receipt of a claim", "claim", c.ID, "err", err)
		return
	}
	for _, rc := range list {
		if rc.Participant == c.Participant {
			// A listed receipt leaves its thread out (the query names
			// it); the streams route changes by it.
			rc.Thread = c.Thread
			s.receiptHub.add(rc)
		}
	}
}

// finishBody is the body of POST /claims/{id}/done. Outcome
// "not_a_trigger" (with the reason why) ends the claim as no trigger
// instead (contract 8.3: a coordinator taking a claim over decided so).
type finishBody struct {
	Coordinator string `json:"coordinator"`
	Instance    string `json:"instance"`
	Fence       int64  `json:"fence"`
	Outcome     string `json:"outcome"`
	Reason      string `json:"reason"`
}

func (s *Server) handleClaimDone(w http.ResponseWriter, r *http.Request) error {
	cs := s.store
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		return agentbridge.Errorf(agentbridge.ECodeNotFound, "There is no claim %q: a claim id is a positive number.", agentbridge.Clip(chi.URLParam(r, "id"), agentbridge.QuoteRunes))
	}
	var body finishBody
	if err := s.decodeStrict(w, r, &body, []string{"coordinator", "instance", "fence", "outcome", "reason"}, false); err != nil {
		return err
	}
	switch {
	case body.Coordinator == "":
		return agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "coordinator", "The field \"coordinator\" is required: the holder's coordinator id.")
	case body.Fence <= 0:
		return agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "fence", "The field \"fence\" is required: the fencing number the claim was granted with.")
	case body.Outcome != "" && body.Outcome != agentbridge.ClaimDone && body.Outcome != agentbridge.ClaimNotATrigger:
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "outcome", "The outcome %q is not %q or %q.", agentbridge.Clip(body.Outcome, agentbridge.QuoteRunes), agentbridge.ClaimDone, agentbridge.ClaimNotATrigger)
	case len(body.Reason) > agentbridge.MaxClaimText || !utf8.ValidString(body.Reason):
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "reason", "The field \"reason\" must be at most %d bytes of UTF-8.", agentbridge.MaxClaimText)
	}
	if err := checkCoordinatorID(credential(r), body.Coordinator); err != nil {
		return err
	}
	if body.Outcome == agentbridge.ClaimNotATrigger {
		c, rc, err := cs.EndNotATrigger(r.Context(), id, body.Fence, body.Coordinator, cmp.Or(body.Reason, "its coordinator's trigger rules disagree"))
		if err != nil {
			return storeErr("end claim", err)
		}
		if rc != nil {
			s.receiptHub.add(*rc)
		}
		s.log.Info("claim ended: not a trigger", "claim", c.ID, "thread", c.Thread, "event", c.Event, "participant", c.Participant, "by", body.Coordinator, "reason", body.Reason)
		httpjson.Write(w, http.StatusOK, c)
		return nil
	}
	c, err := cs.FinishClaim(r.Context(), id, body.Fence, body.Coordinator)
	if err != nil {
		return storeErr("finish claim", err)
	}
	httpjson.Write(w, http.StatusOK, c)
	return nil
}

func (s *Server) handleClaimsGet(w http.ResponseWriter, r *http.Request) error {
	cs := s.store
	q, err := parseQuery(r, queryClaims)
	if err != nil {
		return err
	}
	claimable, thread := q.str("claimable"), q.str("thread")
	cred := credential(r)
	var list []agentbridge.Claim
	switch {
	case claimable != "" && thread != "":
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "claimable", "GET /claims takes ?claimable=<coordinator id> or ?thread=<thread id>, not both.")
	case claimable == "" && thread == "":
		return agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "claimable", "GET /claims takes ?claimable=<coordinator id> or ?thread=<thread id>.")
	case claimable != "":
		if cred.Scope != "" && cred.Scope != agentbridge.ScopePerson && cred.Scope != agentbridge.ScopeCoordinator {
			return agentbridge.Errorf(agentbridge.ECodeForbiddenScope, "A %s token may not list claimable claims; a coordinator token may.", cred.Scope)
		}
		if err := checkCoordinatorID(cred, claimable); err != nil {
			return err
		}
		list, err = cs.Claimable(r.Context(), claimable)
	default:
		list, err = cs.Claims(r.Context(), thread)
	}
	if err != nil {
		return storeErr("list claims", err)
	}
	httpjson.Write(w, http.StatusOK, agentbridge.ClaimsResponse{Claims: list})
	return nil
}

// fenceOf is the claim fence a write carries (its Bridge-Claim header),
// with the writer's coordinator id; nil without the header.
func fenceOf(r *http.Request) (*agentbridge.ClaimFence, error) {
	v := r.Header.Get(agentbridge.ClaimHeader)
	if v == "" {
		return nil, nil
	}
	id, fence, err := agentbridge.ParseClaimHeader(v)
	if err != nil {
		return nil, err
	}
	f := &agentbridge.ClaimFence{ID: id, Fence: fence}
	if cred := credential(r); cred.Scope == agentbridge.ScopeCoordinator {
		f.Coordinator = coordinatorIDOf(cred)
	}
	return f, nil
}

// checkPresenceFence refuses a presence report whose fence is stale. The
// bridge keeps presence in memory, so the claim is read on its own.
func (s *Server) checkPresenceFence(r *http.Request) error {
	f, err := fenceOf(r)
	if err != nil || f == nil {
		return err
	}
	cs := s.store
	if err := cs.CheckFence(r.Context(), *f); err != nil {
		return storeErr("check fence", err)
	}
	return nil
}

// sweepClaims acts on lapsed holders and expired waits every interval
// until ctx ends: each step is a conditional transaction of the store, so
// two bridges on one database act once between them.
func (s *Server) sweepClaims(ctx context.Context) {
	cs := s.store
	tick := time.NewTicker(s.opts.ClaimSweep)
	defer tick.Stop()
	for {
		if err := s.sweepOnce(ctx, cs); err != nil && ctx.Err() == nil {
			s.log.Warn("sweep claims", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sweepOnce interrupts the receipts of lapsed holders' runs and expires
// the waiting claims past their ttl, announcing what changed.
func (s *Server) sweepOnce(ctx context.Context, cs agentbridge.ClaimStore) error {
	due, err := cs.DueClaims(ctx)
	if err != nil {
		return err
	}
	for _, c := range due {
		switch c.State {
		case agentbridge.ClaimRunning:
			rc, changed, err := cs.InterruptClaim(ctx, c.ID, c.Fence)
			if err != nil {
				return err
			}
			if changed {
				s.log.Info("claim holder lapsed", "claim", c.ID, "thread", c.Thread, "participant", c.Participant, "holder", c.Coordinator, "host", c.Host)
				s.receiptHub.add(rc)
			}
		case agentbridge.ClaimWaiting:
			ev, rc, ok, err := cs.ExpireClaim(ctx, c.ID)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			s.log.Info("waiting claim expired", "claim", c.ID, "thread", c.Thread, "participant", c.Participant, "notice", c.Notice)
			if ev != nil {
				s.metrics.appends.Inc()
				s.notifier.Event(*ev)
			}
			if rc != nil {
				s.receiptHub.add(*rc)
			}
		}
	}
	return nil
}
