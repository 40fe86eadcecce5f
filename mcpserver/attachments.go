package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// maxPostAttachments caps the files of one post.
const maxPostAttachments = agentbridge.MaxEventAttachments

// An agent attaches files by path (post's attachments): only files inside
// the server's working folder, which is the agent's (its CLI starts the
// server there). A path is refused before anything is read when it goes
// up with "..", is absolute outside the folder, or leads out of it through
// a symbolic link; then the file is opened without following a link at
// its last step and checked to be the file that was resolved, so that a
// link swapped in meanwhile cannot lead out either.

// attachFiles uploads each path (the post's attachments) to thread and
// returns them as stored, for meta.attachments. A path it refuses is an
// invalid attachments argument naming the path and why; nothing is
// uploaded then.
func (s *Server) attachFiles(ctx context.Context, thread string, paths []string) ([]agentbridge.Attachment, error) {
	if len(paths) > maxPostAttachments {
		return nil, invalidArg("attachments", "at most %d files per message, not %d", maxPostAttachments, len(paths))
	}
	files := make([]*os.File, 0, len(paths))
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, p := range paths {
		f, err := openInside(s.dir, p)
		if err != nil {
			return nil, invalidArg("attachments", "%q: %v", p, err)
		}
		files = append(files, f)
	}
	out := make([]agentbridge.Attachment, 0, len(files))
	for i, f := range files {
		a, err := s.c.UploadAttachment(ctx, thread, filepath.Base(paths[i]), f)
		if err != nil {
			return nil, s.toolError(err)
		}
		out = append(out, a)
	}
	return out, nil
}

// errOutside is a path that leads out of the working folder.
var errOutside = errors.New("it is outside your working folder, and only files inside it may be attached")

// openInside opens the regular file p names inside dir (p relative to
// dir, or absolute inside it).
func openInside(dir, p string) (*os.File, error) {
	if p == "" {
		return nil, errors.New("the path is empty")
	}
	if slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..") {
		return nil, errors.New(`a path may not go up with ".."; give it inside your working folder`)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("the working folder cannot be read: %w", err)
	}
	full := p
	if !filepath.IsAbs(p) {
		full = filepath.Join(dir, p)
	}
	if !within(filepath.Clean(dir), filepath.Clean(full)) && !within(root, filepath.Clean(full)) {
		return nil, errOutside
	}
	real, err := filepath.EvalSymlinks(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("there is no such file")
	}
	if err != nil {
		return nil, err
	}
	if !within(root, real) {
		return nil, fmt.Errorf("it is a symbolic link that leads outside your working folder (to %s), and only files inside it may be attached", real)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("it is not a regular file")
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("it cannot be opened: %w", err)
	}
	if got, err := f.Stat(); err != nil || !os.SameFile(got, st) {
		f.Close()
		return nil, errors.New("it changed while it was opened; try again")
	}
	return f, nil
}

// within reports whether path is dir or inside it (both clean).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
