package storecore

import (
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
