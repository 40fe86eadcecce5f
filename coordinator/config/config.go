// Package config is the coordinator's config file: its keys and their
// types, the validation that names a wrong key in one line, the defaults
// for every key a file leaves out, and the watcher that reloads it on an
// edit (docs/coordinator.md).
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Agent is one entry of the config's "agents" object: how to start
// the adapter that speaks for a participant.
type Agent struct {
	// Command is the adapter's argv, run without a shell. Command[0] is
	// resolved against the config file's folder when it contains a slash,
	// so "./adapters/echo.sh" works whatever the daemon's working directory.
	Command []string
	// Cwd is the adapter's working directory, resolved against the config
	// folder; it defaults to the config folder itself.
	Cwd string
	// Env is merged over the coordinator's environment.
	Env map[string]string
	// Profile is an optional default profile (presence details, docs); the
	// rules resolve mentions against the profile each thread's invite gives.
	Profile *agentbridge.Profile
	// Client lets one entry serve any invited participant whose
	// profile.client matches it, so one configured claude adapter serves
	// every invited claude participant, each with its own model and roles.
	Client string
	// ACP, when set, names an Agent Client Protocol agent's argv instead
	// of an adapter (contract 6.6, docs/acp.md); Command is then empty.
	ACP []string
	// Workdir is an ACP agent's session folder; empty means a per-thread
	// folder under the coordinator's state folder.
	Workdir string
	// Permissions is how an ACP agent's permission requests are answered:
	// PermissionsAsk (the default), PermissionsAllow or PermissionsDeny.
	Permissions string
	// ACPFS offers the agent the client's fs capability, restricted to
	// its session folder.
	ACPFS bool
	// Fallback names, in order, the agents a trigger goes to when this
	// one's run fails for its quota, its credential or an unreachable
	// service (contract 8.5, docs/failures.md): the first of them that a
	// live coordinator serves answers instead.
	Fallback []string
	// Workspace names the entry of the config's workspaces the agent
	// works in by default (contract 8.1); an invite's profile or a
	// person's thread control may pick another.
	Workspace string
}

// Workspace is one entry of the config's "workspaces": a git work tree on
// this machine and the branch new work starts from.
type Workspace struct {
	// Repo is the repository's work tree (its top level), absolute.
	Repo string
	// Base is the branch each agent's worktree starts from; "" means the
	// repo's current branch when the worktree is made.
	Base string
}

// Argv is the program the entry runs: its ACP agent or its adapter.
func (a Agent) Argv() []string {
	if len(a.ACP) > 0 {
		return a.ACP
	}
	return a.Command
}

// Answers to an ACP agent's permission requests (agent key "permissions").
const (
	PermissionsAsk   = "ask"
	PermissionsAllow = "allow"
	PermissionsDeny  = "deny"
)

// Config is the coordinator's configuration, as read from
// coordinator.config.json. A Config is a value: the watcher builds a new
// one on every valid edit and the daemon swaps it in whole.
type Config struct {
	// BridgeURL is the bridge server to follow and post to.
	BridgeURL string `config:"bridge_url"`
	// CoordinatorID is the participant id the coordinator posts its own
	// notices as; its own events never trigger anything.
	CoordinatorID string `config:"coordinator_id"`
	// StartupMode is "end" (skip what was posted while down) or "resume".
	StartupMode string `config:"startup_mode"`
	// MaxReplyChars caps a reply, including the [truncated] marker.
	MaxReplyChars int `config:"max_reply_chars"`
	// ContextWindowSize is how many recent events an adapter receives.
	ContextWindowSize int `config:"context_window_size"`
	// AdapterTimeout bounds one adapter run.
	AdapterTimeout time.Duration `config:"adapter_timeout_s"`
	// EnableMentions turns mention routing on for to=all messages.
	EnableMentions bool `config:"enable_mentions"`
	// MentionPrefix introduces a mention ("@").
	MentionPrefix string `config:"mention_prefix"`
	// MentionSenders may always wake participants by mention.
	MentionSenders []string `config:"mention_senders"`
	// EnableBroadcast lets BroadcastSenders wake BroadcastAgents with a
	// to=all message that mentions nobody.
	EnableBroadcast  bool     `config:"enable_broadcast"`
	BroadcastSenders []string `config:"broadcast_senders"`
	BroadcastAgents  []string `config:"broadcast_agents"`
	// PresenceHeartbeat is how often presence is refreshed (0 = never).
	PresenceHeartbeat time.Duration `config:"presence_heartbeat_s"`
	// Agents maps entry names to adapters.
	Agents map[string]Agent `config:"agents"`
	// HumanIDs are the participants whose controls count; it must match
	// the server's --humans.
	HumanIDs agentbridge.Humans `config:"human_ids"`
	// MaxConcurrency caps adapters running at once.
	MaxConcurrency int `config:"max_concurrency"`
	// MaxAgentHops is the loop guard: a trigger whose hop count has
	// reached it invokes nobody.
	MaxAgentHops int `config:"max_agent_hops"`
	// MaxInvocationsPerMinute is a per-thread rate; the excess waits.
	MaxInvocationsPerMinute int `config:"max_invocations_per_minute"`
	// PrimerPath is the primer file given to adapters, resolved against
	// the config folder.
	PrimerPath string `config:"primer_path"`
	// ScenePrimerPath is the actor system prompt given to actors in a
	// scene instead of the primer (config key scene_primer_path), resolved
	// like PrimerPath.
	ScenePrimerPath string `config:"scene_primer_path"`
	// StatusAddr is where the status API listens ("" = off).
	StatusAddr string `config:"status_addr"`
	// StatusAllowedHosts are extra Host names (no port) the status API
	// answers to besides loopback.
	StatusAllowedHosts []string `config:"status_allowed_hosts"`
	// BridgeToken is sent as a bearer token to the bridge.
	BridgeToken string `config:"bridge_token"`
	// ShutdownGrace is how long running adapters may finish on shutdown.
	ShutdownGrace time.Duration `config:"shutdown_grace_s"`
	// ACPIdle closes a warm ACP agent unused for this long.
	ACPIdle time.Duration `config:"acp_idle_s"`
	// ACPMaxWarm caps the warm ACP agents; the least recently used idle
	// one is closed first.
	ACPMaxWarm int `config:"acp_max_warm"`
	// PermissionTimeout is how long a permission request waits for a
	// person's answer before it is refused.
	PermissionTimeout time.Duration `config:"permission_timeout_s"`
	// ClaimTTL is how long the bridge counts the coordinator live after
	// its last heartbeat (contract 7.1); it heartbeats every third of it.
	ClaimTTL time.Duration `config:"claim_ttl_s"`
	// PendingTTL is how long a trigger for a participant no live
	// coordinator serves waits at the bridge for one (a waiting claim,
	// contract 7.1) before the bridge answers it with an error notice.
	PendingTTL time.Duration `config:"pending_ttl_s"`
	// RunRetryAttempts and RunRetryWindow are a run's retry budget
	// (contract 8.3): a run whose context cannot be read (an answer that
	// does not decode, a trigger or party round that is not there) fails
	// with one error notice after that many failed attempts, or once its
	// attempts have failed for that long, and its participant's queue in
	// its thread moves on.
	RunRetryAttempts int           `config:"run_retry_attempts"`
	RunRetryWindow   time.Duration `config:"run_retry_window_s"`
	// Host is the machine name the coordinator registers with the bridge,
	// shown as "agent @ host"; empty means the machine's host name.
	Host string `config:"host"`
	// Workspaces are the named git working copies agents may work in
	// (contract 8.1, docs/workspaces.md).
	Workspaces map[string]Workspace `config:"workspaces"`
	// Path is the file the config was loaded from ("" when parsed from a
	// reader).
	Path string
}

// Error is a configuration mistake: a wrong type, an invalid value or
// a missing required key. The command maps it to exit code 2 and prints the
// one line its Error method returns.
type Error struct {
	// Key is the dotted path of the offending key ("agents.codex.command");
	// empty when the file as a whole is at fault (unreadable, not JSON).
	Key string
	// Err says what is wrong.
	Err error
}

// Error returns "config: <key>: <what is wrong>", or for an unknown key
// "config: unknown key "<key>"; did you mean "<nearest>"?", which names
// the key itself.
func (e *Error) Error() string {
	var uk *unknownKeyError
	if e.Key == "" || errors.As(e.Err, &uk) {
		return "config: " + e.Err.Error()
	}
	return "config: " + e.Key + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ConfigKey returns the offending key; main uses this method to recognise
// configuration errors without importing this package.
func (e *Error) ConfigKey() string { return e.Key }

// unknownKeyError is a key the config does not know, with the known key
// nearest to it (by edit distance), if one is near enough to be the
// one meant.
type unknownKeyError struct {
	key, nearest string
	known        []string
}

func (u *unknownKeyError) Error() string {
	if u.nearest != "" {
		return fmt.Sprintf("unknown key %q; did you mean %q?", u.key, u.nearest)
	}
	return fmt.Sprintf("unknown key %q; the keys here are %s", u.key, strings.Join(u.known, ", "))
}

// unknownKey is the *Error for key (a dotted path ending in name)
// among the known keys of its object.
func unknownKey(prefix, name string, known []string) *Error {
	u := &unknownKeyError{key: prefix + name, known: known}
	best := -1
	for _, k := range known {
		d := editDistance(name, k)
		// A key is "near" when at most a third of it differs (at least
		// two edits allowed): max_concurency, bridge_urll, comand.
		if d <= max(2, len(k)/3) && (best < 0 || d < best) {
			best, u.nearest = d, prefix+k
		}
	}
	return &Error{Key: prefix + name, Err: u}
}

// editDistance is the Levenshtein distance between a and b, by bytes
// (config keys are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func configErrorf(key, format string, args ...any) *Error {
	return &Error{Key: key, Err: fmt.Errorf(format, args...)}
}

// DefaultMentionPrefix is used when a config leaves mention_prefix empty,
// as the original coordinator did.
const DefaultMentionPrefix = "@"

// SelfCommand, as an agent's command[0], stands for the running
// agent-bridge binary itself, wherever it is installed and whatever the
// PATH: "agent-bridge adapter echo" runs the built-in echo agent.
const SelfCommand = "agent-bridge"

// defaultAgents is the built-in echo agent, so that a first run anywhere
// (agent-bridge up without a config file) gets an answer. A config file
// names its agents itself.
func defaultAgents() map[string]Agent {
	return map[string]Agent{
		"echo": {Command: []string{SelfCommand, "adapter", "echo"}, Client: "echo",
			Profile: &agentbridge.Profile{Client: "echo", Model: "echo"}},
	}
}

// Default returns the configuration used for every key a file leaves
// out: the original coordinator's defaults plus the contract's new keys.
func Default() Config {
	return Config{
		BridgeURL:               agentbridge.DefaultBridgeURL,
		CoordinatorID:           "bridge-coordinator",
		StartupMode:             "end",
		MaxReplyChars:           8000,
		ContextWindowSize:       25,
		AdapterTimeout:          600 * time.Second,
		EnableMentions:          true,
		MentionPrefix:           DefaultMentionPrefix,
		MentionSenders:          []string{"user"},
		EnableBroadcast:         false,
		BroadcastSenders:        []string{"user"},
		BroadcastAgents:         []string{},
		PresenceHeartbeat:       10 * time.Second,
		Agents:                  defaultAgents(),
		HumanIDs:                agentbridge.Humans{"user"},
		MaxConcurrency:          8,
		MaxAgentHops:            6,
		MaxInvocationsPerMinute: 30,
		PrimerPath:              "docs/bridge-agent-primer.md",
		ScenePrimerPath:         "docs/scene-actor-primer.md",
		StatusAddr:              agentbridge.DefaultStatusAddr,
		ShutdownGrace:           10 * time.Second,
		ACPIdle:                 600 * time.Second,
		ACPMaxWarm:              8,
		PermissionTimeout:       3600 * time.Second,
		ClaimTTL:                agentbridge.DefaultClaimTTL,
		PendingTTL:              agentbridge.DefaultPendingTTL,
		RunRetryAttempts:        5,
		RunRetryWindow:          2 * time.Minute,
	}
}

// minReplyChars leaves room for some reply text next to the
// "[truncated]" marker.
const minReplyChars = 64

// MaxReplyCharsLimit bounds max_reply_chars so that a reply of that many
// characters always fits the bridge's default body limit (1 MiB): JSON
// encodes a character in at most 6 bytes (\u003c for "<"), and 160,000 of
// those leave 88 KB for the rest of the event. A larger cap could only
// produce replies the bridge refuses (contract 6.3).
const MaxReplyCharsLimit = 160_000

// Load reads and parses the config file at path, resolving relative
// paths against the file's folder. A file that cannot be read is a
// *Error too, so that the command exits 2 naming it.
func Load(path string) (Config, []string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Config{}, nil, &Error{Err: fmt.Errorf("resolve %s: %w", path, err)}
	}
	f, err := os.Open(abs)
	if err != nil {
		return Config{}, nil, &Error{Err: fmt.Errorf("open config file: %w", err)}
	}
	defer f.Close()
	cfg, warnings, err := Parse(f, filepath.Dir(abs))
	if err != nil {
		return Config{}, warnings, err
	}
	if err := CheckWorkspaces(&cfg); err != nil {
		return Config{}, warnings, err
	}
	cfg.Path = abs
	return cfg, warnings, nil
}

// Parse parses a config file's content. It does no I/O beyond reading
// r: relative paths are resolved against baseDir (left alone when baseDir is
// empty). Every error is a *Error naming the key. An unknown key is
// an error too, naming the nearest known key (contract 6.4): a misspelt
// key would otherwise leave its setting at the default without a word.
func Parse(r io.Reader, baseDir string) (Config, []string, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, nil, &Error{Err: fmt.Errorf("read config: %w", err)}
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return Config{}, nil, &Error{Err: fmt.Errorf("the file is not a JSON object: %s", jsonError(data, err))}
	}
	if raw == nil {
		return Config{}, nil, &Error{Err: errors.New("the file must hold a JSON object, not null")}
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, nil, &Error{Err: errors.New("the file holds more than one JSON value")}
	}
	var f fileConfig
	_, f.agentsPresent = raw["agents"]
	if err := decodeObject(raw, "", &f, legacyKeys...); err != nil {
		return Config{}, nil, err
	}
	return f.Validate(baseDir)
}

// legacyKeys are keys of the original coordinator's config that mean
// nothing here (poll_threads_s: this coordinator streams instead of
// polling). They are skipped without a warning, so that its configs load
// quietly.
var legacyKeys = []string{"poll_threads_s"}

// fileConfig is the config file as data: every top-level key, by its JSON
// name, with the JSON type it must have. A nil field is a key left out or
// null, which keeps its default. Validate checks the values and turns
// them into a Config.
type fileConfig struct {
	BridgeURL               *string                     `json:"bridge_url"`
	CoordinatorID           *string                     `json:"coordinator_id"`
	StartupMode             *string                     `json:"startup_mode"`
	MaxReplyChars           *float64                    `json:"max_reply_chars"`
	ContextWindowSize       *float64                    `json:"context_window_size"`
	AdapterTimeoutS         *float64                    `json:"adapter_timeout_s"`
	EnableMentions          *bool                       `json:"enable_mentions"`
	MentionPrefix           *string                     `json:"mention_prefix"`
	MentionSenders          *[]string                   `json:"mention_senders"`
	EnableBroadcast         *bool                       `json:"enable_broadcast"`
	BroadcastSenders        *[]string                   `json:"broadcast_senders"`
	BroadcastAgents         *[]string                   `json:"broadcast_agents"`
	PresenceHeartbeatS      *float64                    `json:"presence_heartbeat_s"`
	HumanIDs                *[]string                   `json:"human_ids"`
	MaxConcurrency          *float64                    `json:"max_concurrency"`
	MaxAgentHops            *float64                    `json:"max_agent_hops"`
	MaxInvocationsPerMinute *float64                    `json:"max_invocations_per_minute"`
	PrimerPath              *string                     `json:"primer_path"`
	ScenePrimerPath         *string                     `json:"scene_primer_path"`
	StatusAddr              *string                     `json:"status_addr"`
	StatusAllowedHosts      *[]string                   `json:"status_allowed_hosts"`
	BridgeToken             *string                     `json:"bridge_token"`
	ShutdownGraceS          *float64                    `json:"shutdown_grace_s"`
	ACPIdleS                *float64                    `json:"acp_idle_s"`
	ACPMaxWarm              *float64                    `json:"acp_max_warm"`
	PermissionTimeoutS      *float64                    `json:"permission_timeout_s"`
	ClaimTTLS               *float64                    `json:"claim_ttl_s"`
	PendingTTLS             *float64                    `json:"pending_ttl_s"`
	RunRetryAttempts        *float64                    `json:"run_retry_attempts"`
	RunRetryWindowS         *float64                    `json:"run_retry_window_s"`
	Host                    *string                     `json:"host"`
	Agents                  *map[string]json.RawMessage `json:"agents"`
	Workspaces              *map[string]json.RawMessage `json:"workspaces"`
	// agentsPresent tells a missing "agents" (required) from a null one.
	agentsPresent bool
}

// agentFile is one entry of "agents" as data.
type agentFile struct {
	Command     *[]string                   `json:"command"`
	Cwd         *string                     `json:"cwd"`
	Env         *map[string]string          `json:"env"`
	Client      *string                     `json:"client"`
	Profile     *map[string]json.RawMessage `json:"profile"`
	ACP         *[]string                   `json:"acp"`
	Workdir     *string                     `json:"workdir"`
	Permissions *string                     `json:"permissions"`
	ACPFS       *bool                       `json:"acp_fs"`
	Fallback    *[]string                   `json:"fallback"`
	Workspace   *string                     `json:"workspace"`
}

// workspaceFile is one entry of "workspaces" as data.
type workspaceFile struct {
	Repo *string `json:"repo"`
	Base *string `json:"base"`
}

// profileFile is an agent entry's "profile" as data.
type profileFile struct {
	Client   *string   `json:"client"`
	Model    *string   `json:"model"`
	Nickname *string   `json:"nickname"`
	Roles    *[]string `json:"roles"`
}

// decodeObject decodes raw, a JSON object found at prefix ("" at the top,
// else the dotted path and a dot), into dst, a pointer to a struct of
// pointer fields with json tags: the tags are the keys it knows. A value
// of the wrong JSON type is a *Error naming its key; a key neither
// known nor in skip is a *Error naming the nearest known key.
func decodeObject(raw map[string]json.RawMessage, prefix string, dst any, skip ...string) error {
	v := reflect.ValueOf(dst).Elem()
	known := make([]string, 0, v.NumField())
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		k, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if k == "" {
			continue
		}
		known = append(known, k)
		val, ok := raw[k]
		if !ok || string(bytes.TrimSpace(val)) == "null" {
			continue
		}
		ptr := reflect.New(sf.Type.Elem())
		if err := json.Unmarshal(val, ptr.Interface()); err != nil {
			return configErrorf(prefix+k, "must be %s, not %s", jsonWant(sf.Type.Elem()), jsonKind(val))
		}
		v.Field(i).Set(ptr)
	}
	for _, k := range sortedKeys(raw) {
		// A key starting with "_" is a comment (the shipped config's
		// "_comment" and "_acp_examples").
		if !slices.Contains(known, k) && !slices.Contains(skip, k) && !strings.HasPrefix(k, "_") {
			return unknownKey(prefix, k, known)
		}
	}
	return nil
}

// jsonWant names the JSON a Go type of decodeObject's fields decodes from.
func jsonWant(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "an array of strings"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "an object of string values"
		}
		return "an object"
	}
	return t.String()
}

// Validate checks every value of f and returns the Config it describes,
// with Default's value for each key left out, and the warnings about
// its agents. Relative paths are resolved against baseDir. Every error is
// a *Error naming the key.
func (f *fileConfig) Validate(baseDir string) (Config, []string, error) {
	cfg := Default()
	var err error
	set := func(e error) {
		if err == nil {
			err = e
		}
	}
	f.validateConnection(&cfg, set)
	f.validateRules(&cfg, set)
	f.validateLimits(baseDir, &cfg, set)
	if err != nil {
		return Config{}, nil, err
	}
	if cfg.Workspaces, err = f.workspaces(baseDir); err != nil {
		return Config{}, nil, err
	}
	agents, err := f.agents(baseDir)
	if err != nil {
		return Config{}, nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		if w := agents[name].Workspace; w != "" {
			if _, ok := cfg.Workspaces[w]; !ok {
				return Config{}, nil, configErrorf("agents."+name+".workspace", "%q is not a workspace of this config; the workspaces are %s", w, workspaceNames(cfg.Workspaces))
			}
		}
	}
	cfg.Agents = agents
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		if cfg.HumanIDs.Has(name) || agentbridge.ReservedAgentName(name) {
			// The bridge refuses to register such an agent (contract
			// 8.3), and the coordinator would answer nothing.
			return Config{}, nil, configErrorf("agents."+name, "is a human id or a name the bridge reserves (%s): a coordinator may not serve it", strings.Join(agentbridge.ReservedAgentNames, ", "))
		}
	}
	var warnings []string
	if len(agents) == 0 {
		warnings = append(warnings, "config: agents: no agents are configured, so nobody will be invoked")
	}
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		if _, ok := agents[name].Env[agentbridge.EnvToken]; ok {
			warnings = append(warnings, fmt.Sprintf("config: agents.%s.env.%s is ignored: each run gets an agent token of its own (docs/security.md)", name, agentbridge.EnvToken))
		}
	}
	return cfg, warnings, nil
}

// validateConnection checks who the coordinator is and where it starts:
// bridge_url, coordinator_id, startup_mode. Errors go to set.
func (f *fileConfig) validateConnection(cfg *Config, set func(error)) {
	if f.BridgeURL != nil {
		set(checkURL("bridge_url", *f.BridgeURL, &cfg.BridgeURL))
	}
	if f.CoordinatorID != nil {
		set(checkID("coordinator_id", *f.CoordinatorID))
		cfg.CoordinatorID = *f.CoordinatorID
	}
	if f.StartupMode != nil {
		if s := *f.StartupMode; s != "end" && s != "resume" {
			set(configErrorf("startup_mode", "must be \"end\" or \"resume\", not %q", s))
		}
		cfg.StartupMode = *f.StartupMode
	}
}

// validateRules checks the keys the trigger rules and the payload read.
func (f *fileConfig) validateRules(cfg *Config, set func(error)) {
	set(checkInt("max_reply_chars", f.MaxReplyChars, minReplyChars, &cfg.MaxReplyChars))
	if cfg.MaxReplyChars > MaxReplyCharsLimit {
		set(configErrorf("max_reply_chars", "must be at most %d, not %d: a longer reply would not fit the bridge's 1 MiB request limit, and the bridge would refuse it", MaxReplyCharsLimit, cfg.MaxReplyChars))
	}
	set(checkInt("context_window_size", f.ContextWindowSize, 0, &cfg.ContextWindowSize))
	set(checkSeconds("adapter_timeout_s", f.AdapterTimeoutS, false, &cfg.AdapterTimeout))
	set(checkInt("run_retry_attempts", f.RunRetryAttempts, 1, &cfg.RunRetryAttempts))
	set(checkSeconds("run_retry_window_s", f.RunRetryWindowS, false, &cfg.RunRetryWindow))
	setIf(&cfg.EnableMentions, f.EnableMentions)
	if f.MentionPrefix != nil {
		if e := ValidMentionPrefix(*f.MentionPrefix); e != nil {
			set(&Error{Key: "mention_prefix", Err: e})
		}
		cfg.MentionPrefix = *f.MentionPrefix
	}
	set(checkIDs("mention_senders", f.MentionSenders, false, &cfg.MentionSenders))
	setIf(&cfg.EnableBroadcast, f.EnableBroadcast)
	set(checkIDs("broadcast_senders", f.BroadcastSenders, false, &cfg.BroadcastSenders))
	set(checkIDs("broadcast_agents", f.BroadcastAgents, false, &cfg.BroadcastAgents))
	set(checkSeconds("presence_heartbeat_s", f.PresenceHeartbeatS, true, &cfg.PresenceHeartbeat))
	var humans []string
	set(checkIDs("human_ids", f.HumanIDs, true, &humans))
	if humans != nil {
		cfg.HumanIDs = agentbridge.Humans(humans)
	}
}

// validateRegistration checks what the coordinator registers with the
// bridge: its host name and its heartbeat's ttl.
func (f *fileConfig) validateRegistration(cfg *Config, set func(error)) {
	set(checkSeconds("claim_ttl_s", f.ClaimTTLS, false, &cfg.ClaimTTL))
	set(checkSeconds("pending_ttl_s", f.PendingTTLS, false, &cfg.PendingTTL))
	if cfg.ClaimTTL > agentbridge.MaxClaimTTL {
		set(configErrorf("claim_ttl_s", "must be at most %s", agentbridge.MaxClaimTTL))
	}
	if f.Host != nil {
		if h := *f.Host; len(h) > agentbridge.MaxCoordinatorText || strings.TrimSpace(h) != h {
			set(configErrorf("host", "must be a machine name of at most %d bytes without surrounding spaces, not %q", agentbridge.MaxCoordinatorText, agentbridge.Clip(h, agentbridge.QuoteRunes)))
		}
		cfg.Host = *f.Host
	}
}

// validateLimits checks the limits, the primers, the status API and the
// timers.
func (f *fileConfig) validateLimits(baseDir string, cfg *Config, set func(error)) {
	set(checkInt("max_concurrency", f.MaxConcurrency, 1, &cfg.MaxConcurrency))
	set(checkInt("max_agent_hops", f.MaxAgentHops, 1, &cfg.MaxAgentHops))
	set(checkInt("max_invocations_per_minute", f.MaxInvocationsPerMinute, 1, &cfg.MaxInvocationsPerMinute))
	if f.PrimerPath != nil {
		cfg.PrimerPath = resolvePath(baseDir, *f.PrimerPath)
	}
	if f.ScenePrimerPath != nil {
		cfg.ScenePrimerPath = resolvePath(baseDir, *f.ScenePrimerPath)
	}
	if f.StatusAddr != nil {
		if s := *f.StatusAddr; s != "" {
			if _, _, e := net.SplitHostPort(s); e != nil {
				set(configErrorf("status_addr", "%q is not a host:port address (use \"\" to turn the status API off)", s))
			}
		}
		cfg.StatusAddr = *f.StatusAddr
	}
	setIf(&cfg.StatusAllowedHosts, f.StatusAllowedHosts)
	setIf(&cfg.BridgeToken, f.BridgeToken)
	set(checkSeconds("shutdown_grace_s", f.ShutdownGraceS, true, &cfg.ShutdownGrace))
	set(checkSeconds("acp_idle_s", f.ACPIdleS, false, &cfg.ACPIdle))
	set(checkInt("acp_max_warm", f.ACPMaxWarm, 1, &cfg.ACPMaxWarm))
	set(checkSeconds("permission_timeout_s", f.PermissionTimeoutS, false, &cfg.PermissionTimeout))
	f.validateRegistration(cfg, set)
}

func (f *fileConfig) agents(baseDir string) (map[string]Agent, error) {
	if !f.agentsPresent {
		return nil, configErrorf("agents", "is required: an object mapping participant ids to {\"command\": [...]}")
	}
	if f.Agents == nil {
		return nil, configErrorf("agents", "must be an object, not null")
	}
	if n := len(*f.Agents); n > agentbridge.MaxCoordinatorAgents {
		// The bridge would refuse the registration, and the coordinator
		// would answer nothing.
		return nil, configErrorf("agents", "has %d agents; a coordinator registers at most %d with the bridge", n, agentbridge.MaxCoordinatorAgents)
	}
	agents := make(map[string]Agent)
	clients := make(map[string]string)
	for _, name := range sortedKeys(*f.Agents) {
		key := "agents." + name
		if !agentbridge.ParticipantIDPattern.MatchString(name) {
			return nil, configErrorf(key, "the agent name is not a valid participant id (1 to 128 letters, digits or . _ @ : -, starting with a letter or digit)")
		}
		a, err := parseAgent(key, (*f.Agents)[name], baseDir)
		if err != nil {
			return nil, err
		}
		if a.Client != "" {
			c := strings.ToLower(a.Client)
			if other, dup := clients[c]; dup {
				return nil, configErrorf(key+".client", "%q is already served by the agent %q; a client may name one agent only", a.Client, other)
			}
			clients[c] = name
		}
		agents[name] = a
	}
	for _, name := range sortedKeys(agents) {
		if err := checkFallback("agents."+name+".fallback", name, agents[name].Fallback); err != nil {
			return nil, err
		}
	}
	return agents, nil
}

// checkFallback checks an agent's fallback chain: participant ids, none
// twice, not the agent itself. A name this config has no entry for is
// allowed: another coordinator may serve it.
func checkFallback(key, self string, chain []string) error {
	seen := map[string]bool{}
	for _, f := range chain {
		switch {
		case !agentbridge.ParticipantIDPattern.MatchString(f):
			return configErrorf(key, "%q is not a valid participant id (1 to 128 letters, digits or . _ @ : -, starting with a letter or digit)", f)
		case f == self:
			return configErrorf(key, "names the agent itself; list the agents its triggers go to instead")
		case seen[f]:
			return configErrorf(key, "names %q twice", f)
		}
		seen[f] = true
	}
	return nil
}

// parseAgent decodes and checks the agent entry raw found at key.
func parseAgent(key string, raw json.RawMessage, baseDir string) (Agent, error) {
	if string(bytes.TrimSpace(raw)) == "null" {
		return Agent{}, configErrorf(key, "must be an object with a \"command\", not null")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return Agent{}, configErrorf(key, "must be an object, not %s", jsonKind(raw))
	}
	var e agentFile
	if err := decodeObject(obj, key+".", &e); err != nil {
		return Agent{}, err
	}
	var a Agent
	setIf(&a.Command, e.Command)
	if e.ACP != nil {
		if err := parseACP(key, e, baseDir, &a); err != nil {
			return Agent{}, err
		}
	} else if len(a.Command) == 0 {
		return Agent{}, configErrorf(key+".command", "is required: the adapter's argv as a non-empty array, such as [\"./adapters/echo.sh\"]")
	} else if k := acpOnlyKey(e); k != "" {
		return Agent{}, configErrorf(key+"."+k, "applies only to an ACP agent (\"acp\"); this entry runs an adapter (\"command\")")
	}
	if slices.Contains(a.Command, "") {
		return Agent{}, configErrorf(key+".command", "must not contain empty strings")
	}
	resolveAgentPaths(&a, e.Cwd, baseDir)
	setIf(&a.Env, e.Env)
	setIf(&a.Client, e.Client)
	if e.Workspace != nil && *e.Workspace != "" {
		if !agentbridge.WorkspaceNamePattern.MatchString(*e.Workspace) {
			return Agent{}, configErrorf(key+".workspace", "must be the name of an entry of \"workspaces\", not %q", agentbridge.Clip(*e.Workspace, agentbridge.QuoteRunes))
		}
		a.Workspace = *e.Workspace
	}
	setIf(&a.Fallback, e.Fallback)
	if e.Profile != nil {
		var err error
		if a.Profile, err = parseAgentProfile(key, *e.Profile); err != nil {
			return Agent{}, err
		}
	}
	return a, nil
}

// resolveAgentPaths resolves a's command (when it names a path) and its
// working directory against baseDir, which is also the default folder.
func resolveAgentPaths(a *Agent, cwd *string, baseDir string) {
	if len(a.Command) > 0 && strings.Contains(a.Command[0], "/") {
		a.Command[0] = resolvePath(baseDir, a.Command[0])
	}
	if cwd != nil && *cwd != "" {
		a.Cwd = resolvePath(baseDir, *cwd)
	}
	if a.Cwd == "" {
		a.Cwd = baseDir
	}
}

// parseAgentProfile decodes an agent entry's profile.
func parseAgentProfile(key string, obj map[string]json.RawMessage) (*agentbridge.Profile, error) {
	var pf profileFile
	if err := decodeObject(obj, key+".profile.", &pf); err != nil {
		return nil, err
	}
	p := &agentbridge.Profile{}
	setIf(&p.Client, pf.Client)
	setIf(&p.Model, pf.Model)
	setIf(&p.Nickname, pf.Nickname)
	setIf(&p.Roles, pf.Roles)
	return p, nil
}

// setIf sets *dst to the value of a key, v, when the file gives it (a nil
// v is a key left out or null, which keeps the default).
func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// checkInt sets *dst from the number v, when given, if it is whole and at
// least lowest.
func checkInt(key string, v *float64, lowest int, dst *int) error {
	if v == nil {
		return nil
	}
	f := *v
	if f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
		return configErrorf(key, "must be a whole number, not %v", f)
	}
	if int(f) < lowest {
		return configErrorf(key, "must be at least %d, not %d", lowest, int(f))
	}
	*dst = int(f)
	return nil
}

// checkSeconds sets *dst from v, a duration in seconds (fractions
// allowed), when given.
func checkSeconds(key string, v *float64, zeroOK bool, dst *time.Duration) error {
	if v == nil {
		return nil
	}
	f := *v
	switch {
	case f < 0 || (f == 0 && !zeroOK):
		return configErrorf(key, "must be a positive number of seconds, not %v", f)
	case f > 365*24*3600:
		return configErrorf(key, "must be at most a year's worth of seconds, not %v", f)
	}
	*dst = time.Duration(f * float64(time.Second))
	return nil
}

// checkIDs sets *dst from list, when given, if every entry is a
// participant id.
func checkIDs(key string, list *[]string, nonEmpty bool, dst *[]string) error {
	if list == nil {
		return nil
	}
	if nonEmpty && len(*list) == 0 {
		return configErrorf(key, "must name at least one participant")
	}
	for _, id := range *list {
		if err := checkID(key, id); err != nil {
			return err
		}
	}
	*dst = *list
	return nil
}

func checkID(key, id string) error {
	if !agentbridge.ParticipantIDPattern.MatchString(id) {
		return configErrorf(key, "%q is not a valid participant id (1 to 128 letters, digits or . _ @ : -, starting with a letter or digit)", id)
	}
	return nil
}

func checkURL(key, s string, dst *string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return configErrorf(key, "%q is not an http:// or https:// URL with a host", s)
	}
	*dst = strings.TrimRight(s, "/")
	return nil
}

// jsonError describes a JSON syntax error with its line, which is what a
// person editing the file needs.
func jsonError(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		return fmt.Sprintf("%v (line %d)", se, line)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// ValidMentionPrefix checks a mention prefix (the mention parser's fuzz test
// holds its prefixes to it too): 1 to 8 characters, none of
// them a letter, digit, underscore, space or backtick, so that the prefix
// can never be mistaken for part of a word or a code span.
func ValidMentionPrefix(s string) error {
	if s == "" || len(s) > 8 || !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsSpace(r) || r == '_' || r == '`'
	}) >= 0 {
		return fmt.Errorf("must be 1 to 8 characters with no letters, digits, underscores, spaces or backticks, not %q", s)
	}
	return nil
}

// resolvePath makes a relative path relative to baseDir, the config's
// folder, rather than to the process's working directory.
func resolvePath(baseDir, p string) string {
	if baseDir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(baseDir, p)
}

// jsonKind names the JSON type of v for error messages.
func jsonKind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "empty"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 't', 'f':
		return "true/false"
	case 'n':
		return "null"
	}
	return "a number"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ResolveAgent returns the name of the agent entry that speaks for
// participant in a thread: the entry named by the participant's id, else
// the entry whose "client" matches the client of the participant's invited
// profile. ok is false when no entry serves the participant, and when the
// thread picks a workspace for it that this config lacks (MissingWorkspace):
// a coordinator that has it serves the participant there (contract 8.1).
func (c *Config) ResolveAgent(participant string, st agentbridge.ThreadState) (agentName string, ok bool) {
	name, ok := c.resolveEntry(participant, st)
	if !ok || c.MissingWorkspace(participant, st) != "" {
		return "", false
	}
	return name, true
}

// MissingWorkspace is the workspace the thread picks for participant that
// this config lacks, or "".
func (c *Config) MissingWorkspace(participant string, st agentbridge.ThreadState) string {
	if w := st.WorkspaceOf(participant); w != "" && !c.HasWorkspace(w) {
		return w
	}
	return ""
}

// resolveEntry is ResolveAgent without the workspace.
func (c *Config) resolveEntry(participant string, st agentbridge.ThreadState) (agentName string, ok bool) {
	if _, found := c.Agents[participant]; found {
		return participant, true
	}
	inv, invited := st.Invited(participant)
	if !invited || inv.Profile.Client == "" {
		return "", false
	}
	for _, name := range sortedKeys(c.Agents) {
		if a := c.Agents[name]; a.Client != "" && strings.EqualFold(a.Client, inv.Profile.Client) {
			return name, true
		}
	}
	return "", false
}

// acpOnlyKey names the first key of e that only an ACP agent entry takes,
// or "" when there is none: on an adapter entry it would do nothing.
func acpOnlyKey(e agentFile) string {
	switch {
	case e.Workdir != nil:
		return "workdir"
	case e.Permissions != nil:
		return "permissions"
	case e.ACPFS != nil:
		return "acp_fs"
	}
	return ""
}

// parseACP checks an ACP agent entry's keys (contract 6.6) and sets them
// on a.
func parseACP(key string, e agentFile, baseDir string, a *Agent) error {
	if len(a.Command) > 0 {
		return configErrorf(key+".acp", "an agent runs either an adapter (\"command\") or an ACP agent (\"acp\"), not both")
	}
	if e.Cwd != nil {
		return configErrorf(key+".cwd", "is an adapter's folder; an ACP agent's is \"workdir\"")
	}
	a.ACP = *e.ACP
	if len(a.ACP) == 0 || slices.Contains(a.ACP, "") {
		return configErrorf(key+".acp", "must be the ACP agent's argv as a non-empty array without empty strings, such as [\"claude-agent-acp\"]")
	}
	if strings.Contains(a.ACP[0], "/") {
		a.ACP[0] = resolvePath(baseDir, a.ACP[0])
	}
	if e.Workdir != nil && *e.Workdir != "" {
		a.Workdir = resolvePath(baseDir, *e.Workdir)
	}
	a.Permissions = PermissionsAsk
	if e.Permissions != nil {
		switch p := *e.Permissions; p {
		case PermissionsAsk, PermissionsAllow, PermissionsDeny:
			a.Permissions = p
		default:
			return configErrorf(key+".permissions", "must be \"ask\", \"allow\" or \"deny\", not %q", p)
		}
	}
	setIf(&a.ACPFS, e.ACPFS)
	return nil
}

// workspaces checks the "workspaces" object: each name a workspace name,
// each entry a "repo" (resolved against baseDir) and an optional "base"
// branch. Whether repo is a git work tree is CheckWorkspaces's, which
// reads the disk.
func (f *fileConfig) workspaces(baseDir string) (map[string]Workspace, error) {
	if f.Workspaces == nil || len(*f.Workspaces) == 0 {
		return nil, nil
	}
	out := map[string]Workspace{}
	for _, name := range sortedKeys(*f.Workspaces) {
		key := "workspaces." + name
		if !agentbridge.WorkspaceNamePattern.MatchString(name) {
			return nil, configErrorf(key, "the workspace name must be 1 to 64 letters, digits or . _ -, starting with a letter or digit")
		}
		raw := (*f.Workspaces)[name]
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return nil, configErrorf(key, "must be an object such as {\"repo\": \"/path/to/repo\", \"base\": \"main\"}, not %s", jsonKind(raw))
		}
		var wf workspaceFile
		if err := decodeObject(obj, key+".", &wf); err != nil {
			return nil, err
		}
		if wf.Repo == nil || *wf.Repo == "" {
			return nil, configErrorf(key+".repo", "is required: the path of a git work tree on this machine")
		}
		w := Workspace{Repo: filepath.Clean(resolvePath(baseDir, *wf.Repo))}
		if wf.Base != nil && *wf.Base != "" {
			if !agentbridge.ValidBranchName(*wf.Base) {
				return nil, configErrorf(key+".base", "must be a branch name (letters, digits, . _ / -), not %q", agentbridge.Clip(*wf.Base, agentbridge.QuoteRunes))
			}
			w.Base = *wf.Base
		}
		out[name] = w
	}
	return out, nil
}

// workspaceNames lists the names of ws for a sentence.
func workspaceNames(ws map[string]Workspace) string {
	if len(ws) == 0 {
		return "none"
	}
	names := sortedKeys(ws)
	for i, n := range names {
		names[i] = strconv.Quote(n)
	}
	return strings.Join(names, ", ")
}

// CheckWorkspaces checks that every workspace's repo is a git work tree
// on this machine: a folder holding .git (a folder, or the file a linked
// worktree has). It reads the disk, so Load calls it after Parse; the
// error names the key.
func CheckWorkspaces(cfg *Config) error {
	for _, name := range sortedKeys(cfg.Workspaces) {
		repo := cfg.Workspaces[name].Repo
		key := "workspaces." + name + ".repo"
		st, err := os.Stat(repo)
		switch {
		case err != nil:
			return configErrorf(key, "%s does not exist or cannot be read: %v", repo, errors.Unwrap(err))
		case !st.IsDir():
			return configErrorf(key, "%s is a file, not a git work tree", repo)
		}
		if _, err := os.Stat(filepath.Join(repo, ".git")); err != nil {
			return configErrorf(key, "%s is not a git work tree (it holds no .git); give the top folder of a clone", repo)
		}
	}
	return nil
}

// WorkspaceFor is the workspace participant p's run in a thread whose
// state is st works in, by the entry agent that serves it: the one the
// thread picks (st.WorkspaceOf), else the entry's own; "" for none.
func (c *Config) WorkspaceFor(agent, p string, st agentbridge.ThreadState) string {
	if w := st.WorkspaceOf(p); w != "" {
		return w
	}
	return c.Agents[agent].Workspace
}

// HasWorkspace reports whether the config has a workspace named name.
func (c *Config) HasWorkspace(name string) bool {
	_, ok := c.Workspaces[name]
	return ok
}
