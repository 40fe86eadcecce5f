package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// Claims (contract 7.1, agentbridge.ClaimStore): every claim write is a
// request to the writer goroutine, so it is decided and written in one
// transaction, in order with the appends and receipts it fences.

// Claim statements.
var (
	clSelect     = `SELECT ` + storecore.ClaimColumns + `, ` + nowMillis + ` FROM claims`
	clSelectID   = clSelect + ` WHERE id = ?`
	clSelectKey  = clSelect + ` WHERE thread = ? AND event = ? AND participant = ? AND round = ? AND notice = ?`
	clSelectOpen = clSelect + ` WHERE state IN ('waiting', 'running') ORDER BY id`
	clSelectTh   = clSelect + ` WHERE thread = ? ORDER BY id`
	clInsert     = `INSERT INTO claims (thread, event, participant, round, notice, client, fallback_from, filed_by, state, coordinator, instance, host, fence, created_ms, claimed_ms, expires_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ` + nowMillis + `,
			CASE WHEN ? THEN ` + nowMillis + ` ELSE 0 END, CASE WHEN ? > 0 THEN ` + nowMillis + ` + ? ELSE 0 END)`
	clTake = `UPDATE claims SET state = 'running', coordinator = ?, instance = ?, host = ?, fence = fence + 1,
		claimed_ms = ` + nowMillis + ` WHERE id = ?`
	clDone        = `UPDATE claims SET state = 'done' WHERE id = ?`
	clExpire      = `UPDATE claims SET state = 'expired' WHERE id = ?`
	clInterrupted = `UPDATE claims SET interrupted_fence = fence WHERE id = ?`
	clCountWaited = `SELECT count(*), coalesce(max(id), 0) FROM claims WHERE thread = ? AND participant = ? AND notice = ''
		AND state IN ('waiting', 'expired') AND id > ?`
)

var _ agentbridge.ClaimStore = (*Store)(nil)

// nowMillis is the database's clock (storecore.Dialect).
var nowMillis = storecore.SQLite.NowMillis

// clEvent reads a claim's event and the state before it.
var clEvent = fmt.Sprintf(storecore.ClaimEventQuery, "?", "?")

// claimOp submits fn as a writer request: it runs in the group commit's
// transaction with the batch, so that it may append events and write
// receipts as the writer does.
func (s *Store) claimOp(ctx context.Context, fn func(ctx context.Context, b *batch) (response, error)) response {
	r := s.newRequest(ctx)
	r.claim = fn
	return s.submit(ctx, r)
}

// loadClaim reads claim id on the writer's connection (nil: none).
func (s *Store) loadClaim(ctx context.Context, q string, args ...any) (*storecore.ClaimRow, error) {
	c, err := storecore.ScanClaim(s.w.conn.QueryRowContext(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load claim: %w", err)
	}
	return &c, nil
}

// Claim applies the claim rules to req's key inside the writer's
// transaction.
func (s *Store) Claim(ctx context.Context, req agentbridge.ClaimRequest) (_ agentbridge.ClaimResult, err error) {
	defer s.GuardWrite(time.Now(), &err)
	if err := req.Validate(); err != nil {
		return agentbridge.ClaimResult{}, err
	}
	resp := s.claimOp(ctx, func(ctx context.Context, b *batch) (response, error) {
		return s.claim(ctx, b, req)
	})
	if resp.err != nil {
		return agentbridge.ClaimResult{}, resp.err
	}
	return resp.value.(agentbridge.ClaimResult), nil
}

// claim is the claim write in the writer's transaction.
func (s *Store) claim(ctx context.Context, b *batch, req agentbridge.ClaimRequest) (response, error) {
	res, refusal, err := storecore.WriteClaim(ctx, &claimTx{s: s, b: b}, req, s.Humans)
	if err != nil {
		return response{}, err
	}
	if refusal != nil {
		return response{err: refusal, isOther: true}, nil
	}
	return response{value: res, isOther: true}, nil
}

// claimTx is storecore.ClaimTx and storecore.SweepTx on the writer's
// connection, within batch b.
type claimTx struct {
	s *Store
	b *batch
	// appended is AppendMessage's answer (when it ran) and receipt
	// PutReceipt's: what the sweeper's writes answer with.
	appended *response
	receipt  response
}

// ThreadExists looks thread up in the batch, the writer's heads, then the
// database.
func (t *claimTx) ThreadExists(ctx context.Context, thread string) (bool, error) {
	_, found, err := t.s.headOf(ctx, t.b, thread)
	return found, err
}

// ClaimEvent reads the claim's event and the state before it on the
// writer's connection.
func (t *claimTx) ClaimEvent(ctx context.Context, thread, event string) (agentbridge.Event, agentbridge.ThreadState, bool, error) {
	return storecore.LookupClaimEvent(t.s.w.conn.QueryRowContext(ctx, clEvent, event, thread), &t.s.claimStates)
}

// Registrations reads every registration.
func (t *claimTx) Registrations(ctx context.Context) ([]agentbridge.CoordinatorInfo, error) {
	return t.s.Registrations(ctx, storecore.SQLConn(t.s.w.conn))
}

// ClaimOfKey reads key's claim.
func (t *claimTx) ClaimOfKey(ctx context.Context, key agentbridge.ClaimKey) (*storecore.ClaimRow, error) {
	return t.s.loadClaim(ctx, clSelectKey, key.Thread, key.Event, key.Participant, key.Round, key.Notice)
}

// InsertClaim inserts c; the writer is the one connection that writes, so
// the key's row cannot appear between ClaimOfKey and the insert.
func (t *claimTx) InsertClaim(ctx context.Context, c storecore.NewClaim) (bool, error) {
	args := c.Args()
	_, err := t.s.w.conn.ExecContext(ctx, clInsert, append(args, args[len(args)-1])...)
	return err == nil, err
}

// WaitingFiledBy counts coordinator's waiting claims on the writer's
// connection (the one writer takes the turns).
func (t *claimTx) WaitingFiledBy(ctx context.Context, coordinator string) (n int, err error) {
	err = t.s.w.conn.QueryRowContext(ctx, `SELECT count(*) FROM claims WHERE state = 'waiting' AND filed_by = ?`, coordinator).Scan(&n)
	return n, err
}

// TakeClaim hands claim id to me.
func (t *claimTx) TakeClaim(ctx context.Context, id int64, me agentbridge.CoordinatorInfo) error {
	_, err := t.s.w.conn.ExecContext(ctx, clTake, me.ID, me.Instance, me.Host, id)
	return err
}

// PutReceipt writes in in the batch; a refusal of the receipt leaves the
// claim as written.
func (t *claimTx) PutReceipt(ctx context.Context, in agentbridge.ReceiptInput) (err error) {
	t.receipt, err = t.s.putReceipt(ctx, t.b, in)
	return err
}

// ClaimByID reads claim id.
func (t *claimTx) ClaimByID(ctx context.Context, id int64) (*storecore.ClaimRow, error) {
	return t.s.loadClaim(ctx, clSelectID, id)
}

// MarkInterrupted records claim id's interruption at its fence.
func (t *claimTx) MarkInterrupted(ctx context.Context, id int64) error {
	_, err := t.s.w.conn.ExecContext(ctx, clInterrupted, id)
	return err
}

// MarkExpired expires claim id.
func (t *claimTx) MarkExpired(ctx context.Context, id int64) error {
	_, err := t.s.w.conn.ExecContext(ctx, clExpire, id)
	return err
}

// StateNow is thread's state as the writer's batch sees it.
func (t *claimTx) StateNow(ctx context.Context, thread string) (agentbridge.ThreadState, error) {
	h, _, err := t.s.headOf(ctx, t.b, thread)
	return h.state, err
}

// LastUnserved reads the last unserved notice of (thread, participant).
func (t *claimTx) LastUnserved(ctx context.Context, thread, participant string) (ms, last int64, found bool, err error) {
	found, err = storecore.Found(t.s.w.conn.QueryRowContext(ctx, `SELECT posted_ms, last_claim FROM unserved_notices WHERE thread = ? AND participant = ?`,
		thread, participant).Scan(&ms, &last))
	return ms, last, found, err
}

// PutUnserved records an unserved notice of (thread, participant).
func (t *claimTx) PutUnserved(ctx context.Context, thread, participant string, nowMs, lastClaim int64) error {
	_, err := t.s.w.conn.ExecContext(ctx, `INSERT INTO unserved_notices (thread, participant, posted_ms, last_claim) VALUES (?, ?, ?, ?)
		ON CONFLICT (thread, participant) DO UPDATE SET posted_ms = excluded.posted_ms, last_claim = excluded.last_claim`, thread, participant, nowMs, lastClaim)
	return err
}

// CountWaited counts the run claims of (thread, participant) after claim
// after that wait or expired.
func (t *claimTx) CountWaited(ctx context.Context, thread, participant string, after int64) (n int, newest int64, err error) {
	err = t.s.w.conn.QueryRowContext(ctx, clCountWaited, thread, participant, after).Scan(&n, &newest)
	return n, newest, err
}

// MarkNotATrigger ends claim id as no trigger.
func (t *claimTx) MarkNotATrigger(ctx context.Context, id int64) error {
	_, err := t.s.w.conn.ExecContext(ctx, `UPDATE claims SET state = 'not_a_trigger' WHERE id = ?`, id)
	return err
}

// PendingTTL is how long claim id was to wait.
func (t *claimTx) PendingTTL(ctx context.Context, id int64) (time.Duration, error) {
	var ms int64
	err := t.s.w.conn.QueryRowContext(ctx, `SELECT expires_ms - created_ms FROM claims WHERE id = ?`, id).Scan(&ms)
	return time.Duration(ms) * time.Millisecond, err
}

// ReceiptOf reads the receipt of run claim c's pair.
func (t *claimTx) ReceiptOf(ctx context.Context, c agentbridge.Claim) (agentbridge.Receipt, bool, error) {
	old := agentbridge.Receipt{Thread: c.Thread, Event: c.Event, Participant: c.Participant}
	found, err := storecore.Found(t.s.w.conn.QueryRowContext(ctx, rSelectOne, c.Thread, c.Event, c.Participant).
		Scan(&old.From, &old.State, &old.Reason, &old.Invocation, &old.Reply, &old.UpdatedAt))
	if err != nil {
		return old, false, fmt.Errorf("load receipt: %w", err)
	}
	return old, found, nil
}

// AppendMessage appends req in the batch.
func (t *claimTx) AppendMessage(ctx context.Context, req agentbridge.AppendRequest, meta string, ctl *agentbridge.Control) (refusal, err error) {
	resp, err := t.s.appendEvent(ctx, t.b, req, meta, ctl)
	if err != nil {
		return nil, err
	}
	t.appended = &resp
	return resp.err, nil
}

// FinishClaim marks claim id done through the writer when coordinator
// holds it at fence.
func (s *Store) FinishClaim(ctx context.Context, id, fence int64, coordinator string) (_ agentbridge.Claim, err error) {
	defer s.GuardWrite(time.Now(), &err)
	resp := s.claimOp(ctx, func(ctx context.Context, _ *batch) (response, error) {
		row, err := s.loadClaim(ctx, clSelectID, id)
		if err != nil {
			return response{}, err
		}
		if row == nil {
			return response{err: agentbridge.ClaimNotFound(id), isOther: true}, nil
		}
		if err := (agentbridge.ClaimFence{ID: id, Fence: fence, Coordinator: coordinator}).Check(row.Claim); err != nil {
			return response{err: err, isOther: true}, nil
		}
		if row.State != agentbridge.ClaimDone {
			if _, err := s.w.conn.ExecContext(ctx, clDone, id); err != nil {
				return response{}, fmt.Errorf("finish claim %d: %w", id, err)
			}
			row.State = agentbridge.ClaimDone
		}
		return response{value: row.Claim, isOther: true}, nil
	})
	if resp.err != nil {
		return agentbridge.Claim{}, resp.err
	}
	return resp.value.(agentbridge.Claim), nil
}

// EndNotATrigger ends claim id as no trigger through the writer, when
// coordinator holds it at fence, skipping its pair's open receipt.
func (s *Store) EndNotATrigger(ctx context.Context, id, fence int64, coordinator, why string) (_ agentbridge.Claim, _ *agentbridge.Receipt, err error) {
	defer s.GuardWrite(time.Now(), &err)
	resp := s.claimOp(ctx, func(ctx context.Context, b *batch) (response, error) {
		tx := &claimTx{s: s, b: b}
		c, wrote, refusal, err := storecore.EndNotATrigger(ctx, tx, id, fence, coordinator, why)
		if err != nil || refusal != nil {
			return response{err: refusal, isOther: true}, err
		}
		resp := response{value: c, isOther: true}
		if wrote {
			resp.rcpt, resp.changed = tx.receipt.rcpt, tx.receipt.changed
		}
		return resp, nil
	})
	if resp.err != nil {
		return agentbridge.Claim{}, nil, resp.err
	}
	var rc *agentbridge.Receipt
	if resp.changed {
		rc = &resp.rcpt
	}
	return resp.value.(agentbridge.Claim), rc, nil
}

// checkFence is the fence check of a write inside the writer's
// transaction: nil when f passes, the refusal otherwise.
func (s *Store) checkFence(ctx context.Context, f agentbridge.ClaimFence) (refusal, err error) {
	row, err := s.loadClaim(ctx, clSelectID, f.ID)
	if err != nil || row == nil {
		return agentbridge.ClaimNotFound(f.ID), err
	}
	return f.Check(row.Claim), nil
}

// CheckFence checks f against its claim as read from the read pool.
func (s *Store) CheckFence(ctx context.Context, f agentbridge.ClaimFence) (err error) {
	defer s.Guard(time.Now(), &err)
	return storecore.ReadFence(ctx, s, clSelectID, f)
}

// ClaimRows runs a claims query (storecore.ClaimReader) on the read pool.
func (s *Store) ClaimRows(ctx context.Context, q string, args ...any) ([]storecore.ClaimRow, error) {
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "claims", storecore.ScanClaim)
}

// Claimable lists the claims coordinator may take now, from the read pool.
func (s *Store) Claimable(ctx context.Context, coordinator string) (_ []agentbridge.Claim, err error) {
	defer s.Guard(time.Now(), &err)
	return storecore.ReadClaimable(ctx, s, clSelectOpen, coordinator)
}

// Claims lists thread's claims from the read pool.
func (s *Store) Claims(ctx context.Context, thread string) (_ []agentbridge.Claim, err error) {
	defer s.Guard(time.Now(), &err)
	if _, err := s.Thread(ctx, thread); err != nil {
		return nil, err
	}
	return storecore.ReadClaims(ctx, s, clSelectTh, thread)
}

// DueClaims lists the claims the sweeper acts on, from the read pool.
func (s *Store) DueClaims(ctx context.Context) (_ []agentbridge.Claim, err error) {
	defer s.Guard(time.Now(), &err)
	return storecore.ReadDue(ctx, s, clSelectOpen)
}

// InterruptClaim writes the interrupted receipt of claim id at fence
// through the writer, when it is still due.
func (s *Store) InterruptClaim(ctx context.Context, id, fence int64) (_ agentbridge.Receipt, _ bool, err error) {
	defer s.GuardWrite(time.Now(), &err)
	resp := s.claimOp(ctx, func(ctx context.Context, b *batch) (response, error) {
		tx := &claimTx{s: s, b: b}
		wrote, err := storecore.InterruptClaim(ctx, tx, id, fence)
		if err != nil || !wrote {
			return response{isOther: true}, err
		}
		tx.receipt.isOther = true
		return tx.receipt, nil
	})
	if resp.err != nil {
		return agentbridge.Receipt{}, false, resp.err
	}
	return resp.rcpt, resp.changed, nil
}

// ExpireClaim expires waiting claim id through the writer, when it is
// still due: the claim, the bridge's error message and the failed receipt
// commit together.
func (s *Store) ExpireClaim(ctx context.Context, id int64) (_ *agentbridge.Event, _ *agentbridge.Receipt, _ bool, err error) {
	defer s.GuardWrite(time.Now(), &err)
	resp := s.claimOp(ctx, func(ctx context.Context, b *batch) (response, error) {
		tx := &claimTx{s: s, b: b}
		expired, err := storecore.ExpireClaim(ctx, s.Log, tx, id, s.Humans)
		if err != nil || !expired {
			return response{isOther: true}, err
		}
		resp := response{isOther: true}
		if tx.appended != nil && tx.appended.err == nil {
			resp = *tx.appended
		}
		resp.rcpt, resp.changed, resp.value = tx.receipt.rcpt, tx.receipt.changed, true
		return resp, nil
	})
	if resp.err != nil || resp.value == nil {
		return nil, nil, false, resp.err
	}
	var ev *agentbridge.Event
	if resp.event.ID != "" {
		ev = &resp.event
	}
	var rc *agentbridge.Receipt
	if resp.changed {
		rc = &resp.rcpt
	}
	return ev, rc, true, nil
}
