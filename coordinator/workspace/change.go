package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Files lists what changed from parent to commit in dir's repository:
// each file's status and its lines added and removed (renames found),
// and the totals.
func (g Git) Files(ctx context.Context, dir, parent, commit string) (files []agentbridge.ChangeFile, added, removed int, err error) {
	out, err := g.run(ctx, dir, "diff", "--no-ext-diff", "--raw", "--numstat", "-z", "-M", parent, commit, "--")
	if err != nil {
		return nil, 0, 0, err
	}
	files, err = ParseRawNumstat(out)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read the diff of %s..%s: %w", parent, commit, err)
	}
	for _, f := range files {
		added += f.Added
		removed += f.Removed
	}
	return files, added, removed, nil
}

// ParseRawNumstat reads the output of git diff --raw --numstat -z: the
// raw entries (":modes shas status\0path\0", two paths for a rename or
// copy), then one numstat entry per file in the same order
// ("added\tremoved\tpath\0", or "added\tremoved\t\0from\0to\0"; "-" for a
// binary file, counted 0).
func ParseRawNumstat(out []byte) ([]agentbridge.ChangeFile, error) {
	tok := strings.Split(string(out), "\x00")
	var files []agentbridge.ChangeFile
	i := 0
	for i < len(tok) && strings.HasPrefix(tok[i], ":") {
		fields := strings.Fields(tok[i])
		if len(fields) < 5 || i+1 >= len(tok) {
			return nil, fmt.Errorf("bad raw entry %q", tok[i])
		}
		code := fields[4]
		f := agentbridge.ChangeFile{Path: tok[i+1]}
		i += 2
		switch code[0] {
		case 'A':
			f.Status = agentbridge.ChangeAdded
		case 'D':
			f.Status = agentbridge.ChangeDeleted
		case 'R', 'C':
			if i >= len(tok) {
				return nil, fmt.Errorf("rename entry without its new path")
			}
			f.From, f.Path = f.Path, tok[i]
			i++
			f.Status = agentbridge.ChangeRenamed
			if code[0] == 'C' {
				f.From, f.Status = "", agentbridge.ChangeAdded
			}
		default: // M, T (type change), U
			f.Status = agentbridge.ChangeModified
		}
		files = append(files, f)
	}
	for n := range files {
		if i >= len(tok) {
			return nil, fmt.Errorf("numstat entry %d missing", n)
		}
		parts := strings.SplitN(tok[i], "\t", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("bad numstat entry %q", tok[i])
		}
		files[n].Added, _ = strconv.Atoi(parts[0])
		files[n].Removed, _ = strconv.Atoi(parts[1])
		i++
		if parts[2] == "" { // a rename: its two paths follow
			i += 2
		}
	}
	return files, nil
}

// Diff is the unified diff from parent to commit in dir's repository, at
// most max bytes of it; truncated says it was cut (the rest is not read:
// git is stopped).
func (g Git) Diff(ctx context.Context, dir, parent, commit string, max int) (diff []byte, truncated bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	args := []string{"diff", "--no-ext-diff", "--no-color", "-M", "--binary", parent, commit, "--"}
	cmd := g.cmd(ctx, dir, nil, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, fmt.Errorf("git diff: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("start git diff: %w", err)
	}
	var buf bytes.Buffer
	_, rerr := io.Copy(&buf, io.LimitReader(stdout, int64(max)+1))
	if buf.Len() > max {
		truncated = true
		buf.Truncate(max)
		cancel() // the rest is not wanted
	}
	werr := cmd.Wait()
	switch {
	case rerr != nil && !truncated:
		return nil, false, fmt.Errorf("read git diff: %w", rerr)
	case werr != nil && !truncated:
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			return nil, false, &Error{Args: args, Code: ee.ExitCode(), Stderr: errb.String()}
		}
		return nil, false, fmt.Errorf("git diff: %w", werr)
	}
	return buf.Bytes(), truncated, nil
}

// Log is one commit of a branch, for agent-bridge changes.
type Log struct {
	Commit  string `json:"commit"`
	Subject string `json:"subject"`
}

// Commits lists the commits of branch not on base, newest first.
func (g Git) Commits(ctx context.Context, repo, base, branch string) ([]Log, error) {
	out, err := g.run(ctx, repo, "log", "--format=%H%x00%s", "refs/heads/"+base+"..refs/heads/"+branch, "--")
	if err != nil {
		return nil, err
	}
	var list []Log
	for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if h, s, ok := strings.Cut(l, "\x00"); ok {
			list = append(list, Log{Commit: h, Subject: s})
		}
	}
	return list, nil
}
