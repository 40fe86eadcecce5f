package coordinator_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// withWorkspace gives the stack's config the workspace "app" on repo, and
// names it on the agent entries agents.
func withWorkspace(repo string, agents ...string) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.Workspaces = map[string]config.Workspace{"app": {Repo: repo, Base: "main"}}
		for _, a := range agents {
			e := cfg.Agents[a]
			e.Workspace = "app"
			cfg.Agents[a] = e
		}
	}
}

// changeOf is e's meta.change, failing the test when it has none.
func changeOf(t testing.TB, e agentbridge.Event) agentbridge.Change {
	t.Helper()
	ch, ok := agentbridge.ChangeOf(e)
	if !ok {
		t.Fatalf("event %s (%q) carries no meta.change: %s", e.ID, e.Text(), e.Meta.Extra)
	}
	return ch
}

// waitNotice waits for the coordinator's notice answering control event
// id and returns it.
func (s *stack) waitNotice(thread, id string) agentbridge.Event {
	s.t.Helper()
	return s.waitTagged(thread, id, "change", "the notice answering "+id)
}

// attachment downloads attachment id and returns its bytes and type.
func (s *stack) attachment(id string) (string, string) {
	s.t.Helper()
	rc, a, err := s.cl.DownloadAttachment(context.Background(), id)
	if err != nil {
		s.t.Fatalf("download attachment %q: %v", id, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b), a.Type
}

// TestWorkspaceChangeMergeDiscard runs two agents in one workspace: each
// in a worktree of its own on a branch of its own, with the workspace in
// its payload; a run that changed files replies with meta.change (files,
// +/−, commit, parent) and one that changed nothing without; merging one
// lands it in the repository and removes its worktree and branch, merging
// the other, which conflicts, changes nothing and says which file, a
// dirty repository and one on another branch are refused, and a discard
// removes the branch.
func TestWorkspaceChangeMergeDiscard(t *testing.T) {
	t.Parallel()
	repo := testutil.GitRepo(t, map[string]string{"a.txt": "one\n", "b.txt": "two\n", "c.txt": "three\n"})
	s := startStack(t, withWorkspace(repo, "alice", "bob"))
	th := s.thread("ws")
	s.invite(th, "alice", agentbridge.Profile{})
	s.invite(th, "bob", agentbridge.Profile{})

	e1 := s.say(th, "alice", "fake:write=a.txt=alice_was_here fake:say=Changed_a.txt_for_you")
	r1 := s.waitReplies(th, e1.ID, 1)[0]
	ch := changeOf(t, r1)
	if ch.Workspace != "app" || ch.Branch != "agent-bridge/ws/alice" || ch.Base != "main" || ch.Parent == "" || ch.Commit == ch.Parent ||
		!slices.Equal(ch.Files, []agentbridge.ChangeFile{{Path: "a.txt", Status: agentbridge.ChangeModified, Added: 1, Removed: 1}}) ||
		ch.Added != 1 || ch.Removed != 1 {
		t.Fatalf("alice's change = %+v", ch)
	}
	if diff, typ := s.attachment(ch.Diff); !strings.HasPrefix(typ, agentbridge.DiffType) || !strings.Contains(diff, "+alice was here") || !strings.Contains(diff, "-one") || ch.DiffTruncated {
		t.Errorf("alice's diff attachment (%s, truncated %v):\n%s", typ, ch.DiffTruncated, diff)
	}
	msg := testutil.Git(t, repo, "log", "-1", "--format=%an <%ae>%n%B", ch.Commit)
	for _, want := range []string{"alice <alice@agent-bridge.invalid>", "Changed a.txt for you", "Agent-Bridge-Thread: " + th, "Agent-Bridge-Event: " + e1.ID} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit %q lacks %q", msg, want)
		}
	}
	var p struct {
		Workspace struct{ Name, Path, Branch, Base string } `json:"workspace"`
	}
	raw, err := os.ReadFile(filepath.Join(s.fakeDir, e1.ID+"-alice.json"))
	if err != nil || json.Unmarshal(raw, &p) != nil {
		t.Fatalf("payload: %v", err)
	}
	if p.Workspace.Name != "app" || p.Workspace.Branch != ch.Branch || p.Workspace.Base != "main" || !strings.HasPrefix(p.Workspace.Path, filepath.Join(s.dir, "worktrees", th)) {
		t.Errorf("payload workspace = %+v", p.Workspace)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "a.txt")); string(b) != "one\n" {
		t.Errorf("the repository's own a.txt changed before a merge: %q", b)
	}

	e2 := s.say(th, "alice", "fake:say=nothing_to_change")
	if r := s.waitReplies(th, e2.ID, 1)[0]; r.Meta.Extra[agentbridge.MetaChange] != nil {
		t.Errorf("a run that changed nothing carries meta.change: %s", r.Meta.Extra[agentbridge.MetaChange])
	}
	e3 := s.say(th, "bob", "fake:write=a.txt=bob_was_here fake:write=d.txt=new")
	bobCh := changeOf(t, s.waitReplies(th, e3.ID, 1)[0])
	if bobCh.Branch != "agent-bridge/ws/bob" || len(bobCh.Files) != 2 || bobCh.Parent != ch.Parent {
		t.Fatalf("bob's change = %+v", bobCh)
	}

	// A dirty repository, then one on another branch, are refused.
	if err := os.WriteFile(filepath.Join(repo, "b.txt"), []byte("dirty\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m0 := s.control(th, "user", map[string]any{"change": map[string]any{"merge": map[string]any{"participant": "alice"}}})
	if n := s.waitNotice(th, m0.ID); !strings.Contains(n.Text(), "uncommitted changes") {
		t.Errorf("merge into a dirty repository: %q", n.Text())
	}
	testutil.Git(t, repo, "checkout", "-q", "--", "b.txt")
	testutil.Git(t, repo, "checkout", "-q", "-b", "elsewhere")
	m1 := s.control(th, "user", map[string]any{"change": map[string]any{"merge": map[string]any{"participant": "alice"}}})
	if n := s.waitNotice(th, m1.ID); !strings.Contains(n.Text(), "not on main") {
		t.Errorf("merge into a repository on another branch: %q", n.Text())
	}
	testutil.Git(t, repo, "checkout", "-q", "main")

	m2 := s.control(th, "user", map[string]any{"change": map[string]any{"merge": map[string]any{"participant": "alice"}}})
	n2 := s.waitNotice(th, m2.ID)
	if !strings.Contains(n2.Text(), "Merged alice's change into main") {
		t.Fatalf("merge notice = %q", n2.Text())
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "a.txt")); string(b) != "alice was here\n" {
		t.Errorf("a.txt after the merge = %q", b)
	}
	testutil.WaitFor(t, waitLong, "alice's worktree and branch removed", func() bool {
		return !strings.Contains(testutil.Git(t, repo, "worktree", "list"), "alice") && testutil.Git(t, repo, "branch", "--list", "agent-bridge/ws/alice") == ""
	})
	if testutil.Git(t, repo, "branch", "--list", "agent-bridge/ws/bob") == "" {
		t.Error("bob's branch went with alice's merge")
	}
	head := testutil.Git(t, repo, "rev-parse", "HEAD")
	m3 := s.control(th, "user", map[string]any{"change": map[string]any{"merge": map[string]any{"participant": "bob"}}})
	n3 := s.waitNotice(th, m3.ID)
	if !strings.Contains(n3.Text(), "conflicts in a.txt") || testutil.Git(t, repo, "rev-parse", "HEAD") != head || testutil.Git(t, repo, "status", "--porcelain") != "" {
		t.Errorf("conflicting merge: notice %q; the repository must not change", n3.Text())
	}
	d := s.control(th, "user", map[string]any{"change": map[string]any{"discard": map[string]any{"participant": "bob"}}})
	if n := s.waitNotice(th, d.ID); !strings.Contains(n.Text(), "Discarded bob's change") {
		t.Errorf("discard notice = %q", n.Text())
	}
	testutil.WaitFor(t, waitLong, "bob's branch removed", func() bool {
		return testutil.Git(t, repo, "branch", "--list", "agent-bridge/*") == "" && !strings.Contains(testutil.Git(t, repo, "worktree", "list"), "worktrees")
	})
	// One notice per control, no more.
	count := 0
	for _, e := range s.events(th) {
		if e.Meta.HasTag("change") {
			count++
		}
	}
	if count != 5 {
		t.Errorf("%d change notices, want 5", count)
	}
}

// TestRealACPEditsItsWorktree: the real claude-agent-acp, its session's
// cwd the pair's worktree, edits a file there with its own Read and Write
// tools (the fake model's fakemodel.WriteFile), and the change reaches the
// thread as any adapter's does: a commit on its branch, meta.change, the
// diff attachment; the repository's own work tree is untouched.
func TestRealACPEditsItsWorktree(t *testing.T) {
	ra := realAgents[0] // claude-agent-acp
	argv := ra.argv(t)
	repo := testutil.GitRepo(t, map[string]string{"a.txt": "one\n", "b.txt": "two\n"})
	s := newStack(t)
	s.patience = waitReal
	m := fakemodel.Start(t, "")
	m.SetResponder(fakemodel.WriteFile)
	s.exe = agentBridgeBin(t)
	s.cfg.Workspaces = map[string]config.Workspace{"app": {Repo: repo, Base: "main"}}
	s.cfg.Agents["acpy"] = config.Agent{ACP: argv, Env: ra.env(t, m), Permissions: config.PermissionsAllow, Workspace: "app"}
	s.cfg.AdapterTimeout = 2 * time.Minute
	s.startCoordinator()
	th := s.thread("acp-ws")
	s.invite(th, "acpy", agentbridge.Profile{Client: ra.name})
	e := s.say(th, "acpy", "Please change a.txt. "+fakemodel.WriteMarker+"a.txt=edited_over_acp")
	r := s.waitReplies(th, e.ID, 1)[0]
	ch := changeOf(t, r)
	if ch.Branch != "agent-bridge/acp-ws/acpy" || len(ch.Files) != 1 || ch.Files[0].Path != "a.txt" {
		t.Fatalf("change = %+v (reply %q)", ch, r.Text())
	}
	if diff, _ := s.attachment(ch.Diff); !strings.Contains(diff, "+edited over acp") {
		t.Errorf("diff = %s", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "a.txt")); string(b) != "one\n" {
		t.Errorf("the repository's own a.txt = %q", b)
	}
}
