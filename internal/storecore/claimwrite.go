package storecore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// ClaimTx is what a claim write needs of a store inside the transaction
// it runs in: each method is the store's SQL on that transaction's
// connection, with the store's own locks (PostgreSQL locks every claim row
// it reads, so that two bridges on one database decide a key in turn).
type ClaimTx interface {
	// ThreadExists looks up the claim's thread.
	ThreadExists(ctx context.Context, thread string) (bool, error)
	// ClaimEvent reads the claim's event and the thread's state just
	// before it (claimEventQuery); found is false when there is none.
	ClaimEvent(ctx context.Context, thread, event string) (e agentbridge.Event, before agentbridge.ThreadState, found bool, err error)
	// StateNow is thread's derived state now (a fallback's participant
	// may be invited after the trigger).
	StateNow(ctx context.Context, thread string) (agentbridge.ThreadState, error)
	// Registrations reads every registration.
	Registrations(ctx context.Context) ([]agentbridge.CoordinatorInfo, error)
	// ClaimOfKey reads the claim of key (nil: none).
	ClaimOfKey(ctx context.Context, key agentbridge.ClaimKey) (*ClaimRow, error)
	// InsertClaim inserts c; false when the key's row already exists,
	// inserted by another bridge since ClaimOfKey read none.
	InsertClaim(ctx context.Context, c NewClaim) (bool, error)
	// TakeClaim makes me the holder of claim id, running, at its fence
	// plus one.
	TakeClaim(ctx context.Context, id int64, me agentbridge.CoordinatorInfo) error
	// PutReceipt writes a receipt in the transaction.
	PutReceipt(ctx context.Context, in agentbridge.ReceiptInput) error
	// WaitingFiledBy counts the waiting claims coordinator filed, taking
	// turns with the other writes that count them (PostgreSQL locks the
	// count), so that the cap holds between two bridges.
	WaitingFiledBy(ctx context.Context, coordinator string) (int, error)
}

// NewClaim is a claim row to insert: a waiting one, or a running one held
// by Holder at fence 1.
type NewClaim struct {
	Req     agentbridge.ClaimRequest
	Running bool
	Holder  agentbridge.CoordinatorInfo
}

// Args are the values of the insert, in order: the key, client, the
// participant it falls back from, who filed it, state, coordinator,
// instance, host, fence, whether it is running (its claimed time is now)
// and the waiting ttl in milliseconds (0 when running).
func (c NewClaim) Args() []any {
	k := c.Req.ClaimKey
	if c.Running {
		return []any{k.Thread, k.Event, k.Participant, k.Round, k.Notice, c.Req.Client, c.Req.FallbackFrom, c.Req.Coordinator,
			agentbridge.ClaimRunning, c.Holder.ID, c.Holder.Instance, c.Holder.Host, int64(1), true, int64(0)}
	}
	return []any{k.Thread, k.Event, k.Participant, k.Round, k.Notice, c.Req.Client, c.Req.FallbackFrom, c.Req.Coordinator,
		agentbridge.ClaimWaiting, "", "", "", int64(0), false, c.Req.PendingTTLMillis}
}

// WriteClaim applies the claim rules (DecideClaim) to req's key through tx
// and writes what they decide: a new row, with the queued receipt of a
// waiting run, or a takeover. A new key is checked first (CheckNewClaim).
// refusal is the client's error (thread or event not found, claimant not
// registered, not a trigger, not served, too many), err a failure of the
// store. humans are the store's.
func WriteClaim(ctx context.Context, tx ClaimTx, req agentbridge.ClaimRequest, humans agentbridge.Humans) (res agentbridge.ClaimResult, refusal, err error) {
	if found, err := tx.ThreadExists(ctx, req.Thread); err != nil {
		return res, nil, err
	} else if !found {
		return res, agentbridge.ThreadNotFound(req.Thread), nil
	}
	ev, before, found, err := tx.ClaimEvent(ctx, req.Thread, req.Event)
	if err != nil {
		return res, nil, err
	} else if !found {
		return res, ReceiptEventNotFound(agentbridge.ReceiptInput{Thread: req.Thread, Event: req.Event}), nil
	}
	regs, err := tx.Registrations(ctx)
	if err != nil {
		return res, nil, err
	}
	me, refusal := CheckClaimant(req, regs)
	if refusal != nil {
		return res, refusal, nil
	}
	for {
		row, err := tx.ClaimOfKey(ctx, req.ClaimKey)
		if err != nil {
			return res, nil, err
		}
		if row == nil {
			facts := agentbridge.ClaimTriggerFacts{Event: ev, Before: before, Now: before, Humans: humans}
			if refusal, err := CheckNewClaim(ctx, tx, &req, facts); refusal != nil || err != nil {
				return res, refusal, err
			}
		}
		if refusal := CheckServes(req, me, row); refusal != nil {
			return res, refusal, nil
		}
		act, granted, prev := DecideClaim(req, row, regs)
		switch act {
		case ClaimInsertWaiting, ClaimInsertRunning:
			running := act == ClaimInsertRunning
			if !running {
				if refusal, err := checkWaitingCap(ctx, tx, req.Coordinator); refusal != nil || err != nil {
					return res, refusal, err
				}
			}
			inserted, err := tx.InsertClaim(ctx, NewClaim{Req: req, Running: running, Holder: me})
			if err != nil {
				return res, nil, fmt.Errorf("insert claim: %w", err)
			}
			if !inserted {
				continue // another bridge inserted it first: decide again on its row
			}
			if !running && req.IsRun() {
				if err := tx.PutReceipt(ctx, WaitingReceipt(req)); err != nil {
					return res, nil, err
				}
			}
		case ClaimTake:
			if err := tx.TakeClaim(ctx, row.ID, me); err != nil {
				return res, nil, fmt.Errorf("take claim %d: %w", row.ID, err)
			}
		}
		if act != ClaimKeep {
			if row, err = tx.ClaimOfKey(ctx, req.ClaimKey); err != nil || row == nil {
				return res, nil, fmt.Errorf("reload claim: %w", errors.Join(err, sql.ErrNoRows))
			}
		}
		return agentbridge.ClaimResult{Claim: row.Claim, Granted: granted, PreviousHost: prev}, nil, nil
	}
}

// checkWaitingCap refuses (429 too_many) a new waiting claim of
// coordinator when it already filed agentbridge.MaxWaitingClaims that
// still wait (contract 8.3).
func checkWaitingCap(ctx context.Context, tx ClaimTx, coordinator string) (refusal, err error) {
	n, err := tx.WaitingFiledBy(ctx, coordinator)
	if err != nil {
		return nil, fmt.Errorf("count waiting claims: %w", err)
	}
	if n >= agentbridge.MaxWaitingClaims {
		return agentbridge.Errorf(agentbridge.ECodeTooMany, "Coordinator %q has %d waiting claims, the most one coordinator may file; a waiting claim is filed again once some are taken or expire.", coordinator, n), nil
	}
	return nil, nil
}

// CheckNewClaim is the check of a claim of a key that has none yet, before
// anything is written (contract 8.3; docs/security.md "Claims only for
// real triggers"): a run's event must be a trigger for its participant by
// what the bridge can decide (agentbridge.CheckClaimTrigger, 400
// not_a_trigger), facts holding the event and the thread's state before
// it; the run's client becomes the participant's invited one, by which the
// coordinators serving it are matched. A key claimed already (a claim
// filed before this check, taken over now) is decided again by the
// coordinator that takes it. Other checks of a new claim go here, beside
// it. A notice claim passes: it runs no agent.
func CheckNewClaim(ctx context.Context, tx ClaimTx, req *agentbridge.ClaimRequest, facts agentbridge.ClaimTriggerFacts) (refusal, err error) {
	if !req.IsRun() {
		return nil, nil
	}
	if req.FallbackFrom != "" {
		if facts.Now, err = tx.StateNow(ctx, req.Thread); err != nil {
			return nil, fmt.Errorf("read the state of thread %s: %w", req.Thread, err)
		}
	}
	if refusal := agentbridge.CheckClaimTrigger(*req, facts); refusal != nil {
		return refusal, nil
	}
	inv, _ := facts.Now.Invited(req.Participant)
	req.Client = inv.Profile.Client
	return nil, nil
}
