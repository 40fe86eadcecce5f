package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/big"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// maxEpochID bounds an epoch id to what a JSON number holds exactly
// (2^53 - 1), as in the SQLite store.
const maxEpochID = 1<<53 - 1

// LogEpoch returns the log's epoch (see agentbridge.LogEpoch), read or
// begun at Open: only a restore, which the bridges are stopped for,
// changes it.
func (s *Store) LogEpoch() agentbridge.LogEpoch { return s.epoch }

// openEpoch reads the log's epoch, beginning one when the database has
// none (its first start with this schema) or when the events table is not
// the one the epoch was begun on (its OID differs: a restore from a dump
// re-created it). A new epoch's base is the log's last gseq. The table
// lock makes bridges starting together on one database agree on one
// epoch.
func openEpoch(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (agentbridge.LogEpoch, error) {
	var epoch agentbridge.LogEpoch
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE log_epoch IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		var anchor, events uint32
		if err := tx.QueryRow(ctx, `SELECT 'events'::regclass::oid`).Scan(&events); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT id, base, anchor FROM log_epoch`).Scan(&epoch.ID, &epoch.Base, &anchor)
		found := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if found && anchor == events {
			return nil
		}
		old := epoch
		if epoch.ID, err = newEpochID(); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(gseq), 0) FROM events`).Scan(&epoch.Base); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO log_epoch (one, id, base, anchor) VALUES (true, $1, $2, $3)
			ON CONFLICT (one) DO UPDATE SET id = excluded.id, base = excluded.base, anchor = excluded.anchor`,
			epoch.ID, epoch.Base, events); err != nil {
			return err
		}
		if found {
			log.Warn("the events table is not the one the log's epoch began on: the database was restored from a dump; a new epoch begins at its last event",
				"old_epoch", old.ID, "epoch", epoch.ID, "base", epoch.Base)
		}
		return nil
	})
	if err != nil {
		return agentbridge.LogEpoch{}, fmt.Errorf("read the log's epoch: %w", err)
	}
	return epoch, nil
}

// newEpochID is a random epoch id in [1, maxEpochID].
func newEpochID() (int64, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(maxEpochID))
	if err != nil {
		return 0, fmt.Errorf("draw an epoch id: %w", err)
	}
	return n.Int64() + 1, nil
}
