package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestParse_ACP: an "acp" entry (contract 6.6) with its keys, its
// defaults, and the mistakes that exit 2 naming the key.
func TestParse_ACP(t *testing.T) {
	cfg, warnings, err := Parse(strings.NewReader(`{
		"_comment": "keys starting with _ are comments",
		"agents": {
			"claude-acp": {"acp": ["./bin/claude-agent-acp", "--x"], "env": {"IS_SANDBOX": "1"}, "workdir": "work",
				"permissions": "allow", "acp_fs": true, "client": "claude-acp", "_note": "a comment too"},
			"codex-acp": {"acp": ["codex-acp"]}
		},
		"_examples": {"gemini": {"acp": ["gemini", "--acp"]}}
	}`), "/base")
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q, want none (comments are quiet)", warnings)
	}
	want := Agent{ACP: []string{"/base/bin/claude-agent-acp", "--x"}, Env: map[string]string{"IS_SANDBOX": "1"},
		Workdir: "/base/work", Permissions: PermissionsAllow, ACPFS: true, Client: "claude-acp", Cwd: "/base"}
	if got := cfg.Agents["claude-acp"]; !reflect.DeepEqual(got, want) {
		t.Errorf("claude-acp = %+v, want %+v", got, want)
	}
	if got := cfg.Agents["codex-acp"]; got.Permissions != PermissionsAsk || got.ACPFS || got.Workdir != "" {
		t.Errorf("codex-acp defaults = %+v", got)
	}
	if cfg.ACPIdle.Seconds() != 600 || cfg.ACPMaxWarm != 8 || cfg.PermissionTimeout.Seconds() != 3600 {
		t.Errorf("defaults: acp_idle_s %v, acp_max_warm %d, permission_timeout_s %v", cfg.ACPIdle, cfg.ACPMaxWarm, cfg.PermissionTimeout)
	}
	for in, key := range map[string]string{
		`{"agents": {"a": {"acp": []}}}`:                                "agents.a.acp",
		`{"agents": {"a": {"acp": [""]}}}`:                              "agents.a.acp",
		`{"agents": {"a": {"acp": ["x"], "command": ["y"]}}}`:           "agents.a.acp",
		`{"agents": {"a": {"acp": ["x"], "permissions": "maybe"}}}`:     "agents.a.permissions",
		`{"agents": {"a": {"acp": "x"}}}`:                               "agents.a.acp",
		`{"acp_max_warm": 0, "agents": {}}`:                             "acp_max_warm",
		`{"acp_idle_s": -1, "agents": {}}`:                              "acp_idle_s",
		`{"permission_timeout_s": "soon", "agents": {}}`:                "permission_timeout_s",
		`{"agents": {"a": {"acp": ["x"], "acp_fs": "yes"}}}`:            "agents.a.acp_fs",
		`{"agents": {"a": {"workdir": "w"}}}`:                           "agents.a.command",
		`{"agents": {"a": {"command": ["y"], "workdir": "w"}}}`:         "agents.a.workdir",
		`{"agents": {"a": {"command": ["y"], "permissions": "allow"}}}`: "agents.a.permissions",
		`{"agents": {"a": {"command": ["y"], "acp_fs": true}}}`:         "agents.a.acp_fs",
		`{"agents": {"a": {"acp": ["x"], "cwd": "w"}}}`:                 "agents.a.cwd",
	} {
		_, _, err := Parse(strings.NewReader(in), "/base")
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: err = %v, want a Error on %s", in, err, key)
		}
	}
}
