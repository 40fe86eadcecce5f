package storecore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// CoordinatorColumns are the columns ScanCoordinator reads, in order,
// followed by the database's now in milliseconds since the epoch (each
// store's own expression), so that age and liveness are the database's
// clock's, not the bridge process's.
const CoordinatorColumns = `id, instance, host, agents, version, capacity, status_url, ttl_ms, registered_ms, heartbeat_ms, workspaces`

// ScanCoordinator scans a CoordinatorColumns row followed by the
// database's now (ms since the epoch).
func ScanCoordinator(r Row) (agentbridge.CoordinatorInfo, error) {
	var c agentbridge.CoordinatorInfo
	var agents, workspaces []byte
	var registered, heartbeat, now int64
	if err := r.Scan(&c.ID, &c.Instance, &c.Host, &agents, &c.Version, &c.Capacity, &c.StatusURL,
		&c.TTLMillis, &registered, &heartbeat, &workspaces, &now); err != nil {
		return c, err
	}
	if err := json.Unmarshal(agents, &c.Agents); err != nil {
		return c, fmt.Errorf("decode the agents of coordinator %s: %w", c.ID, err)
	}
	if err := json.Unmarshal(workspaces, &c.Workspaces); err != nil {
		return c, fmt.Errorf("decode the workspaces of coordinator %s: %w", c.ID, err)
	}
	if len(c.Workspaces) == 0 {
		c.Workspaces = nil
	}
	CoordinatorTimes(&c, registered, heartbeat, now)
	return c, nil
}

// CoordinatorTimes fills c's times, age and liveness from the stored
// milliseconds and the database's now.
func CoordinatorTimes(c *agentbridge.CoordinatorInfo, registered, heartbeat, now int64) {
	c.RegisteredAt = agentbridge.FormatTime(time.UnixMilli(registered))
	c.HeartbeatAt = agentbridge.FormatTime(time.UnixMilli(heartbeat))
	c.AgeMillis = max(now-heartbeat, 0)
	c.Live = c.AgeMillis < c.TTLMillis
}

// EncodeAgents is a registration's agents in their stored form (JSON).
func EncodeAgents(reg agentbridge.Registration) (string, error) {
	agents := reg.Agents
	if agents == nil {
		agents = []agentbridge.CoordinatorAgent{}
	}
	b, err := json.Marshal(agents)
	if err != nil {
		return "", fmt.Errorf("encode the agents of coordinator %s: %w", reg.ID, err)
	}
	return string(b), nil
}

// EncodeWorkspaces is a registration's workspace names in their stored
// form (a JSON array).
func EncodeWorkspaces(reg agentbridge.Registration) string {
	b, _ := json.Marshal(append([]string{}, reg.Workspaces...)) // strings always encode
	return string(b)
}

// Duplicate is the registration that prev was, when it was another
// instance's and live as of the new heartbeat: the coordinator warns about
// a second process under its id.
func Duplicate(prev *agentbridge.CoordinatorInfo, reg agentbridge.Registration) *agentbridge.CoordinatorInfo {
	if prev == nil || !prev.Live || prev.Instance == reg.Instance {
		return nil
	}
	return prev
}

// NewNames returns the agent names of reg that known, the names its
// coordinator id registered before, lacks; refusal is 429 too_many when
// with them the id would have registered more than
// agentbridge.MaxCoordinatorNames (contract 8.3): nothing is stored then.
func NewNames(reg agentbridge.Registration, known []string) (names []string, refusal error) {
	have := make(map[string]bool, len(known))
	for _, n := range known {
		have[n] = true
	}
	for _, a := range reg.Agents {
		if !have[a.Name] {
			have[a.Name] = true
			names = append(names, a.Name)
		}
	}
	if len(have) > agentbridge.MaxCoordinatorNames {
		return nil, agentbridge.Errorf(agentbridge.ECodeTooMany,
			"Coordinator %q has registered %d agent names, and this registration would add %d more: one coordinator registers at most %d names ever. Register the agents it served before, or use another coordinator id.",
			reg.ID, len(known), len(names), agentbridge.MaxCoordinatorNames)
	}
	return names, nil
}

var _ agentbridge.CoordinatorStore = (*Engine)(nil)

// coordinatorsSelect reads registrations and the database's now.
func (e *Engine) coordinatorsSelect() string {
	return `SELECT ` + CoordinatorColumns + `, ` + e.NowMillis + ` FROM coordinators`
}

// RegisterCoordinator stores reg in one write that locks the id's row,
// with the heartbeat at the database's now, and names the live
// registration of another instance it replaced.
func (e *Engine) RegisterCoordinator(ctx context.Context, reg agentbridge.Registration) (_ agentbridge.RegisterResult, err error) {
	defer e.Guard(time.Now(), &err)
	if err := reg.Validate(); err != nil {
		return agentbridge.RegisterResult{}, err
	}
	agents, err := EncodeAgents(reg)
	if err != nil {
		return agentbridge.RegisterResult{}, err
	}
	var out agentbridge.RegisterResult
	err = e.Write(ctx, func(ctx context.Context, c Conn) error {
		var prev *agentbridge.CoordinatorInfo
		p, err := ScanCoordinator(c.QueryRow(ctx, e.coordinatorsSelect()+` WHERE id = ?`+e.ForUpdate, reg.ID))
		if found, err := Found(err); err != nil {
			return fmt.Errorf("load coordinator %s: %w", reg.ID, err)
		} else if found {
			prev = &p
		}
		if err := e.recordNames(ctx, c, reg); err != nil {
			return err
		}
		now := e.NowMillis
		co, err := ScanCoordinator(c.QueryRow(ctx, `INSERT INTO coordinators (`+CoordinatorColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, `+now+`, `+now+`, ?)
		ON CONFLICT (id) DO UPDATE SET
			registered_ms = CASE WHEN coordinators.instance = excluded.instance
				THEN coordinators.registered_ms ELSE excluded.registered_ms END,
			instance = excluded.instance, host = excluded.host, agents = excluded.agents,
			version = excluded.version, capacity = excluded.capacity, status_url = excluded.status_url,
			ttl_ms = excluded.ttl_ms, heartbeat_ms = excluded.heartbeat_ms, workspaces = excluded.workspaces
		RETURNING `+CoordinatorColumns+`, `+now, reg.ID, reg.Instance, reg.Host, agents,
			reg.Version, reg.Capacity, reg.StatusURL, reg.TTLMillis, EncodeWorkspaces(reg)))
		if err != nil {
			return fmt.Errorf("store coordinator %s: %w", reg.ID, err)
		}
		for _, a := range reg.Agents {
			if _, err := c.Exec(ctx, `INSERT INTO served_agents (name, client) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET client = excluded.client`, a.Name, a.Client); err != nil {
				return fmt.Errorf("record served agent %s: %w", a.Name, err)
			}
		}
		out = agentbridge.RegisterResult{Coordinator: co, Duplicate: Duplicate(prev, reg)}
		return nil
	})
	return out, err
}

// recordNames adds reg's new agent names to the names its coordinator id
// ever registered, or refuses past the cap (NewNames) before anything is
// written.
func (e *Engine) recordNames(ctx context.Context, c Conn, reg agentbridge.Registration) error {
	known, err := List(ctx, c, "names", ScanString, `SELECT name FROM coordinator_names WHERE coordinator = ?`, reg.ID)
	if err != nil {
		return fmt.Errorf("list the names of coordinator %s: %w", reg.ID, err)
	}
	names, refusal := NewNames(reg, known)
	if refusal != nil {
		return refusal
	}
	for _, n := range names {
		if _, err := c.Exec(ctx, `INSERT INTO coordinator_names (coordinator, name) VALUES (?, ?) ON CONFLICT DO NOTHING`, reg.ID, n); err != nil {
			return fmt.Errorf("record the name %s of coordinator %s: %w", n, reg.ID, err)
		}
	}
	return nil
}

// DeregisterCoordinator removes id's registration when instance holds it.
func (e *Engine) DeregisterCoordinator(ctx context.Context, id, instance string) (err error) {
	defer e.Guard(time.Now(), &err)
	return e.Write(ctx, func(ctx context.Context, c Conn) error {
		if _, err := c.Exec(ctx, `DELETE FROM coordinators WHERE id = ? AND instance = ?`, id, instance); err != nil {
			return fmt.Errorf("remove coordinator %s: %w", id, err)
		}
		return nil
	})
}

// Coordinators reads every registration.
func (e *Engine) Coordinators(ctx context.Context) (_ []agentbridge.CoordinatorInfo, err error) {
	defer e.Guard(time.Now(), &err)
	return e.Registrations(ctx, e.Read)
}

// Registrations reads every registration on c.
func (e *Engine) Registrations(ctx context.Context, c Conn) ([]agentbridge.CoordinatorInfo, error) {
	return List(ctx, c, "coordinators", ScanCoordinator, e.coordinatorsSelect()+` ORDER BY id`)
}

// ServedEver reads every agent name a registration ever listed.
func (e *Engine) ServedEver(ctx context.Context) (_ map[string]string, err error) {
	defer e.Guard(time.Now(), &err)
	rows, err := e.Read.Query(ctx, `SELECT name, client FROM served_agents ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list served agents: %w", err)
	}
	defer rows.Close()
	return CollectServed(rows)
}
