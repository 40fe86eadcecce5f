package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
)

// Tree is one participant's worktree of a workspace in a thread.
type Tree struct {
	// Repo is the workspace's repository (its own work tree).
	Repo string
	// Path is the worktree's folder, under the coordinator's state folder.
	Path string
	// Branch is the worktree's branch, agent-bridge/<thread>/<participant>.
	Branch string
	// Base is the branch it started from.
	Base string
}

// BranchPrefix starts every branch the coordinator makes.
const BranchPrefix = "agent-bridge/"

// BranchName is the branch of participant's worktree in a thread: the
// thread's name as a slug, else its id, then the participant, each made
// safe for a ref name.
func BranchName(threadID, threadName, participant string) string {
	t := slug(threadName)
	if t == "" {
		t = slug(threadID)
	}
	return BranchPrefix + t + "/" + RefPart(participant)
}

// slug is s lowercased with every run of other characters than letters
// and digits made one dash, at most 40 characters, without a leading or
// trailing dash.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

// RefPart is a participant id made a safe ref component and folder name:
// ":" and "@" (valid in ids, not in refs) become "-".
func RefPart(p string) string {
	r := strings.NewReplacer(":", "-", "@", "-").Replace(p)
	r = strings.TrimLeft(r, ".-")
	r = strings.TrimSuffix(r, ".lock")
	if r == "" {
		r = "agent"
	}
	return r
}

// TreePath is the folder of participant's worktree in a thread under dir
// (the coordinator's worktrees folder).
func TreePath(dir, threadID, participant string) string {
	return filepath.Join(dir, threadID, RefPart(participant))
}

// Ensure makes t's worktree when it is not there yet: on its branch when
// the branch exists (a worktree made before, whose folder a crash or a
// person removed), else on a new branch from the tip of t.Base. It is
// idempotent: a worktree that is there is left as it is, and a half-made
// one (a crash in the middle of "git worktree add") is pruned and made
// again.
func (g Git) Ensure(ctx context.Context, t Tree) error {
	if ok, err := g.isTree(ctx, t); err != nil || ok {
		return err
	}
	if _, err := g.run(ctx, t.Repo, "worktree", "prune"); err != nil {
		return err
	}
	// A folder git does not count as the worktree is a leftover of a
	// crash: the path is the coordinator's own, under its state folder.
	if err := os.RemoveAll(t.Path); err != nil {
		return fmt.Errorf("remove the leftover worktree folder %s: %w", t.Path, err)
	}
	if err := os.MkdirAll(filepath.Dir(t.Path), 0o755); err != nil {
		return fmt.Errorf("create the worktrees folder: %w", err)
	}
	tip, err := g.Resolve(ctx, t.Repo, "refs/heads/"+t.Branch)
	if err != nil {
		return err
	}
	if tip != "" {
		_, err = g.run(ctx, t.Repo, "worktree", "add", "--quiet", t.Path, t.Branch)
	} else {
		_, err = g.run(ctx, t.Repo, "worktree", "add", "--quiet", "-b", t.Branch, t.Path, "refs/heads/"+t.Base)
	}
	return err
}

// isTree reports whether t.Path is a worktree of t.Repo on t.Branch.
func (g Git) isTree(ctx context.Context, t Tree) (bool, error) {
	if _, err := os.Stat(filepath.Join(t.Path, ".git")); err != nil {
		return false, nil
	}
	b, err := g.CurrentBranch(ctx, t.Path)
	if err != nil {
		// Not a work tree git knows (its repository was pruned).
		return false, nil
	}
	return b == t.Branch, nil
}

// Exists reports whether t's worktree or branch is still there.
func (g Git) Exists(ctx context.Context, t Tree) (bool, error) {
	if _, err := os.Stat(t.Path); err == nil {
		return true, nil
	}
	tip, err := g.Resolve(ctx, t.Repo, "refs/heads/"+t.Branch)
	return tip != "", err
}

// Remove removes t's worktree and its branch. It is idempotent: what is
// gone already is skipped, so a removal a crash cut short is finished by
// calling it again.
func (g Git) Remove(ctx context.Context, t Tree) error {
	if _, err := os.Stat(t.Path); err == nil {
		if _, err := g.run(ctx, t.Repo, "worktree", "remove", "--force", "--force", t.Path); err != nil {
			// A folder git no longer counts as a worktree.
			if rerr := os.RemoveAll(t.Path); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
	}
	if _, err := g.run(ctx, t.Repo, "worktree", "prune"); err != nil {
		return err
	}
	tip, err := g.Resolve(ctx, t.Repo, "refs/heads/"+t.Branch)
	if err != nil || tip == "" {
		return err
	}
	_, err = g.run(ctx, t.Repo, "branch", "-D", "--quiet", t.Branch)
	return err
}

// Prune forgets the worktrees of repo whose folders are gone.
func (g Git) Prune(ctx context.Context, repo string) error {
	_, err := g.run(ctx, repo, "worktree", "prune")
	return err
}

// ResetTo puts t's worktree back at commit: its branch, index and files,
// without the untracked files a run left (ignored ones stay). A run cut
// short by a crash is run again from where it started.
func (g Git) ResetTo(ctx context.Context, t Tree, commit string) error {
	if _, err := g.run(ctx, t.Path, "reset", "--quiet", "--hard", commit); err != nil {
		return err
	}
	_, err := g.run(ctx, t.Path, "clean", "-q", "-f", "-d")
	return err
}

// ClearLocks removes the lock files a git command killed in t's worktree
// left (its index's, its branch's): the coordinator is the only writer of
// its worktrees, and it calls this only where a crash may have cut one
// short, with the pair's lock held.
func (g Git) ClearLocks(ctx context.Context, t Tree) error {
	out, err := g.run(ctx, t.Path, "rev-parse", "--path-format=absolute", "--git-path", "index.lock", "--git-common-dir")
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return fmt.Errorf("rev-parse in %s: unexpected answer %q", t.Path, out)
	}
	return removeLocks(time.Time{}, lines[0], filepath.Join(lines[1], "refs", "heads", filepath.FromSlash(t.Branch)+".lock"))
}

// ClearRepoLocks removes the lock files of repo's index and of branch
// into that are older than before: those a merge killed by a crash left
// (the coordinator started after them); a newer one is someone's git at
// work, and is left.
func (g Git) ClearRepoLocks(ctx context.Context, repo, into string, before time.Time) error {
	out, err := g.run(ctx, repo, "rev-parse", "--path-format=absolute", "--git-path", "index.lock", "--git-common-dir")
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return fmt.Errorf("rev-parse in %s: unexpected answer %q", repo, out)
	}
	return removeLocks(before, lines[0], filepath.Join(lines[1], "refs", "heads", filepath.FromSlash(into)+".lock"))
}

// removeLocks removes the files of paths that exist (and are older than
// before, when it is not zero).
func removeLocks(before time.Time, paths ...string) error {
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || (!before.IsZero() && !st.ModTime().Before(before)) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the stale lock %s: %w", p, err)
		}
	}
	return nil
}
