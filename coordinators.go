package agentbridge

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Coordinator registrations (contract 7.1): each coordinator tells the
// bridge what it serves (its agents, where it runs, its status URL) and
// keeps the registration live with a heartbeat. The bridge's store keeps
// them, stamped with the database's clock, so that every bridge on one
// database sees the same coordinators, and no machine's clock decides who
// is live.

// Kinds of agent a coordinator serves: an adapter program per run, or an
// Agent Client Protocol agent kept warm.
const (
	AgentKindAdapter = "adapter"
	AgentKindACP     = "acp"
)

// Bounds of a registration, so that a registration row stays small, and
// GET /coordinators, which every coordinator polls, with it (contract
// 8.3).
const (
	MaxCoordinatorAgents = 64
	MaxCoordinatorText   = 256
	// MaxCoordinatorNames bounds the agent names one coordinator id ever
	// registered: a registration that would make more is 429 too_many.
	MaxCoordinatorNames = 256
	// MaxCoordinatorCapacity bounds a registration's capacity, which the
	// cap of its live agent tokens is made of (AgentTokenCap).
	MaxCoordinatorCapacity = 256
	// MaxRegistrationShare bounds what one registration adds to GET
	// /coordinators' answer: its entry, and its agents' lines in "agents"
	// as if it served them alone (RegistrationShare). Ten coordinators
	// then answer in under 64 KiB.
	MaxRegistrationShare = 6 << 10
	// DefaultClaimTTL is how long a registration stays live without a
	// heartbeat when the coordinator names no ttl (claim_ttl_s).
	DefaultClaimTTL = 30 * time.Second
	// MaxClaimTTL bounds a registration's ttl.
	MaxClaimTTL = 24 * time.Hour
)

// CoordinatorAgent is one agent a coordinator serves: its config entry's
// name and client, and whether it is an adapter or an ACP agent. A
// participant is served by the entry its id names, else by the entry whose
// client is its profile's client (the coordinator's ResolveAgent).
type CoordinatorAgent struct {
	Name   string `json:"name"`
	Client string `json:"client,omitempty"`
	Kind   string `json:"kind"`
}

// Registration is the body of PUT /coordinators/{id}: what a coordinator
// serves and how long it stays live without a heartbeat. Instance is a
// random id per process, so that two processes registering under one id
// can be told apart (the second is a duplicate while the first is live).
type Registration struct {
	ID        string             `json:"id"`
	Instance  string             `json:"instance"`
	Host      string             `json:"host"`
	Agents    []CoordinatorAgent `json:"agents"`
	Version   string             `json:"version,omitempty"`
	Capacity  int                `json:"capacity,omitempty"`
	StatusURL string             `json:"status_url,omitempty"`
	// TTLMillis is how long the registration stays live after its last
	// heartbeat (the coordinator's claim_ttl_s); 0 means DefaultClaimTTL.
	TTLMillis int64 `json:"ttl_ms,omitempty"`
	// Workspaces are the names of the workspaces the coordinator has
	// (contract 8.1): a run whose thread picks one is claimed only by a
	// coordinator that has it.
	Workspaces []string `json:"workspaces,omitempty"`
}

// Validate checks reg and fills in its default ttl. Errors are *Error
// values naming the field.
func (reg *Registration) Validate() error {
	if !ParticipantIDPattern.MatchString(reg.ID) {
		return FieldErrorf(ECodeInvalidField, "id", "The coordinator id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(reg.ID, QuoteRunes))
	}
	if reg.Instance == "" {
		return FieldErrorf(ECodeMissingField, "instance", "The field \"instance\" is required: a random id of this coordinator process.")
	}
	if reg.Host == "" {
		return FieldErrorf(ECodeMissingField, "host", "The field \"host\" is required: the name of the machine the coordinator runs on.")
	}
	for _, f := range []struct{ name, v string }{{"instance", reg.Instance}, {"host", reg.Host}, {"version", reg.Version}, {"status_url", reg.StatusURL}} {
		if len(f.v) > MaxCoordinatorText || !utf8.ValidString(f.v) {
			return FieldErrorf(ECodeInvalidField, f.name, "The field %q must be at most %d bytes of UTF-8.", f.name, MaxCoordinatorText)
		}
	}
	if len(reg.Agents) > MaxCoordinatorAgents {
		return FieldErrorf(ECodeInvalidField, "agents", "A coordinator registers at most %d agents, not %d.", MaxCoordinatorAgents, len(reg.Agents))
	}
	for _, a := range reg.Agents {
		if !ParticipantIDPattern.MatchString(a.Name) {
			return FieldErrorf(ECodeInvalidField, "agents", "The agent name %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(a.Name, QuoteRunes))
		}
		if len(a.Client) > MaxCoordinatorText || !utf8.ValidString(a.Client) {
			return FieldErrorf(ECodeInvalidField, "agents", "The client of agent %s must be at most %d bytes of UTF-8.", a.Name, MaxCoordinatorText)
		}
		if a.Kind != AgentKindAdapter && a.Kind != AgentKindACP {
			return FieldErrorf(ECodeInvalidField, "agents", "The kind of agent %s is %q: use %q or %q.", a.Name, Clip(a.Kind, QuoteRunes), AgentKindAdapter, AgentKindACP)
		}
	}
	if len(reg.Workspaces) > MaxCoordinatorAgents {
		return FieldErrorf(ECodeInvalidField, "workspaces", "A coordinator registers at most %d workspaces, not %d.", MaxCoordinatorAgents, len(reg.Workspaces))
	}
	for _, w := range reg.Workspaces {
		if !WorkspaceNamePattern.MatchString(w) {
			return FieldErrorf(ECodeInvalidField, "workspaces", "The workspace name %q is not valid: use 1 to 64 letters, digits or . _ -, starting with a letter or digit.", Clip(w, QuoteRunes))
		}
	}
	if reg.Capacity < 0 || reg.Capacity > MaxCoordinatorCapacity {
		return FieldErrorf(ECodeInvalidField, "capacity", "The capacity must be from 0 to %d.", MaxCoordinatorCapacity)
	}
	switch {
	case reg.TTLMillis < 0 || reg.TTLMillis > MaxClaimTTL.Milliseconds():
		return FieldErrorf(ECodeInvalidField, "ttl_ms", "The ttl must be between 1 ms and %s.", MaxClaimTTL)
	case reg.TTLMillis == 0:
		reg.TTLMillis = DefaultClaimTTL.Milliseconds()
	}
	if n := RegistrationShare(*reg); n > MaxRegistrationShare {
		return FieldErrorf(ECodeInvalidField, "agents", "This registration would take %d bytes of the list of coordinators every coordinator reads, and one may take at most %d: shorten its agents' names and clients, its host, version or status URL.", n, MaxRegistrationShare)
	}
	return nil
}

// RegistrationShare is what reg adds to GET /coordinators' answer at
// most: its entry, with the longest times, age and liveness the bridge
// adds, and one line of "agents" for each of its agents.
func RegistrationShare(reg Registration) int {
	info := CoordinatorInfo{Registration: reg, RegisteredAt: FormatTime(time.Time{}), HeartbeatAt: FormatTime(time.Time{}), AgeMillis: math.MinInt64}
	b, err := json.Marshal(info)
	if err != nil {
		return math.MaxInt
	}
	n := len(b) + 1
	for _, a := range reg.Agents {
		n += len(a.Name) + len(reg.ID) + len(`"":[""],`)
	}
	return n
}

// CoordinatorInfo is a registration as the bridge keeps it: when it was
// first registered (by this instance) and last heard from, both in the
// database's clock, how long ago that was, and whether it is live (heard
// from within its ttl).
type CoordinatorInfo struct {
	Registration
	RegisteredAt string `json:"registered_at"`
	HeartbeatAt  string `json:"heartbeat_at"`
	AgeMillis    int64  `json:"age_ms"`
	Live         bool   `json:"live"`
}

// RegisterResult is the answer to a registration: the stored one and,
// when another live process held the same coordinator id, that one (a
// duplicate the coordinator warns about).
type RegisterResult struct {
	Coordinator CoordinatorInfo  `json:"coordinator"`
	Duplicate   *CoordinatorInfo `json:"duplicate,omitempty"`
}

// CoordinatorsResponse is the answer of GET /coordinators: every
// registration (live or lapsed), by id, and which live coordinators serve
// each agent name.
type CoordinatorsResponse struct {
	Coordinators []CoordinatorInfo   `json:"coordinators"`
	Agents       map[string][]string `json:"agents"`
	// ServedEver, asked for with ?served_ever (and ?client), maps the
	// agent names any registration ever listed that answer for that
	// participant to their clients, so that an invite can tell "never
	// served": {} when none ever did. It is null when not asked for, or
	// when the store keeps no claims (then nobody can tell). Not omitted
	// when empty: an empty answer is the "never".
	ServedEver map[string]string `json:"served_ever"`
}

// CoordinatorStore keeps coordinator registrations. A backend implements
// it next to EventStore; the bridge serves /coordinators only when its
// store does. Implementations are safe for concurrent use.
type CoordinatorStore interface {
	// RegisterCoordinator validates reg and stores it as its id's
	// registration, with the heartbeat at the database's now. It is also
	// the heartbeat: a coordinator registers again every ttl/3. When the
	// id's stored registration is another instance's and still live, the
	// result names it as the duplicate.
	RegisterCoordinator(ctx context.Context, reg Registration) (RegisterResult, error)
	// DeregisterCoordinator removes id's registration if instance holds
	// it (a coordinator that stops says so); otherwise it does nothing.
	DeregisterCoordinator(ctx context.Context, id, instance string) error
	// Coordinators lists every registration by id, with its age and
	// liveness as of the database's now.
	Coordinators(ctx context.Context) ([]CoordinatorInfo, error)
}

// ReservedAgentNames may never be a coordinator's agent (contract 8.3):
// "all" is the address of everyone, "user" the default person, "bridge"
// the sender of the bridge's own notices, "coordinator" the tag of the
// coordinators'.
var ReservedAgentNames = []string{ToAll, "user", ClaimSender, "coordinator"}

// ReservedAgentName reports whether name is one of ReservedAgentNames,
// case aside (a mention is case-insensitive).
func ReservedAgentName(name string) bool {
	for _, r := range ReservedAgentNames {
		if strings.EqualFold(r, name) {
			return true
		}
	}
	return false
}

// ServedEverFor is the part of served (every agent name ever registered,
// with its client) that says whether participant, whose invited client is
// client, was ever served: the entries of its name or its client.
func ServedEverFor(served map[string]string, participant, client string) map[string]string {
	out := map[string]string{}
	for name, c := range served {
		if name == participant || (client != "" && c == client) {
			out[name] = c
		}
	}
	return out
}

// ServesParticipant reports whether an agent of agents serves participant,
// whose invited profile's client is client: the agent named by its id,
// else one whose client matches (case-insensitive), as the coordinator
// resolves its agent entries.
func ServesParticipant(agents []CoordinatorAgent, participant, client string) bool {
	for _, a := range agents {
		if a.Name == participant || (client != "" && a.Client != "" && strings.EqualFold(a.Client, client)) {
			return true
		}
	}
	return false
}

// ServingCoordinators returns the live coordinators among list that serve
// participant (see ServesParticipant), ordered by id.
func ServingCoordinators(list []CoordinatorInfo, participant, client string) []CoordinatorInfo {
	var out []CoordinatorInfo
	for _, c := range list {
		if c.Live && ServesParticipant(c.Agents, participant, client) {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AgentsServed maps each agent name of the live coordinators of list to
// the ids of the coordinators serving it, sorted.
func AgentsServed(list []CoordinatorInfo) map[string][]string {
	out := map[string][]string{}
	for _, c := range list {
		if !c.Live {
			continue
		}
		for _, a := range c.Agents {
			out[a.Name] = append(out[a.Name], c.ID)
		}
	}
	for _, ids := range out {
		sort.Strings(ids)
	}
	return out
}
