package storecore

import (
	"context"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// The claims' SQL and the claim store's methods, once for both databases:
// a driver opens the transaction a claim write runs in (ClaimWriteTx, its
// ClaimWrite), the rest is here.

var _ agentbridge.ClaimWaitStore = (*Engine)(nil)

// ClaimWriteTx is a claim write's transaction as its driver opens it: the
// SQL of ClaimSQL, and what the driver does its own way (a thread's
// existence and state as its batch sees them, a receipt and a message
// written in the transaction).
type ClaimWriteTx interface {
	ClaimTx
	SweepTx
	WaitTx
	// Written is the receipt PutReceipt wrote, and whether it changed.
	Written() (agentbridge.Receipt, bool)
	// Conn is the transaction's Conn.
	Conn() Conn
}

// ClaimSQL is the claims' SQL on a write transaction's Conn, which a
// driver's ClaimWriteTx embeds; on PostgreSQL it locks every claim and
// receipt row it reads, so that two bridges decide one key in turn.
type ClaimSQL struct {
	E *Engine
	C Conn
}

// claimSelect reads claims and the database's now.
func (e *Engine) claimSelect() string {
	return `SELECT ` + ClaimColumns + `, ` + e.NowMillis + ` FROM claims`
}

// claimEventQuery reads a claim's event and the state before it.
const claimEventQuery = `SELECT e.gseq, e.id, e.thread, e.seq, e.ts, e.type, e.sender, e.recipient, e.content, e.meta,
	coalesce(s.seq, 0), coalesce(s.state, '{}')
	FROM events e LEFT JOIN state_snapshots s ON s.thread = e.thread
		AND s.seq = (SELECT max(seq) FROM state_snapshots WHERE thread = e.thread AND seq < e.seq)
	WHERE e.id = ? AND e.thread = ?`

// ClaimEvent reads the claim's event and the state before it.
func (t ClaimSQL) ClaimEvent(ctx context.Context, thread, event string) (agentbridge.Event, agentbridge.ThreadState, bool, error) {
	return LookupClaimEvent(t.C.QueryRow(ctx, claimEventQuery, event, thread), &t.E.claimStates)
}

// Registrations reads every registration.
func (t ClaimSQL) Registrations(ctx context.Context) ([]agentbridge.CoordinatorInfo, error) {
	return t.E.Registrations(ctx, t.C)
}

// load reads (and on PostgreSQL locks) one claim (nil: none).
func (t ClaimSQL) load(ctx context.Context, where string, args ...any) (*ClaimRow, error) {
	c, err := ScanClaim(t.C.QueryRow(ctx, t.E.claimSelect()+` WHERE `+where+t.E.ForUpdate, args...))
	if found, err := Found(err); err != nil || !found {
		return nil, wrapf(err, "load claim")
	}
	return &c, nil
}

// ClaimOfKey reads key's claim.
func (t ClaimSQL) ClaimOfKey(ctx context.Context, key agentbridge.ClaimKey) (*ClaimRow, error) {
	return t.load(ctx, `thread = ? AND event = ? AND participant = ? AND round = ? AND notice = ?`,
		key.Thread, key.Event, key.Participant, key.Round, key.Notice)
}

// ClaimByID reads claim id.
func (t ClaimSQL) ClaimByID(ctx context.Context, id int64) (*ClaimRow, error) {
	return t.load(ctx, `id = ?`, id)
}

// InsertClaim inserts c, unless another bridge inserted the key first.
func (t ClaimSQL) InsertClaim(ctx context.Context, c NewClaim) (bool, error) {
	now := t.E.NowMillis
	args := c.Args()
	n, err := t.C.Exec(ctx, `INSERT INTO claims (thread, event, participant, round, notice, client, fallback_from, filed_by, state, coordinator, instance, host, fence, created_ms, claimed_ms, expires_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, `+now+`,
			CASE WHEN ? THEN `+now+` ELSE 0 END, CASE WHEN CAST(? AS BIGINT) > 0 THEN `+now+` + CAST(? AS BIGINT) ELSE 0 END)
		ON CONFLICT (thread, event, participant, round, notice) DO NOTHING`, append(args, args[len(args)-1])...)
	return err == nil && n > 0, err
}

// WaitingFiledBy counts coordinator's waiting claims, under a lock of the
// count on PostgreSQL, so that two bridges filing for one coordinator
// count in turn.
func (t ClaimSQL) WaitingFiledBy(ctx context.Context, coordinator string) (n int, err error) {
	if err := t.E.lock(ctx, t.C, "waiting-claims:"+coordinator); err != nil {
		return 0, err
	}
	err = t.C.QueryRow(ctx, `SELECT count(*) FROM claims WHERE state = 'waiting' AND filed_by = ?`, coordinator).Scan(&n)
	return n, err
}

// TakeClaim hands claim id to me.
func (t ClaimSQL) TakeClaim(ctx context.Context, id int64, me agentbridge.CoordinatorInfo) error {
	_, err := t.C.Exec(ctx, `UPDATE claims SET state = 'running', coordinator = ?, instance = ?, host = ?, fence = fence + 1,
		claimed_ms = `+t.E.NowMillis+` WHERE id = ?`, me.ID, me.Instance, me.Host, id)
	return err
}

// set runs an UPDATE of claim id.
func (t ClaimSQL) set(ctx context.Context, id int64, set string, args ...any) error {
	_, err := t.C.Exec(ctx, `UPDATE claims SET `+set+` WHERE id = ?`, append(args, id)...)
	return err
}

// MarkInterrupted records claim id's interruption at its fence.
func (t ClaimSQL) MarkInterrupted(ctx context.Context, id int64) error {
	return t.set(ctx, id, `interrupted_fence = fence`)
}

// MarkExpired expires claim id.
func (t ClaimSQL) MarkExpired(ctx context.Context, id int64) error {
	return t.set(ctx, id, `state = 'expired'`)
}

// MarkNotATrigger ends claim id as no trigger.
func (t ClaimSQL) MarkNotATrigger(ctx context.Context, id int64) error {
	return t.set(ctx, id, `state = 'not_a_trigger'`)
}

// SetWaiting makes claim id waiting with no holder, due at dueMs.
func (t ClaimSQL) SetWaiting(ctx context.Context, id, dueMs, expiresMs int64) error {
	return t.set(ctx, id, `state = 'waiting', coordinator = '', instance = '', host = '', due_ms = ?, expires_ms = ?`, dueMs, expiresMs)
}

// LastUnserved reads the last unserved notice of (thread, participant).
func (t ClaimSQL) LastUnserved(ctx context.Context, thread, participant string) (ms, last int64, found bool, err error) {
	found, err = Found(t.C.QueryRow(ctx, `SELECT posted_ms, last_claim FROM unserved_notices WHERE thread = ? AND participant = ?`,
		thread, participant).Scan(&ms, &last))
	return ms, last, found, err
}

// PutUnserved records an unserved notice of (thread, participant).
func (t ClaimSQL) PutUnserved(ctx context.Context, thread, participant string, nowMs, lastClaim int64) error {
	_, err := t.C.Exec(ctx, `INSERT INTO unserved_notices (thread, participant, posted_ms, last_claim) VALUES (?, ?, ?, ?)
		ON CONFLICT (thread, participant) DO UPDATE SET posted_ms = excluded.posted_ms, last_claim = excluded.last_claim`, thread, participant, nowMs, lastClaim)
	return err
}

// CountWaited counts the run claims of (thread, participant) after claim
// after that wait or expired.
func (t ClaimSQL) CountWaited(ctx context.Context, thread, participant string, after int64) (n int, newest int64, err error) {
	err = t.C.QueryRow(ctx, `SELECT count(*), coalesce(max(id), 0) FROM claims WHERE thread = ? AND participant = ? AND notice = ''
		AND state IN ('waiting', 'expired') AND id > ?`, thread, participant, after).Scan(&n, &newest)
	return n, newest, err
}

// PendingTTL is how long claim id was to wait.
func (t ClaimSQL) PendingTTL(ctx context.Context, id int64) (time.Duration, error) {
	var ms int64
	err := t.C.QueryRow(ctx, `SELECT expires_ms - created_ms FROM claims WHERE id = ?`, id).Scan(&ms)
	return time.Duration(ms) * time.Millisecond, err
}

// ReceiptOf reads the receipt of run claim c's pair.
func (t ClaimSQL) ReceiptOf(ctx context.Context, c agentbridge.Claim) (agentbridge.Receipt, bool, error) {
	old, err := ScanReceipt(t.C.QueryRow(ctx, `SELECT `+ReceiptColumns+` FROM receipts
		WHERE thread = ? AND event = ? AND participant = ?`+t.E.ForUpdate, c.Thread, c.Event, c.Participant))
	found, err := Found(err)
	if err != nil {
		return old, false, fmt.Errorf("load receipt: %w", err)
	}
	old.Thread = c.Thread
	return old, found, nil
}

// CheckFence checks f against claim f.ID in a write transaction (locked
// until COMMIT on PostgreSQL): the refusal, nil when f passes.
func (t ClaimSQL) CheckFence(ctx context.Context, f agentbridge.ClaimFence) (refusal, err error) {
	row, err := t.ClaimByID(ctx, f.ID)
	if err != nil || row == nil {
		return agentbridge.ClaimNotFound(f.ID), err
	}
	return f.Check(row.Claim), nil
}

// Claim applies the claim rules to req's key in one write.
func (e *Engine) Claim(ctx context.Context, req agentbridge.ClaimRequest) (_ agentbridge.ClaimResult, err error) {
	defer e.GuardWrite(time.Now(), &err)
	if err := req.Validate(); err != nil {
		return agentbridge.ClaimResult{}, err
	}
	var out agentbridge.ClaimResult
	err = e.ClaimWrite(ctx, func(ctx context.Context, t ClaimWriteTx) error {
		res, refusal, err := WriteClaim(ctx, t, req, e.Humans)
		if refusal != nil {
			return refusal
		}
		out = res
		return err
	})
	return out, err
}

// FinishClaim marks claim id done when coordinator holds it at fence.
func (e *Engine) FinishClaim(ctx context.Context, id, fence int64, coordinator string) (_ agentbridge.Claim, err error) {
	defer e.GuardWrite(time.Now(), &err)
	var out agentbridge.Claim
	err = e.ClaimWrite(ctx, func(ctx context.Context, t ClaimWriteTx) error {
		row, err := t.ClaimByID(ctx, id)
		if err != nil {
			return err
		}
		if row == nil {
			return agentbridge.ClaimNotFound(id)
		}
		if err := (agentbridge.ClaimFence{ID: id, Fence: fence, Coordinator: coordinator}).Check(row.Claim); err != nil {
			return err
		}
		if row.State != agentbridge.ClaimDone {
			if _, err := t.Conn().Exec(ctx, `UPDATE claims SET state = 'done' WHERE id = ?`, id); err != nil {
				return fmt.Errorf("finish claim %d: %w", id, err)
			}
			row.State = agentbridge.ClaimDone
		}
		out = row.Claim
		return nil
	})
	return out, err
}

// Conn is the transaction's Conn.
func (t ClaimSQL) Conn() Conn { return t.C }

// EndNotATrigger ends claim id as no trigger, when coordinator holds it at
// fence, skipping its pair's open receipt.
func (e *Engine) EndNotATrigger(ctx context.Context, id, fence int64, coordinator, why string) (_ agentbridge.Claim, _ *agentbridge.Receipt, err error) {
	defer e.GuardWrite(time.Now(), &err)
	var out agentbridge.Claim
	var rc *agentbridge.Receipt
	err = e.ClaimWrite(ctx, func(ctx context.Context, t ClaimWriteTx) error {
		c, wrote, refusal, err := EndNotATrigger(ctx, t, id, fence, coordinator, why)
		if refusal != nil {
			return refusal
		}
		rc = nil
		if r, changed := t.Written(); wrote && changed {
			rc = &r
		}
		out = c
		return err
	})
	return out, rc, err
}

// InterruptClaim writes the interrupted receipt of claim id at fence, when
// it is still due.
func (e *Engine) InterruptClaim(ctx context.Context, id, fence int64) (_ agentbridge.Receipt, _ bool, err error) {
	defer e.GuardWrite(time.Now(), &err)
	var out agentbridge.Receipt
	var changed bool
	err = e.ClaimWrite(ctx, func(ctx context.Context, t ClaimWriteTx) error {
		wrote, err := InterruptClaim(ctx, t, id, fence)
		out, changed = agentbridge.Receipt{}, false
		if wrote {
			out, changed = t.Written()
		}
		return err
	})
	return out, changed, err
}

// WaitClaim puts claim req.ID back to waiting, due at due
// (agentbridge.ClaimWaitStore).
func (e *Engine) WaitClaim(ctx context.Context, req agentbridge.ClaimWaitRequest, due time.Time) (_ agentbridge.Claim, _ agentbridge.Receipt, err error) {
	defer e.GuardWrite(time.Now(), &err)
	var c agentbridge.Claim
	var rc agentbridge.Receipt
	err = e.ClaimWrite(ctx, func(ctx context.Context, t ClaimWriteTx) error {
		out, refusal, err := WriteWait(ctx, t, req, due)
		if refusal != nil {
			return refusal
		}
		c = out
		rc, _ = t.Written()
		return err
	})
	return c, rc, err
}

// claimRows reads the claims of a query's condition, committed.
func (e *Engine) claimRows(ctx context.Context, where string, args ...any) ([]ClaimRow, error) {
	return List(ctx, e.Read, "claims", ScanClaim, e.claimSelect()+` WHERE `+where, args...)
}

// openClaims are the waiting and running claims, oldest first.
const openClaims = `state IN ('waiting', 'running') ORDER BY id`

// CheckFence checks f against its claim as committed.
func (e *Engine) CheckFence(ctx context.Context, f agentbridge.ClaimFence) (err error) {
	defer e.Guard(time.Now(), &err)
	rows, err := e.claimRows(ctx, `id = ?`, f.ID)
	if err != nil {
		return fmt.Errorf("load claim %d: %w", f.ID, err)
	}
	if len(rows) == 0 {
		return agentbridge.ClaimNotFound(f.ID)
	}
	return f.Check(rows[0].Claim)
}

// Claimable lists the claims coordinator may take now.
func (e *Engine) Claimable(ctx context.Context, coordinator string) (_ []agentbridge.Claim, err error) {
	defer e.Guard(time.Now(), &err)
	rows, err := e.claimRows(ctx, openClaims)
	if err != nil {
		return nil, err
	}
	regs, err := e.Registrations(ctx, e.Read)
	if err != nil {
		return nil, err
	}
	return Claimable(rows, regs, coordinator), nil
}

// DueClaims lists the claims the sweeper acts on.
func (e *Engine) DueClaims(ctx context.Context) (_ []agentbridge.Claim, err error) {
	defer e.Guard(time.Now(), &err)
	rows, err := e.claimRows(ctx, openClaims)
	if err != nil || len(rows) == 0 {
		return []agentbridge.Claim{}, err
	}
	regs, err := e.Registrations(ctx, e.Read)
	if err != nil {
		return nil, err
	}
	return Due(rows, regs), nil
}

// Claims lists thread's claims.
func (e *Engine) Claims(ctx context.Context, thread string) (_ []agentbridge.Claim, err error) {
	defer e.Guard(time.Now(), &err)
	if _, err := e.Thread(ctx, thread); err != nil {
		return nil, err
	}
	rows, err := e.claimRows(ctx, `thread = ? ORDER BY id`, thread)
	if err != nil {
		return nil, err
	}
	out := make([]agentbridge.Claim, len(rows))
	for i, c := range rows {
		out[i] = c.Claim
	}
	return out, nil
}
