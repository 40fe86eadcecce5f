package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

func write(t testing.TB, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tree(t testing.TB, repo, participant string) Tree {
	return Tree{Repo: repo, Path: TreePath(filepath.Join(t.TempDir(), "worktrees"), "T1", participant),
		Branch: BranchName("T1", "Fix the login", participant), Base: "main"}
}

// TestWorktreeCommitAndFiles makes a worktree, commits a run's change
// (a modified file, a new one, an ignored one left out, the .agent-bridge
// folder left out, a deleted one) and reads it back as files and a diff.
func TestWorktreeCommitAndFiles(t *testing.T) {
	ctx := context.Background()
	repo := testutil.GitRepo(t, map[string]string{"a.txt": "one\ntwo\n", "gone.txt": "x\n", ".gitignore": "*.log\n"})
	var g Git
	tr := tree(t, repo, "claude")
	if tr.Branch != "agent-bridge/fix-the-login/claude" {
		t.Fatalf("branch = %q", tr.Branch)
	}
	if err := g.Ensure(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if err := g.Ensure(ctx, tr); err != nil { // idempotent
		t.Fatal(err)
	}
	parent, err := g.Head(ctx, tr.Path)
	if err != nil {
		t.Fatal(err)
	}
	same, err := g.CommitAll(ctx, tr, Commit{Author: "claude", Subject: "nothing", Thread: "T1", Event: "E1", When: time.Now()})
	if err != nil || same != parent {
		t.Fatalf("commit of nothing = %q, %v; want HEAD %q", same, err, parent)
	}
	write(t, filepath.Join(tr.Path, "a.txt"), "one\nTWO\nthree\n")
	write(t, filepath.Join(tr.Path, "new.txt"), "hello\n")
	write(t, filepath.Join(tr.Path, "debug.log"), "ignored\n")
	write(t, filepath.Join(tr.Path, Excluded, "attachments", "shot.png"), "png")
	if err := os.Remove(filepath.Join(tr.Path, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	commit, err := g.CommitAll(ctx, tr, Commit{Author: "claude", Subject: Subject("Fixed it\nmore", "x"), Thread: "T1", Event: "E1", When: time.Now()})
	if err != nil || commit == parent {
		t.Fatalf("commit = %q, %v", commit, err)
	}
	msg := testutil.Git(t, tr.Path, "log", "-1", "--format=%an <%ae>%n%B")
	for _, want := range []string{"claude <claude@agent-bridge.invalid>", "Fixed it", "Agent-Bridge-Thread: T1", "Agent-Bridge-Event: E1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message %q lacks %q", msg, want)
		}
	}
	files, added, removed, err := g.Files(ctx, tr.Path, parent, commit)
	if err != nil {
		t.Fatal(err)
	}
	want := []agentbridge.ChangeFile{
		{Path: "a.txt", Status: agentbridge.ChangeModified, Added: 2, Removed: 1},
		{Path: "gone.txt", Status: agentbridge.ChangeDeleted, Added: 0, Removed: 1},
		{Path: "new.txt", Status: agentbridge.ChangeAdded, Added: 1, Removed: 0},
	}
	if !slices.Equal(files, want) || added != 3 || removed != 2 {
		t.Errorf("files = %+v (+%d −%d), want %+v (+3 −2)", files, added, removed, want)
	}
	diff, cut, err := g.Diff(ctx, tr.Path, parent, commit, 1<<20)
	if err != nil || cut || !strings.Contains(string(diff), "+TWO") || strings.Contains(string(diff), "debug.log") {
		t.Errorf("diff = %q cut %v err %v", diff, cut, err)
	}
	short, cut, err := g.Diff(ctx, tr.Path, parent, commit, 40)
	if err != nil || !cut || len(short) != 40 {
		t.Errorf("diff cut at 40 = %d bytes, cut %v, err %v", len(short), cut, err)
	}
	// The repository's own work tree is untouched.
	if b, _ := os.ReadFile(filepath.Join(repo, "a.txt")); string(b) != "one\ntwo\n" {
		t.Errorf("repo's a.txt = %q", b)
	}
}

// TestRenameFiles reads a rename as one renamed file.
func TestRenameFiles(t *testing.T) {
	ctx := context.Background()
	repo := testutil.GitRepo(t, map[string]string{"old.txt": "same content here\nand more\n"})
	var g Git
	tr := tree(t, repo, "codex")
	if err := g.Ensure(ctx, tr); err != nil {
		t.Fatal(err)
	}
	parent, _ := g.Head(ctx, tr.Path)
	if err := os.Rename(filepath.Join(tr.Path, "old.txt"), filepath.Join(tr.Path, "new.txt")); err != nil {
		t.Fatal(err)
	}
	commit, err := g.CommitAll(ctx, tr, Commit{Author: "codex", Thread: "T1", Event: "E2", When: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	files, _, _, err := g.Files(ctx, tr.Path, parent, commit)
	if err != nil || len(files) != 1 || files[0] != (agentbridge.ChangeFile{Path: "new.txt", From: "old.txt", Status: agentbridge.ChangeRenamed}) {
		t.Errorf("files = %+v, %v", files, err)
	}
}

// TestMergeConflictAndRemove merges one branch into main, refuses a
// second that conflicts (listing the file, changing nothing), refuses a
// dirty repository and one on another branch, and removes a worktree and
// its branch twice over.
func TestMergeConflictAndRemove(t *testing.T) {
	ctx := context.Background()
	repo := testutil.GitRepo(t, map[string]string{"f.txt": "line\n"})
	var g Git
	a, b := tree(t, repo, "a"), tree(t, repo, "b")
	for i, tr := range []Tree{a, b} {
		if err := g.Ensure(ctx, tr); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(tr.Path, "f.txt"), []string{"A\n", "B\n"}[i])
		if _, err := g.CommitAll(ctx, tr, Commit{Author: "x", Thread: "T", Event: "E", When: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	m := Merge{Repo: repo, Into: "main", Branch: a.Branch, Message: "merge a\n", Who: "user", When: time.Now()}
	if err := g.CheckRepo(ctx, repo, "main"); err != nil {
		t.Fatal(err)
	}
	commit, from, err := g.MergeCommit(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.FastForward(ctx, repo, "main", from, commit); err != nil {
		t.Fatal(err)
	}
	if err := g.FastForward(ctx, repo, "main", from, commit); err != nil { // idempotent
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "f.txt")); string(b) != "A\n" {
		t.Fatalf("repo's f.txt after the merge = %q", b)
	}
	if parents := testutil.Git(t, repo, "log", "-1", "--format=%P"); len(strings.Fields(parents)) != 2 {
		t.Errorf("merge commit parents = %q, want two", parents)
	}
	head := testutil.Git(t, repo, "rev-parse", "HEAD")
	_, _, err = g.MergeCommit(ctx, Merge{Repo: repo, Into: "main", Branch: b.Branch, Message: "m", Who: "user", When: time.Now()})
	var r *Refused
	if !errors.As(err, &r) || !slices.Equal(r.Conflicts, []string{"f.txt"}) {
		t.Fatalf("conflicting merge = %v, want a refusal listing f.txt", err)
	}
	if got := testutil.Git(t, repo, "rev-parse", "HEAD"); got != head || testutil.Git(t, repo, "status", "--porcelain") != "" {
		t.Errorf("a conflict changed the repository")
	}
	write(t, filepath.Join(repo, "f.txt"), "dirty\n")
	if err := g.CheckRepo(ctx, repo, "main"); !errors.As(err, &r) || !strings.Contains(r.Reason, "uncommitted") {
		t.Errorf("dirty repo = %v", err)
	}
	testutil.Git(t, repo, "checkout", "-q", "--", "f.txt")
	testutil.Git(t, repo, "checkout", "-q", "-b", "other")
	if err := g.CheckRepo(ctx, repo, "main"); !errors.As(err, &r) || !strings.Contains(r.Reason, "on branch other") {
		t.Errorf("repo on another branch = %v", err)
	}
	for range 2 {
		if err := g.Remove(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := g.Exists(ctx, a); ok {
		t.Error("worktree a still exists after Remove")
	}
	if list := testutil.Git(t, repo, "worktree", "list"); strings.Contains(list, a.Path) || !strings.Contains(list, b.Path) {
		t.Errorf("worktree list = %s", list)
	}
}

// TestEnsureAfterCrash makes a worktree again whose folder a crash left
// half-made, and one whose folder is gone but whose branch (with its
// commits) is kept.
func TestEnsureAfterCrash(t *testing.T) {
	ctx := context.Background()
	repo := testutil.GitRepo(t, map[string]string{"f.txt": "x\n"})
	var g Git
	tr := tree(t, repo, "c")
	write(t, filepath.Join(tr.Path, "junk"), "half made") // a folder git does not know
	if err := g.Ensure(ctx, tr); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(tr.Path, "f.txt"), "y\n")
	commit, err := g.CommitAll(ctx, tr, Commit{Author: "c", Thread: "T", Event: "E", When: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(tr.Path); err != nil {
		t.Fatal(err)
	}
	if err := g.Ensure(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if head, _ := g.Head(ctx, tr.Path); head != commit {
		t.Errorf("worktree made again at %s, want the branch's %s", head, commit)
	}
	write(t, filepath.Join(tr.Path, "f.txt"), "half\n")
	write(t, filepath.Join(tr.Path, "new"), "half\n")
	if err := g.ResetTo(ctx, tr, commit); err != nil {
		t.Fatal(err)
	}
	if st := testutil.Git(t, tr.Path, "status", "--porcelain"); st != "" {
		t.Errorf("status after reset = %q", st)
	}
}

func FuzzParseRawNumstat(f *testing.F) {
	f.Add([]byte(":100644 100644 422c2b7 6372083 M\x00f\x00:100644 100644 587be6b 587be6b R100\x00g\x00h\x00:000000 100644 0000000 3e75765 A\x00n\x002\t1\tf\x000\t0\t\x00g\x00h\x001\t0\tn\x00"))
	f.Add([]byte(":100644 100644 a b M\x00bin\x00-\t-\tbin\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := ParseRawNumstat(b)
		if err != nil {
			return
		}
		for _, x := range files {
			switch x.Status {
			case agentbridge.ChangeAdded, agentbridge.ChangeDeleted, agentbridge.ChangeModified, agentbridge.ChangeRenamed:
			default:
				t.Fatalf("status %q", x.Status)
			}
		}
	})
}
