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

// nowMillis is SQLite's clock in milliseconds since the epoch: the
// database's time, which is the bridge machine's for a file.
const nowMillis = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`

// Coordinator statements.
const (
	cSelectOne = `SELECT ` + storecore.CoordinatorColumns + `, ` + nowMillis + ` FROM coordinators WHERE id = ?`
	cSelectAll = `SELECT ` + storecore.CoordinatorColumns + `, ` + nowMillis + ` FROM coordinators ORDER BY id`
	cUpsert    = `INSERT INTO coordinators (` + storecore.CoordinatorColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ` + nowMillis + `, ` + nowMillis + `, ?)
		ON CONFLICT (id) DO UPDATE SET
			registered_ms = CASE WHEN coordinators.instance = excluded.instance
				THEN coordinators.registered_ms ELSE excluded.registered_ms END,
			instance = excluded.instance, host = excluded.host, agents = excluded.agents,
			version = excluded.version, capacity = excluded.capacity, status_url = excluded.status_url,
			ttl_ms = excluded.ttl_ms, heartbeat_ms = excluded.heartbeat_ms, workspaces = excluded.workspaces`
	cDelete = `DELETE FROM coordinators WHERE id = ? AND instance = ?`
)

// RegisterCoordinator stores reg through the writer, with the heartbeat at
// SQLite's now, and names the live registration of another instance it
// replaced.
func (s *Store) RegisterCoordinator(ctx context.Context, reg agentbridge.Registration) (_ agentbridge.RegisterResult, err error) {
	defer s.guard(time.Now(), &err)
	if err := reg.Validate(); err != nil {
		return agentbridge.RegisterResult{}, err
	}
	agents, err := storecore.EncodeAgents(reg)
	if err != nil {
		return agentbridge.RegisterResult{}, err
	}
	r := s.newRequest(ctx)
	r.other = func(ctx context.Context, conn *sql.Conn) (response, error) {
		var prev *agentbridge.CoordinatorInfo
		if p, err := storecore.ScanCoordinator(conn.QueryRowContext(ctx, cSelectOne, reg.ID)); err == nil {
			prev = &p
		} else if !errors.Is(err, sql.ErrNoRows) {
			return response{}, fmt.Errorf("load coordinator %s: %w", reg.ID, err)
		}
		if refusal, err := recordNames(ctx, conn, reg); err != nil || refusal != nil {
			return response{err: refusal}, err
		}
		if _, err := conn.ExecContext(ctx, cUpsert, reg.ID, reg.Instance, reg.Host, agents, reg.Version,
			reg.Capacity, reg.StatusURL, reg.TTLMillis, storecore.EncodeWorkspaces(reg)); err != nil {
			return response{}, fmt.Errorf("store coordinator %s: %w", reg.ID, err)
		}
		if err := recordServed(ctx, conn, reg); err != nil {
			return response{}, err
		}
		c, err := storecore.ScanCoordinator(conn.QueryRowContext(ctx, cSelectOne, reg.ID))
		if err != nil {
			return response{}, fmt.Errorf("reload coordinator %s: %w", reg.ID, err)
		}
		return response{value: agentbridge.RegisterResult{Coordinator: c, Duplicate: storecore.Duplicate(prev, reg)}}, nil
	}
	resp := s.submit(ctx, r)
	if resp.err != nil {
		return agentbridge.RegisterResult{}, resp.err
	}
	return resp.value.(agentbridge.RegisterResult), nil
}

// DeregisterCoordinator removes id's registration through the writer when
// instance holds it.
func (s *Store) DeregisterCoordinator(ctx context.Context, id, instance string) (err error) {
	defer s.guard(time.Now(), &err)
	r := s.newRequest(ctx)
	r.other = func(ctx context.Context, conn *sql.Conn) (response, error) {
		if _, err := conn.ExecContext(ctx, cDelete, id, instance); err != nil {
			return response{}, fmt.Errorf("remove coordinator %s: %w", id, err)
		}
		return response{}, nil
	}
	return s.submit(ctx, r).err
}

// Coordinators reads every registration from the read pool.
func (s *Store) Coordinators(ctx context.Context) (_ []agentbridge.CoordinatorInfo, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.rdb.QueryContext(ctx, cSelectAll)
	if err != nil {
		return nil, fmt.Errorf("list coordinators: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "coordinators", storecore.ScanCoordinator)
}

// recordNames adds reg's new agent names to the names its coordinator id
// ever registered, on the writer's connection, or refuses past the cap
// (storecore.NewNames) before anything is written.
func recordNames(ctx context.Context, conn *sql.Conn, reg agentbridge.Registration) (refusal, err error) {
	rows, err := conn.QueryContext(ctx, `SELECT name FROM coordinator_names WHERE coordinator = ?`, reg.ID)
	if err != nil {
		return nil, fmt.Errorf("list the names of coordinator %s: %w", reg.ID, err)
	}
	known, err := storecore.Collect(rows, "names", storecore.ScanString)
	rows.Close()
	if err != nil {
		return nil, err
	}
	names, refusal := storecore.NewNames(reg, known)
	if refusal != nil {
		return refusal, nil
	}
	for _, n := range names {
		if _, err := conn.ExecContext(ctx, `INSERT OR IGNORE INTO coordinator_names (coordinator, name) VALUES (?, ?)`, reg.ID, n); err != nil {
			return nil, fmt.Errorf("record the name %s of coordinator %s: %w", n, reg.ID, err)
		}
	}
	return nil, nil
}
