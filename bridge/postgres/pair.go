package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

var _ agentbridge.PairStore = (*Store)(nil)

// AddPairCode stores a pairing code (agentbridge.PairStore). The table
// lock makes the count and the insert one step across bridges.
func (s *Store) AddPairCode(ctx context.Context, hash []byte, name string, now, expires time.Time, limit int) (ok bool, err error) {
	defer s.guard(time.Now(), &err)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		ok = false
		if _, err := tx.Exec(ctx, `LOCK TABLE pair_codes IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM pair_codes WHERE expires_ms <= $1`, now.UnixMilli()); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM pair_codes`).Scan(&n); err != nil {
			return err
		}
		if n >= limit {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO pair_codes (hash, name, expires_ms) VALUES ($1, $2, $3)`, hash, name, expires.UnixMilli()); err != nil {
			return err
		}
		ok = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store the pairing code: %w", err)
	}
	return ok, nil
}

// TakePairCode uses up a pairing code (agentbridge.PairStore): the DELETE
// gives the row to one caller only.
func (s *Store) TakePairCode(ctx context.Context, hash []byte, now time.Time) (name string, ok bool, err error) {
	defer s.guard(time.Now(), &err)
	var expires int64
	err = s.pool.QueryRow(ctx, `DELETE FROM pair_codes WHERE hash = $1 RETURNING name, expires_ms`, hash).Scan(&name, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("take the pairing code: %w", err)
	}
	return name, now.UnixMilli() < expires, nil
}
