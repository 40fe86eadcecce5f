package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

const minimalConfig = `{"agents": {"echo": {"command": ["echo"]}}}`

func TestParse_Defaults(t *testing.T) {
	cfg, warnings, err := Parse(strings.NewReader(minimalConfig), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q, want none", warnings)
	}
	want := Default()
	want.Agents = map[string]Agent{"echo": {Command: []string{"echo"}}}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config =\n%+v\nwant\n%+v", cfg, want)
	}
	for name, got := range map[string]any{
		"bridge_url":                 cfg.BridgeURL == "http://127.0.0.1:5111",
		"coordinator_id":             cfg.CoordinatorID == "bridge-coordinator",
		"startup_mode":               cfg.StartupMode == "end",
		"max_reply_chars":            cfg.MaxReplyChars == 8000,
		"context_window_size":        cfg.ContextWindowSize == 25,
		"adapter_timeout_s":          cfg.AdapterTimeout == 600*time.Second,
		"enable_mentions":            cfg.EnableMentions,
		"mention_prefix":             cfg.MentionPrefix == "@",
		"mention_senders":            slices.Equal(cfg.MentionSenders, []string{"user"}),
		"enable_broadcast":           !cfg.EnableBroadcast,
		"broadcast_senders":          slices.Equal(cfg.BroadcastSenders, []string{"user"}),
		"broadcast_agents":           cfg.BroadcastAgents != nil && len(cfg.BroadcastAgents) == 0,
		"presence_heartbeat_s":       cfg.PresenceHeartbeat == 10*time.Second,
		"human_ids":                  slices.Equal(cfg.HumanIDs, agentbridge.Humans{"user"}),
		"max_concurrency":            cfg.MaxConcurrency == 8,
		"max_agent_hops":             cfg.MaxAgentHops == 6,
		"max_invocations_per_minute": cfg.MaxInvocationsPerMinute == 30,
		"primer_path":                cfg.PrimerPath == "docs/bridge-agent-primer.md",
		"scene_primer_path":          cfg.ScenePrimerPath == "docs/scene-actor-primer.md",
		"status_addr":                cfg.StatusAddr == "127.0.0.1:5112",
		"bridge_token":               cfg.BridgeToken == "",
		"shutdown_grace_s":           cfg.ShutdownGrace == 10*time.Second,
		"path":                       cfg.Path == "",
	} {
		if got != true {
			t.Errorf("default of %s is wrong", name)
		}
	}
}

func TestParse_AllKeys(t *testing.T) {
	const in = `{
		"bridge_url": "https://bridge.example:8443/",
		"coordinator_id": "coord",
		"startup_mode": "resume",
		"max_reply_chars": 100,
		"context_window_size": 0,
		"adapter_timeout_s": 1.5,
		"enable_mentions": false,
		"mention_prefix": "+",
		"mention_senders": ["user", "codex"],
		"enable_broadcast": true,
		"broadcast_senders": ["alice"],
		"broadcast_agents": ["codex"],
		"presence_heartbeat_s": 0,
		"poll_threads_s": 2,
		"human_ids": ["user", "alice"],
		"max_concurrency": 2,
		"max_agent_hops": 3,
		"max_invocations_per_minute": 4,
		"primer_path": "/etc/primer.md",
		"scene_primer_path": "/etc/actor.md",
		"status_addr": "",
		"bridge_token": "s3cret",
		"shutdown_grace_s": 0,
		"acp_idle_s": 30,
		"acp_max_warm": 2,
		"permission_timeout_s": 60,
		"claim_ttl_s":          2.5,
		"pending_ttl_s":        60,
		"run_retry_attempts":   3,
		"run_retry_window_s":   30,
		"host":                 "laptop",
		"agents": {
			"codex": {
				"command": ["/usr/bin/codex-adapter", "--fast"],
				"cwd": "/tmp",
				"env": {"A": "1"},
				"client": "codex",
				"profile": {"client": "codex", "model": "gpt", "nickname": "cody", "roles": ["coder"]}
			}
		}
	}`
	cfg, warnings, err := Parse(strings.NewReader(in), "/base")
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q, want none", warnings)
	}
	want := Config{
		BridgeURL:               "https://bridge.example:8443",
		CoordinatorID:           "coord",
		StartupMode:             "resume",
		MaxReplyChars:           100,
		ContextWindowSize:       0,
		AdapterTimeout:          1500 * time.Millisecond,
		EnableMentions:          false,
		MentionPrefix:           "+",
		MentionSenders:          []string{"user", "codex"},
		EnableBroadcast:         true,
		BroadcastSenders:        []string{"alice"},
		BroadcastAgents:         []string{"codex"},
		PresenceHeartbeat:       0,
		HumanIDs:                agentbridge.Humans{"user", "alice"},
		MaxConcurrency:          2,
		MaxAgentHops:            3,
		MaxInvocationsPerMinute: 4,
		PrimerPath:              "/etc/primer.md",
		ScenePrimerPath:         "/etc/actor.md",
		StatusAddr:              "",
		BridgeToken:             "s3cret",
		ShutdownGrace:           0,
		ACPIdle:                 30 * time.Second,
		ACPMaxWarm:              2,
		PermissionTimeout:       time.Minute,
		ClaimTTL:                2500 * time.Millisecond,
		PendingTTL:              time.Minute,
		RunRetryAttempts:        3,
		RunRetryWindow:          30 * time.Second,
		Host:                    "laptop",
		Agents: map[string]Agent{"codex": {
			Command: []string{"/usr/bin/codex-adapter", "--fast"},
			Cwd:     "/tmp",
			Env:     map[string]string{"A": "1"},
			Client:  "codex",
			Profile: &agentbridge.Profile{Client: "codex", Model: "gpt", Nickname: "cody", Roles: []string{"coder"}},
		}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config =\n%+v\nwant\n%+v", cfg, want)
	}
}

func TestParse_Paths(t *testing.T) {
	const in = `{
		"primer_path": "docs/primer.md",
		"agents": {
			"rel":   {"command": ["./adapters/echo.sh", "./arg"], "cwd": "work"},
			"abs":   {"command": ["/opt/a.sh"], "cwd": "/srv"},
			"path":  {"command": ["claude", "-p"]},
			"up":    {"command": ["../bin/x"]}
		}
	}`
	cfg, _, err := Parse(strings.NewReader(in), "/etc/ab")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, got, want string }{
		{"primer_path", cfg.PrimerPath, "/etc/ab/docs/primer.md"},
		{"relative command", cfg.Agents["rel"].Command[0], "/etc/ab/adapters/echo.sh"},
		{"arguments untouched", cfg.Agents["rel"].Command[1], "./arg"},
		{"relative cwd", cfg.Agents["rel"].Cwd, "/etc/ab/work"},
		{"absolute command", cfg.Agents["abs"].Command[0], "/opt/a.sh"},
		{"absolute cwd", cfg.Agents["abs"].Cwd, "/srv"},
		{"command looked up in PATH", cfg.Agents["path"].Command[0], "claude"},
		{"cwd defaults to the config folder", cfg.Agents["path"].Cwd, "/etc/ab"},
		{"parent folder", cfg.Agents["up"].Command[0], "/etc/bin/x"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}

	// Without a base folder (a config read from a pipe), paths stay as given.
	cfg, _, err = Parse(strings.NewReader(in), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Agents["rel"].Command[0]; got != "./adapters/echo.sh" {
		t.Errorf("command without base = %q", got)
	}
	if got := cfg.Agents["rel"].Cwd; got != "work" {
		t.Errorf("cwd without base = %q", got)
	}
	if got := cfg.Agents["path"].Cwd; got != "" {
		t.Errorf("default cwd without base = %q, want empty", got)
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		key  string // the ConfigKey of the error
		msg  string // a substring of the message
	}{
		{"not JSON", `{"agents": `, "", "not a JSON object"},
		{"syntax error line", "{\n\"a\": 1,\n}", "", "line 3"},
		{"array", `[]`, "", "not a JSON object"},
		{"null", `null`, "", "not null"},
		{"two values", minimalConfig + ` {}`, "", "more than one JSON value"},
		{"agents missing", `{}`, "agents", "is required"},
		{"agents null", `{"agents": null}`, "agents", "must be an object"},
		{"agents wrong type", `{"agents": []}`, "agents", "must be an object, not an array"},
		{"agent not an object", `{"agents": {"a": "x"}}`, "agents.a", "must be an object, not a string"},
		{"agent null", `{"agents": {"a": null}}`, "agents.a", "command"},
		{"agent name invalid", `{"agents": {"-a": {"command": ["x"]}}}`, "agents.-a", "not a valid participant id"},
		{"command missing", `{"agents": {"a": {}}}`, "agents.a.command", "is required"},
		{"command empty", `{"agents": {"a": {"command": []}}}`, "agents.a.command", "is required"},
		{"command a string", `{"agents": {"a": {"command": "./x.sh"}}}`, "agents.a.command", "must be an array of strings, not a string"},
		{"command with a number", `{"agents": {"a": {"command": ["x", 1]}}}`, "agents.a.command", "array of strings"},
		{"command with empty string", `{"agents": {"a": {"command": [""]}}}`, "agents.a.command", "empty strings"},
		{"cwd wrong type", `{"agents": {"a": {"command": ["x"], "cwd": 1}}}`, "agents.a.cwd", "must be a string, not a number"},
		{"env wrong type", `{"agents": {"a": {"command": ["x"], "env": {"A": 1}}}}`, "agents.a.env", "string values"},
		{"client wrong type", `{"agents": {"a": {"command": ["x"], "client": true}}}`, "agents.a.client", "must be a string, not true/false"},
		{"duplicate client", `{"agents": {"a": {"command": ["x"], "client": "claude"}, "b": {"command": ["y"], "client": "Claude"}}}`, "agents.b.client", "already served by the agent \"a\""},
		{"profile wrong type", `{"agents": {"a": {"command": ["x"], "profile": []}}}`, "agents.a.profile", "must be an object"},
		{"profile roles wrong type", `{"agents": {"a": {"command": ["x"], "profile": {"roles": "r"}}}}`, "agents.a.profile.roles", "array of strings"},
		{"profile model wrong type", `{"agents": {"a": {"command": ["x"], "profile": {"model": 5}}}}`, "agents.a.profile.model", "must be a string"},
		{"bridge_url wrong type", `{"bridge_url": 5111, ` + minimalConfig[1:], "bridge_url", "must be a string, not a number"},
		{"bridge_url not http", `{"bridge_url": "ftp://x", ` + minimalConfig[1:], "bridge_url", "http:// or https://"},
		{"bridge_url no host", `{"bridge_url": "http://", ` + minimalConfig[1:], "bridge_url", "with a host"},
		{"coordinator_id invalid", `{"coordinator_id": "a b", ` + minimalConfig[1:], "coordinator_id", "not a valid participant id"},
		{"startup_mode invalid", `{"startup_mode": "begin", ` + minimalConfig[1:], "startup_mode", `must be "end" or "resume", not "begin"`},
		{"startup_mode wrong type", `{"startup_mode": true, ` + minimalConfig[1:], "startup_mode", "must be a string"},
		{"max_reply_chars too small", `{"max_reply_chars": 10, ` + minimalConfig[1:], "max_reply_chars", "at least 64"},
		{"max_reply_chars fraction", `{"max_reply_chars": 100.5, ` + minimalConfig[1:], "max_reply_chars", "whole number"},
		{"max_reply_chars string", `{"max_reply_chars": "8000", ` + minimalConfig[1:], "max_reply_chars", "must be a number, not a string"},
		{"max_reply_chars huge", `{"max_reply_chars": 1e30, ` + minimalConfig[1:], "max_reply_chars", "whole number"},
		{"max_reply_chars over the bridge's limit", `{"max_reply_chars": 20000000, ` + minimalConfig[1:], "max_reply_chars", "must be at most 160000, not 20000000: a longer reply would not fit the bridge's 1 MiB request limit"},
		{"context_window_size negative", `{"context_window_size": -1, ` + minimalConfig[1:], "context_window_size", "at least 0"},
		{"adapter_timeout_s zero", `{"adapter_timeout_s": 0, ` + minimalConfig[1:], "adapter_timeout_s", "positive"},
		{"adapter_timeout_s negative", `{"adapter_timeout_s": -5, ` + minimalConfig[1:], "adapter_timeout_s", "positive"},
		{"adapter_timeout_s huge", `{"adapter_timeout_s": 1e12, ` + minimalConfig[1:], "adapter_timeout_s", "at most"},
		{"enable_mentions wrong type", `{"enable_mentions": "yes", ` + minimalConfig[1:], "enable_mentions", "true or false"},
		{"mention_prefix empty", `{"mention_prefix": "", ` + minimalConfig[1:], "mention_prefix", "1 to 8 characters"},
		{"mention_prefix letter", `{"mention_prefix": "a", ` + minimalConfig[1:], "mention_prefix", "no letters"},
		{"mention_prefix backtick", "{\"mention_prefix\": \"`\", " + minimalConfig[1:], "mention_prefix", "backticks"},
		{"mention_prefix space", `{"mention_prefix": "@ ", ` + minimalConfig[1:], "mention_prefix", "spaces"},
		{"mention_senders wrong type", `{"mention_senders": "user", ` + minimalConfig[1:], "mention_senders", "array of strings"},
		{"mention_senders invalid id", `{"mention_senders": ["us er"], ` + minimalConfig[1:], "mention_senders", `"us er" is not a valid participant id`},
		{"enable_broadcast wrong type", `{"enable_broadcast": 1, ` + minimalConfig[1:], "enable_broadcast", "true or false"},
		{"broadcast_senders invalid", `{"broadcast_senders": [""], ` + minimalConfig[1:], "broadcast_senders", "not a valid participant id"},
		{"broadcast_agents wrong type", `{"broadcast_agents": {}, ` + minimalConfig[1:], "broadcast_agents", "array of strings"},
		{"presence_heartbeat_s negative", `{"presence_heartbeat_s": -1, ` + minimalConfig[1:], "presence_heartbeat_s", "positive"},
		{"human_ids empty", `{"human_ids": [], ` + minimalConfig[1:], "human_ids", "at least one"},
		{"human_ids invalid", `{"human_ids": ["a/b"], ` + minimalConfig[1:], "human_ids", "not a valid participant id"},
		{"max_concurrency zero", `{"max_concurrency": 0, ` + minimalConfig[1:], "max_concurrency", "at least 1"},
		{"max_agent_hops zero", `{"max_agent_hops": 0, ` + minimalConfig[1:], "max_agent_hops", "at least 1"},
		{"max_invocations_per_minute zero", `{"max_invocations_per_minute": 0, ` + minimalConfig[1:], "max_invocations_per_minute", "at least 1"},
		{"primer_path wrong type", `{"primer_path": ["a"], ` + minimalConfig[1:], "primer_path", "must be a string, not an array"},
		{"status_addr invalid", `{"status_addr": "5112", ` + minimalConfig[1:], "status_addr", "host:port"},
		{"bridge_token wrong type", `{"bridge_token": 1, ` + minimalConfig[1:], "bridge_token", "must be a string"},
		{"shutdown_grace_s negative", `{"shutdown_grace_s": -1, ` + minimalConfig[1:], "shutdown_grace_s", "positive"},
		{"claim_ttl_s zero", `{"claim_ttl_s": 0, ` + minimalConfig[1:], "claim_ttl_s", "positive"},
		{"claim_ttl_s over a day", `{"claim_ttl_s": 90000, ` + minimalConfig[1:], "claim_ttl_s", "at most"},
		{"pending_ttl_s zero", `{"pending_ttl_s": 0, ` + minimalConfig[1:], "pending_ttl_s", "positive"},
		{"host with spaces", `{"host": " laptop", ` + minimalConfig[1:], "host", "machine name"},
		{"run_retry_attempts zero", `{"run_retry_attempts": 0, ` + minimalConfig[1:], "run_retry_attempts", "at least 1"},
		{"an agent named for a human", `{"agents": {"user": {"command": ["x"]}}}`, "agents.user", "human id or a name the bridge reserves"},
		{"an agent with a reserved name", `{"agents": {"Bridge": {"command": ["x"]}}}`, "agents.Bridge", "human id or a name the bridge reserves"},
		{"too many agents", `{"agents": {` + manyAgents(agentbridge.MaxCoordinatorAgents+1) + `}}`, "agents", "at most 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse(strings.NewReader(tt.in), "/base")
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if ce.ConfigKey() != tt.key {
				t.Errorf("key = %q, want %q (err: %v)", ce.ConfigKey(), tt.key, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %q, want it to contain %q", err, tt.msg)
			}
			wantPrefix := "config: "
			if tt.key != "" {
				wantPrefix += tt.key + ": "
			}
			if !strings.HasPrefix(err.Error(), wantPrefix) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %q, want one line starting with %q", err, wantPrefix)
			}
		})
	}
}

func TestParse_NullKeepsDefault(t *testing.T) {
	cfg, _, err := Parse(strings.NewReader(`{"max_concurrency": null, "bridge_token": null, `+minimalConfig[1:]), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxConcurrency != 8 || cfg.BridgeToken != "" {
		t.Fatalf("null did not keep the defaults: %+v", cfg)
	}
}

func TestParse_Warnings(t *testing.T) {
	_, warnings, err := Parse(strings.NewReader(`{"poll_threads_s": 5, "agents": {}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "no agents") {
		t.Fatalf("warnings for no agents = %q", warnings)
	}
}

// TestParse_UnknownKeys checks that an unknown key is refused with
// the nearest known key of its object (contract 6.4), at every level.
func TestParse_UnknownKeys(t *testing.T) {
	for in, want := range map[string]string{
		`{"max_concurency": 3, "agents": {}}`:                                  `config: unknown key "max_concurency"; did you mean "max_concurrency"?`,
		`{"bridge_urll": "x", "agents": {}}`:                                   `config: unknown key "bridge_urll"; did you mean "bridge_url"?`,
		`{"agents": {"a": {"command": ["x"], "comand": 1}}}`:                   `config: unknown key "agents.a.comand"; did you mean "agents.a.command"?`,
		`{"agents": {"a": {"command": ["x"], "profile": {"nick": "n"}}}}`:      `config: unknown key "agents.a.profile.nick"; the keys here are client, model, nickname, roles`,
		`{"agents": {"a": {"command": ["x"], "profile": {"modle": "gpt-5"}}}}`: `config: unknown key "agents.a.profile.modle"; did you mean "agents.a.profile.model"?`,
	} {
		_, _, err := Parse(strings.NewReader(in), "")
		var ce *Error
		if !errors.As(err, &ce) || err.Error() != want {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
	}
}

// TestChangedKeys checks that a reload names the config keys that changed,
// by their names in the file, and only those.
func TestChangedKeys(t *testing.T) {
	a := Default()
	b := Default()
	b.AdapterTimeout++
	b.Agents = map[string]Agent{"echo": a.Agents["echo"], "codex": {Command: []string{"codex.sh"}}}
	if got, want := ChangedKeys(a, b), []string{"adapter_timeout_s", "agents.codex"}; !slices.Equal(got, want) {
		t.Errorf("ChangedKeys = %q, want %q", got, want)
	}
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		if f := ct.Field(i); f.Name != "Path" && f.Tag.Get("config") == "" {
			t.Errorf("Config.%s has no config tag: reload messages would not name it", f.Name)
		}
	}
}

// TestLoad_RepoDefault checks the shipped coordinator.config.json:
// it parses without warnings, spells out every default, and its adapters
// resolve to the scripts in the repository.
func TestLoad_RepoDefault(t *testing.T) {
	root, err := testutil.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "coordinator.config.json")
	cfg, warnings, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q, want none", warnings)
	}
	if cfg.Path != path {
		t.Errorf("Path = %q, want %q", cfg.Path, path)
	}
	want := Default()
	want.PrimerPath = filepath.Join(root, "docs/bridge-agent-primer.md")
	want.ScenePrimerPath = filepath.Join(root, "docs/scene-actor-primer.md")
	want.Path = path
	want.Agents = map[string]Agent{
		"echo": {
			Command: []string{SelfCommand, "adapter", "echo"}, Cwd: root, Client: "echo",
			Profile: &agentbridge.Profile{Client: "echo", Model: "echo"},
		},
		"claude-code": {Command: []string{filepath.Join(root, "adapters/claude_code.sh")}, Cwd: root, Client: "claude",
			Profile: &agentbridge.Profile{Client: "claude", Model: "sonnet"}},
		"codex": {Command: []string{filepath.Join(root, "adapters/codex.sh")}, Cwd: root, Client: "codex",
			Profile: &agentbridge.Profile{Client: "codex", Model: "gpt-5-codex"}},
		"scene-demo": {Command: []string{filepath.Join(root, "adapters/scene-demo.sh")}, Cwd: root, Client: "scene-demo"},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config =\n%+v\nwant\n%+v", cfg, want)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"bridge_url", "coordinator_id", "startup_mode", "max_reply_chars", "context_window_size",
		"adapter_timeout_s", "enable_mentions", "mention_prefix", "mention_senders", "enable_broadcast", "broadcast_senders",
		"broadcast_agents", "presence_heartbeat_s", "human_ids", "max_concurrency", "max_agent_hops",
		"max_invocations_per_minute", "primer_path", "scene_primer_path", "status_addr", "bridge_token", "shutdown_grace_s"} {
		if !strings.Contains(string(raw), `"`+key+`"`) {
			t.Errorf("coordinator.config.json does not spell out %s", key)
		}
	}
}

func TestLoad_Missing(t *testing.T) {
	_, _, err := Load(filepath.Join(t.TempDir(), "nope.json"))
	var ce *Error
	if !errors.As(err, &ce) || ce.ConfigKey() != "" || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want a *Error wrapping os.ErrNotExist", err)
	}
}

func TestLoad_RelativePath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.json"), []byte(`{"agents": {"a": {"command": ["./a.sh"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	cfg, _, err := Load("c.json")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Agents["a"].Command[0], filepath.Join(dir, "a.sh"); got != want {
		t.Errorf("command = %q, want %q", got, want)
	}
	if got, want := cfg.Path, filepath.Join(dir, "c.json"); got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
}

// manyAgents is n agent entries of a config's "agents" object.
func manyAgents(n int) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = fmt.Sprintf(`"a%d": {"command": ["x"]}`, i)
	}
	return strings.Join(entries, ", ")
}

// An agent's fallback chain names participant ids, neither itself nor
// one twice; an agent no entry of this config names is allowed (another
// coordinator may serve it).
func TestFallbackChain(t *testing.T) {
	t.Parallel()
	cfg, _, err := Parse(strings.NewReader(`{"agents": {"claude": {"command": ["x"], "fallback": ["codex", "gemini"]}, "codex": {"command": ["y"]}}}`), ".")
	if err != nil || len(cfg.Agents["claude"].Fallback) != 2 {
		t.Fatalf("Parse = %+v, %v", cfg, err)
	}
	for in, key := range map[string]string{
		`{"agents": {"a": {"command": ["x"], "fallback": ["a"]}}}`:      "agents.a.fallback",
		`{"agents": {"a": {"command": ["x"], "fallback": ["b", "b"]}}}`: "agents.a.fallback",
		`{"agents": {"a": {"command": ["x"], "fallback": ["no way"]}}}`: "agents.a.fallback",
		`{"agents": {"a": {"command": ["x"], "fallback": "b"}}}`:        "agents.a.fallback",
	} {
		_, _, err := Parse(strings.NewReader(in), ".")
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: %v, want an error naming %s", in, err, key)
		}
	}
}
