package sqlite

import (
	"context"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

var _ agentbridge.ClaimWaitStore = (*Store)(nil)

// clWait is storecore.WaitSQL in SQLite's placeholders.
var clWait = storecore.WaitSQL(func(int) string { return "?" })

// SetWaiting makes claim id waiting, due at dueMs (storecore.WaitTx).
func (t *claimTx) SetWaiting(ctx context.Context, id, dueMs, expiresMs int64) error {
	_, err := t.s.w.conn.ExecContext(ctx, clWait, dueMs, expiresMs, id)
	return err
}

// WaitClaim puts claim req.ID back to waiting, due at due, through the
// writer (agentbridge.ClaimWaitStore).
func (s *Store) WaitClaim(ctx context.Context, req agentbridge.ClaimWaitRequest, due time.Time) (_ agentbridge.Claim, _ agentbridge.Receipt, err error) {
	defer s.GuardWrite(time.Now(), &err)
	resp := s.claimOp(ctx, func(ctx context.Context, b *batch) (response, error) {
		tx := &claimTx{s: s, b: b}
		c, refusal, err := storecore.WriteWait(ctx, tx, req, due)
		if err != nil || refusal != nil {
			return response{err: refusal, isOther: true}, err
		}
		return response{value: c, rcpt: tx.receipt.rcpt, isOther: true}, nil
	})
	if resp.err != nil {
		return agentbridge.Claim{}, agentbridge.Receipt{}, resp.err
	}
	return resp.value.(agentbridge.Claim), resp.rcpt, nil
}
