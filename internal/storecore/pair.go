package storecore

import (
	"context"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

var _ agentbridge.PairStore = (*Engine)(nil)

// AddPairCode stores a pairing code (agentbridge.PairStore): the lapsed
// codes dropped, the rest counted and the new one inserted in one write,
// under a lock across bridges.
func (e *Engine) AddPairCode(ctx context.Context, hash []byte, name string, now, expires time.Time, limit int) (ok bool, err error) {
	defer e.Guard(time.Now(), &err)
	err = e.Write(ctx, func(ctx context.Context, c Conn) error {
		ok = false
		if err := e.lock(ctx, c, "pair-codes"); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, `DELETE FROM pair_codes WHERE expires_ms <= ?`, now.UnixMilli()); err != nil {
			return fmt.Errorf("drop lapsed pairing codes: %w", err)
		}
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pair_codes`).Scan(&n); err != nil {
			return fmt.Errorf("count pairing codes: %w", err)
		}
		if n >= limit {
			return nil
		}
		if _, err := c.Exec(ctx, `INSERT INTO pair_codes (hash, name, expires_ms) VALUES (?, ?, ?)`, hash, name, expires.UnixMilli()); err != nil {
			return fmt.Errorf("store the pairing code: %w", err)
		}
		ok = true
		return nil
	})
	return ok, err
}

// TakePairCode uses up a pairing code (agentbridge.PairStore): the DELETE
// gives the row to one caller only.
func (e *Engine) TakePairCode(ctx context.Context, hash []byte, now time.Time) (name string, ok bool, err error) {
	defer e.Guard(time.Now(), &err)
	err = e.Write(ctx, func(ctx context.Context, c Conn) error {
		var expires int64
		found, err := Found(c.QueryRow(ctx, `DELETE FROM pair_codes WHERE hash = ? RETURNING name, expires_ms`, hash).Scan(&name, &expires))
		if err != nil {
			return fmt.Errorf("take the pairing code: %w", err)
		}
		ok = found && now.UnixMilli() < expires
		return nil
	})
	return name, ok, err
}
