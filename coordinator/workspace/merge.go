package workspace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Refused is a merge that cannot be done as the repository stands (its
// work tree has changes, or is on another branch, or the change
// conflicts): nothing was changed, and Reason says why for a person.
type Refused struct {
	Reason string
	// Conflicts lists the conflicting files, for a conflict.
	Conflicts []string
}

func (r *Refused) Error() string { return r.Reason }

// CheckRepo refuses a merge into branch into when the repository's own
// work tree is not on into or has uncommitted changes to tracked files.
func (g Git) CheckRepo(ctx context.Context, repo, into string) error {
	cur, err := g.CurrentBranch(ctx, repo)
	if err != nil {
		return err
	}
	if cur != into {
		on := "a detached HEAD"
		if cur != "" {
			on = "branch " + cur
		}
		return &Refused{Reason: fmt.Sprintf("the repository %s is on %s, not on %s: check out %s there and merge again", repo, on, into, into)}
	}
	out, err := g.run(ctx, repo, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		n := strings.Count(s, "\n") + 1
		return &Refused{Reason: fmt.Sprintf("the repository %s has uncommitted changes (%d file(s)): commit or stash them and merge again", repo, n)}
	}
	return nil
}

// Merge describes the merge of a participant's branch.
type Merge struct {
	Repo, Into, Branch string
	// Squash makes one commit with into's tip as its only parent.
	Squash bool
	// Message is the commit message; Who the person who merged, the
	// commit's author and committer.
	Message string
	Who     string
	When    time.Time
}

// MergeCommit makes the commit that merges m.Branch into m.Into, without
// touching the repository's work tree or any branch: the merge is worked
// out by git merge-tree, and a conflict is a *Refused listing the files.
// from is into's tip the commit goes on. The caller moves into to commit
// with FastForward.
func (g Git) MergeCommit(ctx context.Context, m Merge) (commit, from string, err error) {
	from, err = g.Resolve(ctx, m.Repo, "refs/heads/"+m.Into)
	if err != nil {
		return "", "", err
	}
	if from == "" {
		return "", "", &Refused{Reason: fmt.Sprintf("the repository %s has no branch %s", m.Repo, m.Into)}
	}
	tip, err := g.Resolve(ctx, m.Repo, "refs/heads/"+m.Branch)
	if err != nil {
		return "", "", err
	}
	if tip == "" {
		return "", "", &Refused{Reason: fmt.Sprintf("the branch %s is gone from %s", m.Branch, m.Repo)}
	}
	out, err := g.run(ctx, m.Repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", from, tip)
	if exitCode(err) == 1 {
		files := conflictFiles(out)
		return "", from, &Refused{Reason: fmt.Sprintf("%s conflicts with %s in %s", m.Branch, m.Into, strings.Join(files, ", ")), Conflicts: files}
	}
	if err != nil {
		return "", "", err
	}
	tree := line(out)
	parents := []string{from}
	if !m.Squash {
		parents = append(parents, tip)
	}
	commit, err = g.commitTree(ctx, m.Repo, tree, parents, m.Message, identity(m.Who, AuthorEmail(m.Who), m.When))
	return commit, from, err
}

// conflictFiles reads the files git merge-tree --name-only lists after
// the tree, up to the blank line that ends them.
func conflictFiles(out []byte) []string {
	lines := strings.Split(string(out), "\n")
	var files []string
	for _, l := range lines[1:] {
		if l == "" {
			break
		}
		if len(files) == 0 || files[len(files)-1] != l {
			files = append(files, l)
		}
	}
	return files
}

// FastForward moves branch into of repo, checked out in its work tree,
// from from to commit (a commit whose first parent is from), updating the
// work tree. It is idempotent: into already at commit is done. into moved
// elsewhere meanwhile, or a file in the way, is a *Refused, and nothing
// is changed.
func (g Git) FastForward(ctx context.Context, repo, into, from, commit string) error {
	cur, err := g.Resolve(ctx, repo, "refs/heads/"+into)
	if err != nil {
		return err
	}
	switch cur {
	case commit:
		return nil
	case from:
	default:
		return &Refused{Reason: fmt.Sprintf("%s moved in %s while the merge was made: merge again", into, repo)}
	}
	if err := g.CheckRepo(ctx, repo, into); err != nil {
		return err
	}
	_, err = g.run(ctx, repo, "merge", "--ff-only", "--quiet", "--no-edit", commit)
	var ge *Error
	if errors.As(err, &ge) {
		return &Refused{Reason: fmt.Sprintf("git could not update %s: %s", repo, strings.TrimSpace(ge.Stderr))}
	}
	return err
}

// IsAncestor reports whether commit a is an ancestor of (or is) b in repo.
func (g Git) IsAncestor(ctx context.Context, repo, a, b string) (bool, error) {
	_, err := g.run(ctx, repo, "merge-base", "--is-ancestor", a, b)
	if exitCode(err) == 1 {
		return false, nil
	}
	return err == nil, err
}
