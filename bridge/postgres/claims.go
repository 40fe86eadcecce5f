package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// Claims (contract 7.1, agentbridge.ClaimStore): each claim write is one
// transaction that locks the claim's row (SELECT … FOR UPDATE), so two
// bridges on the database decide a key one after the other; a fenced
// append or receipt locks the same row in its own transaction. Locks are
// taken threads first, then claims, then receipts, in every path (an
// append's thread FOR NO KEY UPDATE, a claim's or a receipt's FOR KEY
// SHARE, which no path's thread lock conflicts with); a transaction
// PostgreSQL ends with a serialization failure or a deadlock all the same
// is run again (tx.go).

// Claim statements.
var (
	clSelect     = `SELECT ` + storecore.ClaimColumns + `, ` + nowMillis + ` FROM claims`
	clSelectID   = clSelect + ` WHERE id = $1`
	clSelectKey  = clSelect + ` WHERE thread = $1 AND event = $2 AND participant = $3 AND round = $4 AND notice = $5`
	clSelectOpen = clSelect + ` WHERE state IN ('waiting', 'running') ORDER BY id`
	clSelectTh   = clSelect + ` WHERE thread = $1 ORDER BY id`
	clInsert     = `INSERT INTO claims (thread, event, participant, round, notice, client, fallback_from, filed_by, state, coordinator, instance, host, fence, created_ms, claimed_ms, expires_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, ` + nowMillis + `,
			CASE WHEN $14 THEN ` + nowMillis + ` ELSE 0 END, CASE WHEN $15::bigint > 0 THEN ` + nowMillis + ` + $15::bigint ELSE 0 END)
		ON CONFLICT (thread, event, participant, round, notice) DO NOTHING`
	clTake = `UPDATE claims SET state = 'running', coordinator = $1, instance = $2, host = $3, fence = fence + 1,
		claimed_ms = ` + nowMillis + ` WHERE id = $4`
)

var _ agentbridge.ClaimStore = (*Store)(nil)

// nowMillis is the database's clock (storecore.Dialect).
var nowMillis = storecore.PostgreSQL.NowMillis

// lockClaim reads and locks a claim's row in tx (nil: none).
func lockClaim(ctx context.Context, tx pgx.Tx, q string, args ...any) (*storecore.ClaimRow, error) {
	c, err := storecore.ScanClaim(tx.QueryRow(ctx, q+` FOR UPDATE`, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load claim: %w", err)
	}
	return &c, nil
}

// checkFenceTx checks f against its claim, locked in tx until COMMIT; the
// refusal is an ECodeFenced *agentbridge.Error.
func checkFenceTx(ctx context.Context, tx pgx.Tx, f agentbridge.ClaimFence) error {
	row, err := lockClaim(ctx, tx, clSelectID, f.ID)
	if err != nil {
		return err
	}
	if row == nil {
		return agentbridge.ClaimNotFound(f.ID)
	}
	return f.Check(row.Claim)
}

// Claim applies the claim rules to req's key in one transaction that
// locks the key's row.
func (s *Store) Claim(ctx context.Context, req agentbridge.ClaimRequest) (_ agentbridge.ClaimResult, err error) {
	defer s.GuardWrite(time.Now(), &err)
	if err := req.Validate(); err != nil {
		return agentbridge.ClaimResult{}, err
	}
	var out agentbridge.ClaimResult
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		res, refusal, err := storecore.WriteClaim(ctx, &claimTx{s: s, tx: tx}, req, s.Humans)
		if refusal != nil {
			return refusal
		}
		out = res
		return err
	})
	return out, err
}

// claimTx is storecore.ClaimTx and storecore.SweepTx in transaction tx;
// l is the writer's batch, for an expiry's message.
type claimTx struct {
	s  *Store
	tx pgx.Tx
	l  *lookups
	// appended is AppendMessage's answer (when it ran), rcpt and changed
	// PutReceipt's: what the sweeper's writes answer with.
	appended *response
	rcpt     agentbridge.Receipt
	changed  bool
}

// ThreadExists looks thread up, taking its row's FOR KEY SHARE lock first
// in the transaction, as the one lock order has it (threads, claims,
// receipts).
func (t *claimTx) ThreadExists(ctx context.Context, thread string) (bool, error) {
	return exists(ctx, t.tx, "thread "+thread, `SELECT 1 FROM threads WHERE id = $1 FOR KEY SHARE`, thread)
}

// ClaimEvent reads the claim's event and the state before it in tx.
func (t *claimTx) ClaimEvent(ctx context.Context, thread, event string) (agentbridge.Event, agentbridge.ThreadState, bool, error) {
	return storecore.LookupClaimEvent(t.tx.QueryRow(ctx, clEvent, event, thread), &t.s.claimStates)
}

// exists reports whether the query q finds a row in tx; what names the
// row for the error.
func exists(ctx context.Context, tx pgx.Tx, what, q string, args ...any) (bool, error) {
	var one int
	found, err := storecore.Found(tx.QueryRow(ctx, q, args...).Scan(&one))
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", what, err)
	}
	return found, nil
}

// Registrations reads every registration.
func (t *claimTx) Registrations(ctx context.Context) ([]agentbridge.CoordinatorInfo, error) {
	return t.s.Registrations(ctx, pgConn{t.tx})
}

// ClaimOfKey reads and locks key's claim.
func (t *claimTx) ClaimOfKey(ctx context.Context, key agentbridge.ClaimKey) (*storecore.ClaimRow, error) {
	return lockClaim(ctx, t.tx, clSelectKey, key.Thread, key.Event, key.Participant, key.Round, key.Notice)
}

// InsertClaim inserts c, unless another bridge inserted the key first.
func (t *claimTx) InsertClaim(ctx context.Context, c storecore.NewClaim) (bool, error) {
	tag, err := t.tx.Exec(ctx, clInsert, c.Args()...)
	return err == nil && tag.RowsAffected() > 0, err
}

// WaitingFiledBy counts coordinator's waiting claims under a lock of the
// count, held until COMMIT, so that two bridges filing for one
// coordinator count in turn.
func (t *claimTx) WaitingFiledBy(ctx context.Context, coordinator string) (n int, err error) {
	if _, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('waiting-claims:' || $1, 0))`, coordinator); err != nil {
		return 0, fmt.Errorf("lock the waiting claims' count: %w", err)
	}
	err = t.tx.QueryRow(ctx, `SELECT count(*) FROM claims WHERE state = 'waiting' AND filed_by = $1`, coordinator).Scan(&n)
	return n, err
}

// TakeClaim hands claim id to me.
func (t *claimTx) TakeClaim(ctx context.Context, id int64, me agentbridge.CoordinatorInfo) error {
	_, err := t.tx.Exec(ctx, clTake, me.ID, me.Instance, me.Host, id)
	return err
}

// PutReceipt writes in in tx.
func (t *claimTx) PutReceipt(ctx context.Context, in agentbridge.ReceiptInput) (err error) {
	t.rcpt, t.changed, err = t.s.putReceiptTx(ctx, t.tx, in)
	return err
}

// ClaimByID reads and locks claim id.
func (t *claimTx) ClaimByID(ctx context.Context, id int64) (*storecore.ClaimRow, error) {
	return lockClaim(ctx, t.tx, clSelectID, id)
}

// MarkInterrupted records claim id's interruption at its fence.
func (t *claimTx) MarkInterrupted(ctx context.Context, id int64) error {
	_, err := t.tx.Exec(ctx, `UPDATE claims SET interrupted_fence = fence WHERE id = $1`, id)
	return err
}

// MarkExpired expires claim id.
func (t *claimTx) MarkExpired(ctx context.Context, id int64) error {
	_, err := t.tx.Exec(ctx, `UPDATE claims SET state = 'expired' WHERE id = $1`, id)
	return err
}

// StateNow is thread's state: as the writer's batch holds it in an
// expiry (the writer locked the thread), else as committed.
func (t *claimTx) StateNow(ctx context.Context, thread string) (agentbridge.ThreadState, error) {
	if t.l != nil {
		if h, ok := t.l.b.heads[thread]; ok {
			return h.state, nil
		}
	}
	var state []byte
	if err := t.tx.QueryRow(ctx, `SELECT state FROM threads WHERE id = $1`, thread).Scan(&state); err != nil {
		return agentbridge.ThreadState{}, fmt.Errorf("load the state of thread %s: %w", thread, err)
	}
	var st agentbridge.ThreadState
	if err := json.Unmarshal(state, &st); err != nil {
		return st, fmt.Errorf("decode the state of thread %s: %w", thread, err)
	}
	return st.Normalize(), nil
}

// LastUnserved reads the last unserved notice of (thread, participant).
func (t *claimTx) LastUnserved(ctx context.Context, thread, participant string) (ms, last int64, found bool, err error) {
	found, err = storecore.Found(t.tx.QueryRow(ctx, `SELECT posted_ms, last_claim FROM unserved_notices WHERE thread = $1 AND participant = $2`,
		thread, participant).Scan(&ms, &last))
	return ms, last, found, err
}

// PutUnserved records an unserved notice of (thread, participant).
func (t *claimTx) PutUnserved(ctx context.Context, thread, participant string, nowMs, lastClaim int64) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO unserved_notices (thread, participant, posted_ms, last_claim) VALUES ($1, $2, $3, $4)
		ON CONFLICT (thread, participant) DO UPDATE SET posted_ms = excluded.posted_ms, last_claim = excluded.last_claim`, thread, participant, nowMs, lastClaim)
	return err
}

// CountWaited counts the run claims of (thread, participant) after claim
// after that wait or expired.
func (t *claimTx) CountWaited(ctx context.Context, thread, participant string, after int64) (n int, newest int64, err error) {
	err = t.tx.QueryRow(ctx, `SELECT count(*), coalesce(max(id), 0) FROM claims WHERE thread = $1 AND participant = $2 AND notice = ''
		AND state IN ('waiting', 'expired') AND id > $3`, thread, participant, after).Scan(&n, &newest)
	return n, newest, err
}

// MarkNotATrigger ends claim id as no trigger.
func (t *claimTx) MarkNotATrigger(ctx context.Context, id int64) error {
	_, err := t.tx.Exec(ctx, `UPDATE claims SET state = 'not_a_trigger' WHERE id = $1`, id)
	return err
}

// PendingTTL is how long claim id was to wait.
func (t *claimTx) PendingTTL(ctx context.Context, id int64) (time.Duration, error) {
	var ms int64
	err := t.tx.QueryRow(ctx, `SELECT expires_ms - created_ms FROM claims WHERE id = $1`, id).Scan(&ms)
	return time.Duration(ms) * time.Millisecond, err
}

// ReceiptOf reads and locks the receipt of run claim c's pair.
func (t *claimTx) ReceiptOf(ctx context.Context, c agentbridge.Claim) (agentbridge.Receipt, bool, error) {
	old, err := storecore.ScanReceipt(t.tx.QueryRow(ctx, `SELECT `+receiptColumns+` FROM receipts
		WHERE thread = $1 AND event = $2 AND participant = $3 FOR UPDATE`, c.Thread, c.Event, c.Participant))
	found, err := storecore.Found(err)
	if err != nil {
		return old, false, fmt.Errorf("load receipt: %w", err)
	}
	return old, found, nil
}

// AppendMessage appends req in the writer's batch.
func (t *claimTx) AppendMessage(ctx context.Context, req agentbridge.AppendRequest, meta string, ctl *agentbridge.Control) (refusal, err error) {
	resp, err := t.s.appendEvent(ctx, t.l, req, meta, ctl)
	if err != nil {
		return nil, err
	}
	t.appended = &resp
	return resp.err, nil
}

// FinishClaim marks claim id done when coordinator holds it at fence.
func (s *Store) FinishClaim(ctx context.Context, id, fence int64, coordinator string) (_ agentbridge.Claim, err error) {
	defer s.GuardWrite(time.Now(), &err)
	var out agentbridge.Claim
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := lockClaim(ctx, tx, clSelectID, id)
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
			if _, err := tx.Exec(ctx, `UPDATE claims SET state = 'done' WHERE id = $1`, id); err != nil {
				return fmt.Errorf("finish claim %d: %w", id, err)
			}
			row.State = agentbridge.ClaimDone
		}
		out = row.Claim
		return nil
	})
	return out, err
}

// EndNotATrigger ends claim id as no trigger in one transaction that
// locks the claim, then its pair's receipt, when coordinator holds it at
// fence.
func (s *Store) EndNotATrigger(ctx context.Context, id, fence int64, coordinator, why string) (_ agentbridge.Claim, _ *agentbridge.Receipt, err error) {
	defer s.GuardWrite(time.Now(), &err)
	var out agentbridge.Claim
	var rc *agentbridge.Receipt
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t := &claimTx{s: s, tx: tx}
		c, wrote, refusal, err := storecore.EndNotATrigger(ctx, t, id, fence, coordinator, why)
		if refusal != nil {
			return refusal
		}
		if wrote && t.changed {
			rc = &t.rcpt
		}
		out = c
		return err
	})
	return out, rc, err
}

// CheckFence checks f against its claim as committed.
func (s *Store) CheckFence(ctx context.Context, f agentbridge.ClaimFence) (err error) {
	defer s.Guard(time.Now(), &err)
	return storecore.ReadFence(ctx, s, clSelectID, f)
}

// ClaimRows runs a claims query (storecore.ClaimReader).
func (s *Store) ClaimRows(ctx context.Context, q string, args ...any) ([]storecore.ClaimRow, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "claims", storecore.ScanClaim)
}

// Claimable lists the claims coordinator may take now.
func (s *Store) Claimable(ctx context.Context, coordinator string) (_ []agentbridge.Claim, err error) {
	defer s.Guard(time.Now(), &err)
	return storecore.ReadClaimable(ctx, s, clSelectOpen, coordinator)
}

// Claims lists thread's claims.
func (s *Store) Claims(ctx context.Context, thread string) (_ []agentbridge.Claim, err error) {
	defer s.Guard(time.Now(), &err)
	if _, err := s.Thread(ctx, thread); err != nil {
		return nil, err
	}
	return storecore.ReadClaims(ctx, s, clSelectTh, thread)
}

// DueClaims lists the claims the sweeper acts on.
func (s *Store) DueClaims(ctx context.Context) (_ []agentbridge.Claim, err error) {
	defer s.Guard(time.Now(), &err)
	return storecore.ReadDue(ctx, s, clSelectOpen)
}

// InterruptClaim writes the interrupted receipt of claim id at fence in
// one transaction that locks the claim, when it is still due.
func (s *Store) InterruptClaim(ctx context.Context, id, fence int64) (_ agentbridge.Receipt, _ bool, err error) {
	defer s.GuardWrite(time.Now(), &err)
	var out agentbridge.Receipt
	var changed bool
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		t := &claimTx{s: s, tx: tx}
		_, err := storecore.InterruptClaim(ctx, t, id, fence)
		out, changed = t.rcpt, t.changed
		return err
	})
	return out, changed, err
}

// ExpireClaim expires waiting claim id through the writer, when it is
// still due: the claim, the bridge's error message and the failed receipt
// commit in the writer's transaction.
func (s *Store) ExpireClaim(ctx context.Context, id int64) (_ *agentbridge.Event, _ *agentbridge.Receipt, _ bool, err error) {
	defer s.GuardWrite(time.Now(), &err)
	var thread string
	err = s.pool.QueryRow(ctx, `SELECT thread FROM claims WHERE id = $1`, id).Scan(&thread)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("load claim %d: %w", id, err)
	}
	// append.Thread makes the writer lock the thread first, as for an
	// append, before expireClaim locks the claim.
	resp := s.submit(ctx, &request{ctx: ctx, expire: id, append: agentbridge.AppendRequest{Thread: thread}})
	if resp.err != nil || !resp.expired {
		return nil, nil, false, resp.err
	}
	var ev *agentbridge.Event
	if resp.event.ID != "" {
		ev = &resp.event
	}
	return ev, resp.rcpt, true, nil
}

// expireClaim runs in the writer's transaction: it locks claim id and,
// when it is still due, expires it, queues the bridge's error message in
// the batch and fails the receipt.
func (s *Store) expireClaim(ctx context.Context, l *lookups, id int64) (response, error) {
	t := &claimTx{s: s, tx: l.tx, l: l}
	expired, err := storecore.ExpireClaim(ctx, s.Log, t, id, s.Humans)
	if err != nil || !expired {
		return response{}, err
	}
	var resp response
	if t.appended != nil && t.appended.err == nil {
		resp = *t.appended
	}
	resp.expired = true
	if t.changed {
		resp.rcpt = &t.rcpt
	}
	return resp, nil
}

// clEvent reads a claim's event and the state before it.
var clEvent = fmt.Sprintf(storecore.ClaimEventQuery, "$1", "$2")
