package config

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestWorkspacesConfig: workspaces parse with their repo resolved against
// the config's folder and their base; a wrong key, a bad name or base, an
// agent naming a workspace the config lacks, a missing repo and a folder
// that is not a git work tree are errors naming the key; WorkspaceFor and
// ResolveAgent follow the thread's pick.
func TestWorkspacesConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	repo := filepath.Join(dir, "app")
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	good := `{"agents": {"claude": {"command": ["x"], "workspace": "app"}, "codex": {"command": ["x"]}},
		"workspaces": {"app": {"repo": "app", "base": "main"}, "web": {"repo": "` + repo + `"}}}`
	path := filepath.Join(dir, "c.json")
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Workspaces["app"]; w.Repo != repo || w.Base != "main" || cfg.Agents["claude"].Workspace != "app" || cfg.Workspaces["web"].Base != "" {
		t.Fatalf("workspaces = %+v, claude = %+v", cfg.Workspaces, cfg.Agents["claude"])
	}
	for _, c := range []struct{ body, key string }{
		{`{"agents": {}, "workspaces": {"app": {"repo": "app", "bas": "main"}}}`, `workspaces.app.bas`},
		{`{"agents": {}, "workspaces": {"a/b": {"repo": "app"}}}`, "workspaces.a/b"},
		{`{"agents": {}, "workspaces": {"app": {}}}`, "workspaces.app.repo"},
		{`{"agents": {}, "workspaces": {"app": {"repo": "app", "base": "-x"}}}`, "workspaces.app.base"},
		{`{"agents": {"c": {"command": ["x"], "workspace": "nope"}}, "workspaces": {}}`, "agents.c.workspace"},
		{`{"agents": {"c": {"command": ["x"], "workspace": "../etc"}}}`, "agents.c.workspace"},
		{`{"agents": {}, "workspaces": {"app": {"repo": "missing"}}}`, "workspaces.app.repo"},
		{`{"agents": {}, "workspaces": {"app": {"repo": "."}}}`, "workspaces.app.repo"},
	} {
		if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := Load(path)
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: error %v, want one naming %s", c.body, err, c.key)
		}
	}
	st := agentbridge.ThreadState{}
	if w := cfg.WorkspaceFor("claude", "claude", st); w != "app" {
		t.Errorf("claude's own workspace = %q", w)
	}
	st.Workspace = "web"
	if w := cfg.WorkspaceFor("codex", "codex", st); w != "web" {
		t.Errorf("the thread's workspace = %q", w)
	}
	st.Participants.Invited = []agentbridge.Invite{{ID: "codex", Profile: agentbridge.Profile{Workspace: "other"}}}
	if _, ok := cfg.ResolveAgent("codex", st); ok || cfg.MissingWorkspace("codex", st) != "other" {
		t.Errorf("codex invited into a workspace this config lacks is served here")
	}
	if a, ok := cfg.ResolveAgent("claude", st); !ok || a != "claude" {
		t.Errorf("claude in web: %q %v", a, ok)
	}
}
