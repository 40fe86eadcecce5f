package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// nowMillis is the database server's clock in milliseconds since the
// epoch: every bridge on the database reads the same clock, whatever the
// machines' clocks say.
const nowMillis = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// Coordinator statements.
const (
	cSelectOne = `SELECT ` + storecore.CoordinatorColumns + `, ` + nowMillis + ` FROM coordinators WHERE id = $1`
	cSelectAll = `SELECT ` + storecore.CoordinatorColumns + `, ` + nowMillis + ` FROM coordinators ORDER BY id`
	cUpsert    = `INSERT INTO coordinators (` + storecore.CoordinatorColumns + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, ` + nowMillis + `, ` + nowMillis + `, $9)
		ON CONFLICT (id) DO UPDATE SET
			registered_ms = CASE WHEN coordinators.instance = excluded.instance
				THEN coordinators.registered_ms ELSE excluded.registered_ms END,
			instance = excluded.instance, host = excluded.host, agents = excluded.agents,
			version = excluded.version, capacity = excluded.capacity, status_url = excluded.status_url,
			ttl_ms = excluded.ttl_ms, heartbeat_ms = excluded.heartbeat_ms, workspaces = excluded.workspaces
		RETURNING ` + storecore.CoordinatorColumns + `, ` + nowMillis
)

// RegisterCoordinator stores reg in one transaction that locks the id's
// row, with the heartbeat at the database's now, and names the live
// registration of another instance it replaced.
func (s *Store) RegisterCoordinator(ctx context.Context, reg agentbridge.Registration) (_ agentbridge.RegisterResult, err error) {
	defer s.guard(time.Now(), &err)
	if err := reg.Validate(); err != nil {
		return agentbridge.RegisterResult{}, err
	}
	agents, err := storecore.EncodeAgents(reg)
	if err != nil {
		return agentbridge.RegisterResult{}, err
	}
	var out agentbridge.RegisterResult
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var prev *agentbridge.CoordinatorInfo
		if p, err := storecore.ScanCoordinator(tx.QueryRow(ctx, cSelectOne+` FOR UPDATE`, reg.ID)); err == nil {
			prev = &p
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("load coordinator %s: %w", reg.ID, err)
		}
		if err := recordNames(ctx, tx, reg); err != nil {
			return err
		}
		c, err := storecore.ScanCoordinator(tx.QueryRow(ctx, cUpsert, reg.ID, reg.Instance, reg.Host, agents,
			reg.Version, reg.Capacity, reg.StatusURL, reg.TTLMillis, storecore.EncodeWorkspaces(reg)))
		if err != nil {
			return fmt.Errorf("store coordinator %s: %w", reg.ID, err)
		}
		if err := recordServed(ctx, tx, reg); err != nil {
			return err
		}
		out = agentbridge.RegisterResult{Coordinator: c, Duplicate: storecore.Duplicate(prev, reg)}
		return nil
	})
	return out, err
}

// DeregisterCoordinator removes id's registration when instance holds it.
func (s *Store) DeregisterCoordinator(ctx context.Context, id, instance string) (err error) {
	defer s.guard(time.Now(), &err)
	if _, err := s.pool.Exec(ctx, `DELETE FROM coordinators WHERE id = $1 AND instance = $2`, id, instance); err != nil {
		return fmt.Errorf("remove coordinator %s: %w", id, err)
	}
	return nil
}

// Coordinators reads every registration.
func (s *Store) Coordinators(ctx context.Context) (_ []agentbridge.CoordinatorInfo, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.pool.Query(ctx, cSelectAll)
	if err != nil {
		return nil, fmt.Errorf("list coordinators: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "coordinators", storecore.ScanCoordinator)
}

// recordNames adds reg's new agent names to the names its coordinator id
// ever registered, in tx, or refuses past the cap (storecore.NewNames).
func recordNames(ctx context.Context, tx pgx.Tx, reg agentbridge.Registration) error {
	rows, err := tx.Query(ctx, `SELECT name FROM coordinator_names WHERE coordinator = $1`, reg.ID)
	if err != nil {
		return fmt.Errorf("list the names of coordinator %s: %w", reg.ID, err)
	}
	known, err := storecore.Collect(rows, "names", storecore.ScanString)
	rows.Close()
	if err != nil {
		return err
	}
	names, refusal := storecore.NewNames(reg, known)
	if refusal != nil {
		return refusal
	}
	for _, n := range names {
		if _, err := tx.Exec(ctx, `INSERT INTO coordinator_names (coordinator, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`, reg.ID, n); err != nil {
			return fmt.Errorf("record the name %s of coordinator %s: %w", n, reg.ID, err)
		}
	}
	return nil
}
