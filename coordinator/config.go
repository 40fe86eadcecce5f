package coordinator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// AgentConfig is one entry of the config's "agents" object: how to start
// the adapter that speaks for a participant.
type AgentConfig struct {
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
}

// Config is the coordinator's configuration, as read from
// coordinator.config.json. A Config is a value: the watcher builds a new
// one on every valid edit and the daemon swaps it in whole.
type Config struct {
	// BridgeURL is the bridge server to follow and post to.
	BridgeURL string
	// CoordinatorID is the participant id the coordinator posts its own
	// notices as; its own events never trigger anything.
	CoordinatorID string
	// StartupMode is "end" (skip what was posted while down) or "resume".
	StartupMode string
	// MaxReplyChars caps a reply, including the [truncated] marker.
	MaxReplyChars int
	// ContextWindowSize is how many recent events an adapter receives.
	ContextWindowSize int
	// AdapterTimeout bounds one adapter run.
	AdapterTimeout time.Duration
	// EnableMentions turns mention routing on for to=all messages.
	EnableMentions bool
	// MentionPrefix introduces a mention ("@").
	MentionPrefix string
	// MentionSenders may always wake participants by mention.
	MentionSenders []string
	// EnableBroadcast lets BroadcastSenders wake BroadcastAgents with a
	// to=all message that mentions nobody.
	EnableBroadcast  bool
	BroadcastSenders []string
	BroadcastAgents  []string
	// PresenceHeartbeat is how often presence is refreshed (0 = never).
	PresenceHeartbeat time.Duration
	// PollThreads is accepted for compatibility with the original's
	// config and unused: the coordinator streams.
	PollThreads time.Duration
	// Agents maps entry names to adapters.
	Agents map[string]AgentConfig
	// HumanIDs are the participants whose controls count; it must match
	// the server's --humans.
	HumanIDs agentbridge.Humans
	// MaxConcurrency caps adapters running at once.
	MaxConcurrency int
	// MaxAgentHops is the loop guard: a trigger whose hop count has
	// reached it invokes nobody.
	MaxAgentHops int
	// MaxInvocationsPerMinute is a per-thread rate; the excess waits.
	MaxInvocationsPerMinute int
	// PrimerPath is the primer file given to adapters, resolved against
	// the config folder.
	PrimerPath string
	// ScenePrimerPath is the actor system prompt given to actors in a
	// scene instead of the primer (config key scene_primer_path), resolved
	// like PrimerPath.
	ScenePrimerPath string
	// StatusAddr is where the status API listens ("" = off).
	StatusAddr string
	// BridgeToken is sent as a bearer token to the bridge.
	BridgeToken string
	// ShutdownGrace is how long running adapters may finish on shutdown.
	ShutdownGrace time.Duration
	// Path is the file the config was loaded from ("" when parsed from a
	// reader).
	Path string
}

// ConfigError is a configuration mistake: a wrong type, an invalid value or
// a missing required key. The command maps it to exit code 2 and prints the
// one line its Error method returns.
type ConfigError struct {
	// Key is the dotted path of the offending key ("agents.codex.command");
	// empty when the file as a whole is at fault (unreadable, not JSON).
	Key string
	// Err says what is wrong.
	Err error
}

// Error returns "config: <key>: <what is wrong>".
func (e *ConfigError) Error() string {
	if e.Key == "" {
		return "config: " + e.Err.Error()
	}
	return "config: " + e.Key + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// ConfigKey returns the offending key; main uses this method to recognise
// configuration errors without importing this package.
func (e *ConfigError) ConfigKey() string { return e.Key }

func configErrorf(key, format string, args ...any) *ConfigError {
	return &ConfigError{Key: key, Err: fmt.Errorf(format, args...)}
}

// DefaultConfig returns the configuration used for every key a file leaves
// out: the original coordinator's defaults plus the contract's new keys.
func DefaultConfig() Config {
	return Config{
		BridgeURL:               "http://127.0.0.1:5111",
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
		PollThreads:             5 * time.Second,
		Agents:                  map[string]AgentConfig{},
		HumanIDs:                agentbridge.Humans{"user"},
		MaxConcurrency:          8,
		MaxAgentHops:            6,
		MaxInvocationsPerMinute: 30,
		PrimerPath:              "docs/bridge-agent-primer.md",
		ScenePrimerPath:         "docs/scene-actor-primer.md",
		StatusAddr:              "127.0.0.1:5112",
		ShutdownGrace:           10 * time.Second,
	}
}

// minReplyChars leaves room for some reply text next to the
// "[truncated]" marker.
const minReplyChars = 64

// LoadConfig reads and parses the config file at path, resolving relative
// paths against the file's folder. A file that cannot be read is a
// *ConfigError too, so that the command exits 2 naming it.
func LoadConfig(path string) (Config, []string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Config{}, nil, &ConfigError{Err: fmt.Errorf("resolve %s: %w", path, err)}
	}
	f, err := os.Open(abs)
	if err != nil {
		return Config{}, nil, &ConfigError{Err: fmt.Errorf("open config file: %w", err)}
	}
	defer f.Close()
	cfg, warnings, err := ParseConfig(f, filepath.Dir(abs))
	if err != nil {
		return Config{}, warnings, err
	}
	cfg.Path = abs
	return cfg, warnings, nil
}

// ParseConfig parses a config file's content. It does no I/O beyond reading
// r: relative paths are resolved against baseDir (left alone when baseDir is
// empty). Every error is a *ConfigError naming the key; unknown keys are
// returned as warnings, not errors, so that a config written for a newer
// version still loads.
func ParseConfig(r io.Reader, baseDir string) (Config, []string, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, nil, &ConfigError{Err: fmt.Errorf("read config: %w", err)}
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return Config{}, nil, &ConfigError{Err: fmt.Errorf("the file is not a JSON object: %s", jsonError(data, err))}
	}
	if raw == nil {
		return Config{}, nil, &ConfigError{Err: errors.New("the file must hold a JSON object, not null")}
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, nil, &ConfigError{Err: errors.New("the file holds more than one JSON value")}
	}

	cfg := DefaultConfig()
	p := &parser{raw: raw}
	steps := []func() error{
		func() error { return p.url("bridge_url", &cfg.BridgeURL) },
		func() error { return p.id("coordinator_id", &cfg.CoordinatorID) },
		func() error { return p.startupMode(&cfg.StartupMode) },
		func() error { return p.integer("max_reply_chars", &cfg.MaxReplyChars, minReplyChars) },
		func() error { return p.integer("context_window_size", &cfg.ContextWindowSize, 0) },
		func() error { return p.seconds("adapter_timeout_s", &cfg.AdapterTimeout, false) },
		func() error { return p.boolean("enable_mentions", &cfg.EnableMentions) },
		func() error { return p.mentionPrefix(&cfg.MentionPrefix) },
		func() error { return p.ids("mention_senders", &cfg.MentionSenders, false) },
		func() error { return p.boolean("enable_broadcast", &cfg.EnableBroadcast) },
		func() error { return p.ids("broadcast_senders", &cfg.BroadcastSenders, false) },
		func() error { return p.ids("broadcast_agents", &cfg.BroadcastAgents, false) },
		func() error { return p.seconds("presence_heartbeat_s", &cfg.PresenceHeartbeat, true) },
		func() error { return p.seconds("poll_threads_s", &cfg.PollThreads, true) },
		func() error { return p.humans(&cfg.HumanIDs) },
		func() error { return p.integer("max_concurrency", &cfg.MaxConcurrency, 1) },
		func() error { return p.integer("max_agent_hops", &cfg.MaxAgentHops, 1) },
		func() error { return p.integer("max_invocations_per_minute", &cfg.MaxInvocationsPerMinute, 1) },
		func() error { return p.path("primer_path", &cfg.PrimerPath, baseDir) },
		func() error { return p.path("scene_primer_path", &cfg.ScenePrimerPath, baseDir) },
		func() error { return p.statusAddr(&cfg.StatusAddr) },
		func() error { return p.str("bridge_token", &cfg.BridgeToken) },
		func() error { return p.seconds("shutdown_grace_s", &cfg.ShutdownGrace, true) },
		func() error { return p.agents(&cfg.Agents, baseDir) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return Config{}, p.warnings, err
		}
	}
	for _, k := range sortedKeys(raw) {
		if !isKnownKey(k) {
			p.warnf(k, "unknown key, ignored")
		}
	}
	if len(cfg.Agents) == 0 {
		p.warnf("agents", "no agents are configured, so nobody will be invoked")
	}
	return cfg, p.warnings, nil
}

// isKnownKey reports whether k is a top-level key ParseConfig understands.
func isKnownKey(k string) bool {
	switch k {
	case "bridge_url", "coordinator_id", "startup_mode", "max_reply_chars",
		"context_window_size", "adapter_timeout_s", "enable_mentions",
		"mention_prefix", "mention_senders", "enable_broadcast",
		"broadcast_senders", "broadcast_agents", "presence_heartbeat_s",
		"poll_threads_s", "agents", "human_ids", "max_concurrency",
		"max_agent_hops", "max_invocations_per_minute", "primer_path",
		"scene_primer_path", "status_addr", "bridge_token", "shutdown_grace_s":
		return true
	}
	return false
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

// parser decodes one JSON object's keys into typed fields, turning each
// mistake into a *ConfigError that names the key. A key that is absent or
// null keeps its default.
type parser struct {
	raw      map[string]json.RawMessage
	prefix   string // dotted path of raw within the file, "" at the top
	warnings []string
}

func (p *parser) key(k string) string { return p.prefix + k }

func (p *parser) warnf(k, format string, args ...any) {
	p.warnings = append(p.warnings, "config: "+p.key(k)+": "+fmt.Sprintf(format, args...))
}

// get returns the raw value of k, or nil when k is absent or null.
func (p *parser) get(k string) json.RawMessage {
	v, ok := p.raw[k]
	if !ok || string(bytes.TrimSpace(v)) == "null" {
		return nil
	}
	return v
}

func (p *parser) typeError(k, want string, v json.RawMessage) *ConfigError {
	return configErrorf(p.key(k), "must be %s, not %s", want, jsonKind(v))
}

func (p *parser) str(k string, dst *string) error {
	v := p.get(k)
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return p.typeError(k, "a string", v)
	}
	return nil
}

func (p *parser) boolean(k string, dst *bool) error {
	v := p.get(k)
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return p.typeError(k, "true or false", v)
	}
	return nil
}

func (p *parser) number(k string) (float64, bool, error) {
	v := p.get(k)
	if v == nil {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, false, p.typeError(k, "a number", v)
	}
	return f, true, nil
}

func (p *parser) integer(k string, dst *int, lowest int) error {
	f, ok, err := p.number(k)
	if err != nil || !ok {
		return err
	}
	if f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
		return configErrorf(p.key(k), "must be a whole number, not %v", f)
	}
	if int(f) < lowest {
		return configErrorf(p.key(k), "must be at least %d, not %d", lowest, int(f))
	}
	*dst = int(f)
	return nil
}

// seconds reads a duration given in seconds (fractions allowed).
func (p *parser) seconds(k string, dst *time.Duration, zeroOK bool) error {
	f, ok, err := p.number(k)
	if err != nil || !ok {
		return err
	}
	switch {
	case f < 0 || (f == 0 && !zeroOK):
		return configErrorf(p.key(k), "must be a positive number of seconds, not %v", f)
	case f > 365*24*3600:
		return configErrorf(p.key(k), "must be at most a year's worth of seconds, not %v", f)
	}
	*dst = time.Duration(f * float64(time.Second))
	return nil
}

func (p *parser) stringList(k string, dst *[]string) error {
	v := p.get(k)
	if v == nil {
		return nil
	}
	var list []string
	if err := json.Unmarshal(v, &list); err != nil {
		return p.typeError(k, "an array of strings", v)
	}
	*dst = list
	return nil
}

// ids reads an array of participant ids.
func (p *parser) ids(k string, dst *[]string, nonEmpty bool) error {
	var list []string
	if err := p.stringList(k, &list); err != nil || list == nil {
		return err
	}
	if nonEmpty && len(list) == 0 {
		return configErrorf(p.key(k), "must name at least one participant")
	}
	for _, id := range list {
		if !agentbridge.ParticipantIDPattern.MatchString(id) {
			return configErrorf(p.key(k), "%q is not a valid participant id (1 to 128 letters, digits or . _ @ : -, starting with a letter or digit)", id)
		}
	}
	*dst = list
	return nil
}

func (p *parser) id(k string, dst *string) error {
	var s string
	if err := p.str(k, &s); err != nil || p.get(k) == nil {
		return err
	}
	if !agentbridge.ParticipantIDPattern.MatchString(s) {
		return configErrorf(p.key(k), "%q is not a valid participant id (1 to 128 letters, digits or . _ @ : -, starting with a letter or digit)", s)
	}
	*dst = s
	return nil
}

func (p *parser) humans(dst *agentbridge.Humans) error {
	var list []string
	if err := p.ids("human_ids", &list, true); err != nil || list == nil {
		return err
	}
	*dst = agentbridge.Humans(list)
	return nil
}

func (p *parser) url(k string, dst *string) error {
	var s string
	if err := p.str(k, &s); err != nil || p.get(k) == nil {
		return err
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return configErrorf(p.key(k), "%q is not an http:// or https:// URL with a host", s)
	}
	*dst = strings.TrimRight(s, "/")
	return nil
}

func (p *parser) startupMode(dst *string) error {
	var s string
	if err := p.str("startup_mode", &s); err != nil || p.get("startup_mode") == nil {
		return err
	}
	if s != "end" && s != "resume" {
		return configErrorf("startup_mode", "must be \"end\" or \"resume\", not %q", s)
	}
	*dst = s
	return nil
}

func (p *parser) mentionPrefix(dst *string) error {
	var s string
	if err := p.str("mention_prefix", &s); err != nil || p.get("mention_prefix") == nil {
		return err
	}
	if err := validMentionPrefix(s); err != nil {
		return &ConfigError{Key: "mention_prefix", Err: err}
	}
	*dst = s
	return nil
}

// validMentionPrefix checks a mention prefix: 1 to 8 characters, none of
// them a letter, digit, underscore, space or backtick, so that the prefix
// can never be mistaken for part of a word or a code span.
func validMentionPrefix(s string) error {
	if s == "" || len(s) > 8 || !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsSpace(r) || r == '_' || r == '`'
	}) >= 0 {
		return fmt.Errorf("must be 1 to 8 characters with no letters, digits, underscores, spaces or backticks, not %q", s)
	}
	return nil
}

func (p *parser) statusAddr(dst *string) error {
	var s string
	if err := p.str("status_addr", &s); err != nil || p.get("status_addr") == nil {
		return err
	}
	if s != "" {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return configErrorf("status_addr", "%q is not a host:port address (use \"\" to turn the status API off)", s)
		}
	}
	*dst = s
	return nil
}

// path reads a file path and resolves it against baseDir.
func (p *parser) path(k string, dst *string, baseDir string) error {
	var s string
	if err := p.str(k, &s); err != nil || p.get(k) == nil {
		return err
	}
	*dst = s
	if s != "" {
		*dst = resolvePath(baseDir, s)
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

// sub returns a parser for the object held by key k.
func (p *parser) sub(k string) (*parser, error) {
	v := p.get(k)
	if v == nil {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(v, &obj); err != nil {
		return nil, p.typeError(k, "an object", v)
	}
	return &parser{raw: obj, prefix: p.key(k) + "."}, nil
}

func (p *parser) agents(dst *map[string]AgentConfig, baseDir string) error {
	if _, ok := p.raw["agents"]; !ok {
		return configErrorf("agents", "is required: an object mapping participant ids to {\"command\": [...]}")
	}
	ap, err := p.sub("agents")
	if err != nil {
		return err
	}
	if ap == nil {
		return configErrorf("agents", "must be an object, not null")
	}
	agents := make(map[string]AgentConfig)
	clients := make(map[string]string)
	for _, name := range sortedKeys(ap.raw) {
		if !agentbridge.ParticipantIDPattern.MatchString(name) {
			return configErrorf(ap.key(name), "the agent name is not a valid participant id (1 to 128 letters, digits or . _ @ : -, starting with a letter or digit)")
		}
		a, err := ap.agent(name, baseDir)
		if err != nil {
			return err
		}
		if a.Client != "" {
			c := strings.ToLower(a.Client)
			if other, dup := clients[c]; dup {
				return configErrorf(ap.key(name)+".client", "%q is already served by the agent %q; a client may name one agent only", a.Client, other)
			}
			clients[c] = name
		}
		agents[name] = a
	}
	p.warnings = append(p.warnings, ap.warnings...)
	*dst = agents
	return nil
}

func (p *parser) agent(name string, baseDir string) (AgentConfig, error) {
	e, err := p.sub(name)
	if err != nil {
		return AgentConfig{}, err
	}
	if e == nil {
		return AgentConfig{}, configErrorf(p.key(name), "must be an object with a \"command\", not null")
	}
	defer func() { p.warnings = append(p.warnings, e.warnings...) }()
	var a AgentConfig
	if err := e.stringList("command", &a.Command); err != nil {
		return AgentConfig{}, err
	}
	if len(a.Command) == 0 {
		return AgentConfig{}, configErrorf(e.key("command"), "is required: the adapter's argv as a non-empty array, such as [\"./adapters/echo.sh\"]")
	}
	if slices.Contains(a.Command, "") {
		return AgentConfig{}, configErrorf(e.key("command"), "must not contain empty strings")
	}
	if strings.Contains(a.Command[0], "/") {
		a.Command[0] = resolvePath(baseDir, a.Command[0])
	}
	if err := e.path("cwd", &a.Cwd, baseDir); err != nil {
		return AgentConfig{}, err
	}
	if a.Cwd == "" {
		a.Cwd = baseDir
	}
	if v := e.get("env"); v != nil {
		if err := json.Unmarshal(v, &a.Env); err != nil {
			return AgentConfig{}, e.typeError("env", "an object of string values", v)
		}
	}
	if err := e.str("client", &a.Client); err != nil {
		return AgentConfig{}, err
	}
	pp, err := e.sub("profile")
	if err != nil {
		return AgentConfig{}, err
	}
	if pp != nil {
		prof := &agentbridge.Profile{}
		for _, step := range []func() error{
			func() error { return pp.str("client", &prof.Client) },
			func() error { return pp.str("model", &prof.Model) },
			func() error { return pp.str("nickname", &prof.Nickname) },
			func() error { return pp.stringList("roles", &prof.Roles) },
		} {
			if err := step(); err != nil {
				return AgentConfig{}, err
			}
		}
		for _, k := range sortedKeys(pp.raw) {
			switch k {
			case "client", "model", "nickname", "roles":
			default:
				pp.warnf(k, "unknown key, ignored")
			}
		}
		e.warnings = append(e.warnings, pp.warnings...)
		a.Profile = prof
	}
	for _, k := range sortedKeys(e.raw) {
		switch k {
		case "command", "cwd", "env", "profile", "client":
		default:
			e.warnf(k, "unknown key, ignored")
		}
	}
	return a, nil
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
// profile. ok is false when no entry serves the participant.
func (c *Config) ResolveAgent(participant string, st agentbridge.ThreadState) (agentName string, ok bool) {
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
