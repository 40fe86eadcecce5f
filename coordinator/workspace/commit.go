package workspace

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Excluded is the folder of a worktree that is never committed: the
// coordinator writes a run's attachments there (contract 8.2).
const Excluded = ".agent-bridge"

// Commit describes the commit of one run's change.
type Commit struct {
	// Author is the participant; its address is <participant>@agent-bridge.invalid.
	Author string
	// Subject is the first line of the reply, cut to SubjectRunes.
	Subject string
	// Thread and Event fill the trailers Agent-Bridge-Thread and
	// Agent-Bridge-Event.
	Thread, Event string
	// When is the commit's date.
	When time.Time
}

// SubjectRunes is where a commit's subject is cut.
const SubjectRunes = 72

// Subject is the first non-empty line of text cut at SubjectRunes
// characters, or fallback when text has none.
func Subject(text, fallback string) string {
	for l := range strings.SplitSeq(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if utf8.RuneCountInString(l) > SubjectRunes {
			l = string([]rune(l)[:SubjectRunes])
		}
		return l
	}
	return fallback
}

// message is the commit message of c.
func (c Commit) message() string {
	subj := c.Subject
	if subj == "" {
		subj = "Change by " + c.Author
	}
	return fmt.Sprintf("%s\n\nAgent-Bridge-Thread: %s\nAgent-Bridge-Event: %s\n", subj, c.Thread, c.Event)
}

// identity is the environment that makes who the author and committer.
func identity(name, email string, when time.Time) []string {
	date := fmt.Sprintf("%d +0000", when.Unix())
	return []string{"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email, "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email, "GIT_COMMITTER_DATE=" + date}
}

// AuthorEmail is the address a participant's commits carry.
func AuthorEmail(participant string) string { return participant + "@agent-bridge.invalid" }

// CommitAll commits everything t's worktree holds that its HEAD does not
// (tracked and new files, .gitignore honoured, the Excluded folder left
// out) as one commit on its branch, and returns the branch's tip after
// it: HEAD itself when there was nothing to commit. It goes through git's
// plumbing (add, write-tree, commit-tree, update-ref), so no hook runs and
// the branch moves only if it is still where it was read.
func (g Git) CommitAll(ctx context.Context, t Tree, c Commit) (string, error) {
	return g.CommitTracked(ctx, nil, t, c)
}

// CommitTracked is CommitAll staging only the paths tr saw change since
// the worktree's last commit, when it can vouch for them (Tracker); the
// commit is the same.
func (g Git) CommitTracked(ctx context.Context, tr *Tracker, t Tree, c Commit) (string, error) {
	var commit, tree string
	_, err := g.stage(ctx, tr, t)
	if err == nil {
		commit, tree, err = g.commitIndex(ctx, t, c)
	}
	if err != nil {
		// What was taken from tr's list may not be staged: the next
		// commit stages everything.
		tr.again(t)
		return "", err
	}
	tr.committed(t, tree)
	return commit, nil
}

// stage brings the worktree's index to what its files hold: the paths tr
// lists (byName), else every file (git stats them all).
func (g Git) stage(ctx context.Context, tr *Tracker, t Tree) (byName bool, err error) {
	paths, check, ok := tr.take(ctx, t)
	if ok && check != "" {
		// The index was written since the last commit: by a git that
		// only refreshed it (a status) or by one that changed what it
		// holds (the agent's own add or commit, a reset), after which
		// the list is not enough.
		_, err := g.run(ctx, t.Path, "diff-index", "--cached", "--quiet", check, "--")
		ok = err == nil
	}
	if ok {
		if len(paths) == 0 {
			return true, nil
		}
		var list strings.Builder
		for _, p := range paths {
			list.WriteString(":(literal)" + p + "\x00")
		}
		// A path git refuses (one it ignores, one in a nested
		// repository) fails the command: everything is staged then.
		if _, err := g.runEnv(ctx, t.Path, nil, strings.NewReader(list.String()), "add", "--all", "--pathspec-from-file=-", "--pathspec-file-nul"); err == nil {
			return true, nil
		}
	}
	_, err = g.run(ctx, t.Path, "add", "--all", "--", ".", ":(exclude)"+Excluded)
	return false, err
}

// commitIndex commits t's index on its branch when its tree differs from
// HEAD's, and returns the branch's tip and the index's tree.
func (g Git) commitIndex(ctx context.Context, t Tree, c Commit) (commit, tree string, err error) {
	out, err := g.run(ctx, t.Path, "write-tree")
	if err != nil {
		return "", "", err
	}
	tree = line(out)
	out, err = g.run(ctx, t.Path, "rev-parse", "HEAD", "HEAD^{tree}")
	if err != nil {
		return "", "", err
	}
	heads := strings.Fields(string(out))
	if len(heads) != 2 {
		return "", "", fmt.Errorf("rev-parse HEAD in %s: unexpected answer %q", t.Path, out)
	}
	head, headTree := heads[0], heads[1]
	if tree == headTree {
		return head, tree, nil
	}
	commit, err = g.commitTree(ctx, t.Path, tree, []string{head}, c.message(), identity(c.Author, AuthorEmail(c.Author), c.When))
	if err != nil {
		return "", "", err
	}
	if _, err := g.run(ctx, t.Path, "update-ref", "-m", "agent-bridge: commit a run's change", "refs/heads/"+t.Branch, commit, head); err != nil {
		return "", "", err
	}
	return commit, tree, nil
}

// commitTree makes a commit of tree with parents and message, and returns
// its id; the message goes through stdin.
func (g Git) commitTree(ctx context.Context, dir, tree string, parents []string, message string, env []string) (string, error) {
	args := []string{"commit-tree", tree}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	out, err := g.runEnv(ctx, dir, env, strings.NewReader(message), args...)
	if err != nil {
		return "", err
	}
	return line(out), nil
}
