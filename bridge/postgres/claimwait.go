package postgres

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

var _ agentbridge.ClaimWaitStore = (*Store)(nil)

// clWait is storecore.WaitSQL in PostgreSQL's placeholders.
var clWait = storecore.WaitSQL(func(n int) string { return "$" + strconv.Itoa(n) })

// SetWaiting makes claim id waiting, due at dueMs (storecore.WaitTx).
func (t *claimTx) SetWaiting(ctx context.Context, id, dueMs, expiresMs int64) error {
	_, err := t.tx.Exec(ctx, clWait, dueMs, expiresMs, id)
	return err
}

// WaitClaim puts claim req.ID back to waiting, due at due, in one
// transaction that locks the claim (agentbridge.ClaimWaitStore).
func (s *Store) WaitClaim(ctx context.Context, req agentbridge.ClaimWaitRequest, due time.Time) (_ agentbridge.Claim, _ agentbridge.Receipt, err error) {
	defer s.GuardWrite(time.Now(), &err)
	var c agentbridge.Claim
	var rc agentbridge.Receipt
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t := &claimTx{s: s, tx: tx}
		out, refusal, err := storecore.WriteWait(ctx, t, req, due)
		if refusal != nil {
			return refusal
		}
		c, rc = out, t.rcpt
		return err
	})
	return c, rc, err
}
