package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// Host is what the ACP client needs of the coordinator that runs it: the
// ledger's running mark, the agents' own bridge tokens, the roster's
// presence and the thread, for permission requests. The client keeps no
// reference to the coordinator beyond it, so that it runs (and is tested)
// on its own.
type Host interface {
	// MarkRunning records that inv's turn runs on process pid (its own
	// process group) since started; a failure is the host's to log.
	MarkRunning(ctx context.Context, inv Invocation, pid int, started time.Time)
	// Token starts making the bridge token of a warm agent of
	// (thread, participant), for the agent's whole life, and returns at
	// once.
	Token(ctx context.Context, thread, participant string) Token
	// Presence is thread's presence by participant id, for the roster of
	// a warm session's prompt (best effort: nil when it cannot be read).
	Presence(ctx context.Context, thread string) map[string]string
	// Recipient names whom a permission request of a turn answering
	// trigger goes to: the human who started its chain (known holds the
	// events already read), the first human when the chain cannot be
	// read.
	Recipient(ctx context.Context, thread string, trigger agentbridge.Event, known []agentbridge.Event) string
	// Post appends in to inv's thread once, under the idempotency key of
	// (trigger, kind), retrying transient failures until ctx ends.
	Post(ctx context.Context, inv Invocation, in agentbridge.EventInput, trigger, kind string) (agentbridge.Event, error)
}

// Token is a warm agent's own bridge token, which the agent keeps for its
// whole life (its environment cannot be changed while it runs).
type Token interface {
	// Value is what the agent gets as BRIDGE_TOKEN, once the token is
	// made: its secret, or the placeholder for none.
	Value() string
	// LastsTurn reports whether the token stays valid for a turn started
	// now; a warm agent whose token would not is restarted.
	LastsTurn() bool
	// Revoke revokes the token in the background, once the agent is gone.
	Revoke()
}

// Options configure a Pool.
type Options struct {
	// Host is the coordinator the client serves.
	Host Host
	// Config returns the configuration in effect (it may be reloaded).
	Config func() *config.Config
	// Dir holds the per-thread session folders of agents without
	// workdir; "" means agent-bridge/acp in the user's cache folder.
	Dir string
	// Executable is the agent-bridge binary, for the agents' MCP server
	// and their AGENT_BRIDGE_BIN.
	Executable string
	// Logger gets the pool's log lines; nil means slog.Default().
	Logger *slog.Logger
	// Registerer gets the pool's gauges; nil registers none.
	Registerer prometheus.Registerer
}

// Invocation names the run a turn belongs to. It is the client's own
// type, converted from the coordinator's ledger row at the edge, so that
// the client depends on no row of the coordinator's.
type Invocation struct {
	// ID is the run's number: the key of what the host records of it and
	// of a permission request's meta.permission.invocation.
	ID int64
	// Thread and Participant name the pair whose warm agent runs the
	// turn; TriggerID is the event the turn answers.
	Thread, Participant, TriggerID string
}

// Run is one turn to run on a pair's warm agent.
type Run struct {
	// Invocation is the run's identity: its id, thread, participant and
	// trigger.
	Invocation Invocation
	// Entry is the agent entry of the config that the participant runs.
	Entry config.Agent
	// Payload is the adapter payload the turn's prompt is rendered from.
	Payload adapters.Payload
	// Trigger is the event answered, and Known the events already read
	// (the context window): where a permission request's recipient is
	// looked for.
	Trigger agentbridge.Event
	Known   []agentbridge.Event
	// Scene is set for a scene actor's step, whose private thinking
	// arrives as thought chunks and is kept in <thinking>.
	Scene bool
	// Progress gets the turn's progress records; nil drops them.
	Progress func(adapters.ProgressRecord)
}

// maxStatusChars bounds a progress status, as the coordinator bounds the
// statuses it shows as presence details.
const maxStatusChars = 200

// jsonOf encodes v, whose types always encode.
func jsonOf(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err))
	}
	return b
}
