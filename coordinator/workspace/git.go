// Package workspace is the coordinator's use of git for workspaces
// (contract 8.1, docs/workspaces.md): a worktree per (thread,
// participant) on a branch of its own, one commit per run that changed
// it, the change's files and unified diff, and the merge of a branch into
// the repository's own work tree, checked for conflicts first without
// touching it. It runs the real git binary; every step is idempotent, so
// that the coordinator's ledger can finish one a crash cut short.
package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// Git runs the git binary. The zero value finds "git" on the PATH.
type Git struct {
	// Bin is the git program; "" means "git" on the PATH.
	Bin string
}

// ErrNoGit is returned by LookGit when no git is on the PATH.
var ErrNoGit = errors.New("git was not found on the PATH: workspaces need it (install git, or remove \"workspaces\" from the config)")

// LookGit finds git on the PATH.
func LookGit() (string, error) {
	p, err := exec.LookPath("git")
	if err != nil {
		return "", ErrNoGit
	}
	return p, nil
}

// Error is a git command that failed: its arguments, exit code and what
// it wrote to stderr.
type Error struct {
	Args   []string
	Code   int
	Stderr string
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = fmt.Sprintf("exit status %d", e.Code)
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

// exitCode is err's git exit code, or -1 when err is not a git Error.
func exitCode(err error) int {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return -1
}

// baseArgs keep the user's git settings from changing what the
// coordinator's commands do: no hooks (an agent's commit is the daemon's,
// and a hook could refuse it or prompt), no signing, no pager, no
// colours, no auto-gc in the middle of a run.
var baseArgs = []string{"-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "-c", "color.ui=false",
	"-c", "gc.auto=0", "-c", "core.quotePath=false", "--no-pager"}

// cmd is git args in dir, with an environment that points no variable at
// another repository and never asks for a password.
func (g Git) cmd(ctx context.Context, dir string, env []string, args ...string) *exec.Cmd {
	bin := g.Bin
	if bin == "" {
		bin = "git"
	}
	cmd := exec.CommandContext(ctx, bin, append(append([]string{}, baseArgs...), args...)...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(os.Environ()), env...)
	return cmd
}

// cleanEnv drops the GIT_ variables that would make git act on another
// repository, index or identity than the one the coordinator names.
func cleanEnv(env []string) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		if strings.HasPrefix(kv, "GIT_") || strings.HasPrefix(kv, "LC_ALL=") || strings.HasPrefix(kv, "LANGUAGE=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
}

// run runs git args in dir and returns its stdout; a failure is an *Error.
func (g Git) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return g.runEnv(ctx, dir, nil, nil, args...)
}

// runEnv is run with extra environment and stdin.
func (g Git) runEnv(ctx context.Context, dir string, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := g.cmd(ctx, dir, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, stdin
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.Bytes(), &Error{Args: args, Code: ee.ExitCode(), Stderr: errb.String()}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("run git %s: %w", strings.Join(args, " "), err)
	}
	return out.Bytes(), nil
}

// line is out's first line, trimmed.
func line(out []byte) string {
	s, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(s)
}

// Head is the commit dir's HEAD points at.
func (g Git) Head(ctx context.Context, dir string) (string, error) {
	out, err := g.run(ctx, dir, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return "", err
	}
	return line(out), nil
}

// Resolve is the commit ref names in repo, or "" when it names none.
func (g Git) Resolve(ctx context.Context, repo, ref string) (string, error) {
	out, err := g.run(ctx, repo, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if exitCode(err) == 1 {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return line(out), nil
}

// CurrentBranch is the branch repo's work tree is on ("" when HEAD is
// detached).
func (g Git) CurrentBranch(ctx context.Context, repo string) (string, error) {
	out, err := g.run(ctx, repo, "symbolic-ref", "--quiet", "--short", "HEAD")
	if exitCode(err) == 1 {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return line(out), nil
}

// Version is git's version line, for doctor.
func (g Git) Version(ctx context.Context) (string, error) {
	out, err := g.run(ctx, "", "version")
	if err != nil {
		return "", err
	}
	return line(out), nil
}
