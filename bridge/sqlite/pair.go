package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

var _ agentbridge.PairStore = (*Store)(nil)

// AddPairCode stores a pairing code (agentbridge.PairStore) through the
// writer, so that the count and the insert are one step.
func (s *Store) AddPairCode(ctx context.Context, hash []byte, name string, now, expires time.Time, limit int) (ok bool, err error) {
	defer s.guard(time.Now(), &err)
	err = s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
		if _, err := conn.ExecContext(ctx, `DELETE FROM pair_codes WHERE expires_ms <= ?`, now.UnixMilli()); err != nil {
			return fmt.Errorf("drop lapsed pairing codes: %w", err)
		}
		var n int
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM pair_codes`).Scan(&n); err != nil {
			return fmt.Errorf("count pairing codes: %w", err)
		}
		if n >= limit {
			return nil
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO pair_codes (hash, name, expires_ms) VALUES (?, ?, ?)`, hash, name, expires.UnixMilli()); err != nil {
			return fmt.Errorf("store the pairing code: %w", err)
		}
		ok = true
		return nil
	})
	return ok, err
}

// TakePairCode uses up a pairing code (agentbridge.PairStore).
func (s *Store) TakePairCode(ctx context.Context, hash []byte, now time.Time) (name string, ok bool, err error) {
	defer s.guard(time.Now(), &err)
	err = s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
		var expires int64
		err := conn.QueryRowContext(ctx, `DELETE FROM pair_codes WHERE hash = ? RETURNING name, expires_ms`, hash).Scan(&name, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("take the pairing code: %w", err)
		}
		ok = now.UnixMilli() < expires
		return nil
	})
	return name, ok, err
}
