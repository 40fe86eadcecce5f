package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestTrackerStagesWhatChanged: a worktree watched by a Tracker, changed
// step by step as agents change files (edits, new files and folders,
// deletions, renames, a folder moved, a file made and gone, an ignored file, a mode, the
// agent's git status (which rewrites the index) and its own git add, a file in a folder git had nothing of, a
// .gitignore that stops ignoring a file), is committed after each step
// with nothing left unstaged, as the whole-worktree staging would leave
// it, and by name where the tracker can vouch for its list.
func TestTrackerStagesWhatChanged(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the tracker uses inotify")
	}
	ctx := context.Background()
	repo := testutil.GitRepo(t, map[string]string{"a.txt": "a\n", "src/b.txt": "b\n", "src/deep/c.txt": "c\n",
		"old/d.txt": "d\n", "old/e.txt": "e\n", ".gitignore": "*.log\n"})
	var g Git
	tr := tree(t, repo, "claude")
	if err := g.Ensure(ctx, tr); err != nil {
		t.Fatal(err)
	}
	trk, err := NewTracker(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer trk.Close()
	if err := trk.Watch(tr); err != nil {
		t.Fatal(err)
	}
	in := func(p string) string { return filepath.Join(tr.Path, filepath.FromSlash(p)) }
	steps := []struct {
		name   string
		change func()
		byName bool
	}{
		{"the first commit after the watch began", func() { write(t, in("a.txt"), "A\n") }, false},
		{"edits", func() { write(t, in("src/b.txt"), "B\n"); write(t, in("src/deep/c.txt"), "C\n") }, true},
		{"nothing", func() {}, true},
		{"a new file and a new folder", func() { write(t, in("src/n.txt"), "n\n"); write(t, in("x/y/z.txt"), "z\n") }, true},
		{"in the new folder", func() { write(t, in("x/y/z2.txt"), "z2\n") }, true},
		{"a deletion and a folder removed", func() { rm(t, in("a.txt")); rm(t, in("old")) }, true},
		{"a rename", func() { mv(t, in("src/n.txt"), in("src/deep/m.txt")) }, true},
		{"a file made and gone", func() {
			write(t, in("src/tmp.txt"), "t\n")
			rm(t, in("src/tmp.txt"))
			write(t, in("src/b.txt"), "BB\n")
		}, true},
		{"an empty folder", func() { mk(t, in("empty")) }, true},
		{"a file in it", func() { write(t, in("empty/f.txt"), "f\n") }, true},
		{"a mode", func() { chmod(t, in("src/b.txt"), 0o755) }, true},
		{"the agent's git status", func() { testutil.Git(t, tr.Path, "status"); write(t, in("src/b.txt"), "B2\n") }, true},
		{"the Excluded folder", func() { write(t, in(Excluded+"/shot.png"), "png") }, true},
		{"an ignored file", func() { write(t, in("src/debug.log"), "l\n"); write(t, in("src/b.txt"), "BBB\n") }, false},
		{"the agent's own git add and rm", func() {
			write(t, in("staged.txt"), "s\n")
			testutil.Git(t, tr.Path, "add", "staged.txt")
			testutil.Git(t, tr.Path, "rm", "-q", "--cached", "src/deep/c.txt")
		}, false},
		{"a .gitignore that stops ignoring", func() { write(t, in(".gitignore"), "") }, false},
		{"after it", func() { write(t, in("src/debug.log"), "l2\n") }, true},
		{"a folder moved", func() { mv(t, in("x/y"), in("x/w")) }, false},
		{"in the moved folder", func() { write(t, in("x/w/z3.txt"), "z3\n") }, true},
	}
	for i, st := range steps {
		st.change()
		byName, err := g.stage(ctx, trk, tr)
		if err != nil {
			t.Fatalf("%s: stage: %v", st.name, err)
		}
		_, tree, err := g.commitIndex(ctx, tr, Commit{Author: "claude", Subject: st.name, Thread: "T1", Event: fmt.Sprint("E", i), When: time.Now()})
		if err != nil {
			t.Fatalf("%s: commit: %v", st.name, err)
		}
		trk.committed(tr, tree)
		if byName != st.byName {
			t.Errorf("%s: staged by name %v, want %v", st.name, byName, st.byName)
		}
		if left := testutil.Git(t, tr.Path, "status", "--porcelain", "--untracked-files=all", "--", ".", ":(exclude)"+Excluded); strings.TrimSpace(left) != "" {
			t.Fatalf("%s: left unstaged:\n%s", st.name, left)
		}
	}
	// The file the agent unstaged is still in the worktree: staged
	// again, as staging everything would.
	files := strings.Fields(testutil.Git(t, tr.Path, "ls-tree", "-r", "--name-only", "HEAD"))
	for _, want := range []string{"src/deep/m.txt", "x/w/z2.txt", "x/w/z3.txt", "empty/f.txt", "staged.txt", "src/debug.log", "src/deep/c.txt"} {
		if !slices.Contains(files, want) {
			t.Errorf("HEAD lacks %s: %v", want, files)
		}
	}
	for _, gone := range []string{"a.txt", "old/d.txt", "src/n.txt", "src/tmp.txt", Excluded + "/shot.png"} {
		if slices.Contains(files, gone) {
			t.Errorf("HEAD holds %s: %v", gone, files)
		}
	}
}

// TestTrackerAfterAKill: a coordinator killed while its tracker waited
// for a mark leaves the mark file in its state folder; the next
// process's tracker, counting its marks from 1 again, still gets every
// mark's event (a leftover file would give none, and a commit would wait
// for it forever).
func TestTrackerAfterAKill(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the tracker uses inotify")
	}
	dir := t.TempDir()
	mk(t, filepath.Join(dir, ".marks"))
	for _, name := range []string{"m1", "m2"} {
		write(t, filepath.Join(dir, ".marks", name), "")
	}
	trk, err := NewTracker(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer trk.Close()
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := trk.sync(ctx)
		cancel()
		if err != nil {
			t.Fatalf("sync %d: %v", i+1, err)
		}
	}
}

func rm(t *testing.T, p string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
}

func mv(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func mk(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}
