package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/spf13/cobra"
)

// uploadFiles uploads each file to thread, in order, and returns them as
// stored, for meta.attachments. A file that cannot be read is a usage
// error naming it; nothing is posted then (what was uploaded before it is
// swept after a day, as no event names it).
func uploadFiles(ctx context.Context, c *client.Client, thread string, paths []string) ([]agentbridge.Attachment, error) {
	out := make([]agentbridge.Attachment, 0, len(paths))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, usagef("--attach: %v", err)
		}
		st, err := f.Stat()
		if err == nil && st.IsDir() {
			err = fmt.Errorf("%s is a folder, not a file", p)
		}
		if err != nil {
			f.Close()
			return nil, usagef("--attach: %v", err)
		}
		a, err := c.UploadAttachment(ctx, thread, filepath.Base(p), f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("attach %s: %w", p, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// withAttachments sets meta.attachments of in to list.
func withAttachments(in *agentbridge.EventInput, list []agentbridge.Attachment) error {
	if len(list) == 0 {
		return nil
	}
	b, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("encode meta.attachments: %w", err)
	}
	if in.Meta.Extra == nil {
		in.Meta.Extra = map[string]json.RawMessage{}
	}
	in.Meta.Extra[agentbridge.MetaAttachments] = b
	return nil
}

// attachmentNames is a message's text when only files are posted: their
// names.
func attachmentNames(paths []string) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	return strings.Join(names, ", ")
}

// getCommand is "agent-bridge get ID [-o FILE]".
func (m *Main) getCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	out := fs.StringP("output", "o", "", "the file to write (\"-\": standard output; default: the attachment's name, in this folder)")
	force := fs.Bool("force", false, "replace the file if it exists")
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usagef("get: give the attachment's ID (sha256:…, as the event's meta.attachments shows it)")
		}
		id := pos[0]
		if !agentbridge.AttachmentIDPattern.MatchString(id) {
			return usagef("get: %q is not an attachment id: those are \"sha256:\" and 64 hex digits", agentbridge.Clip(id, agentbridge.QuoteRunes))
		}
		cl, err := m.newClient(cf)
		if err != nil {
			return err
		}
		body, a, err := cl.DownloadAttachment(ctx, id)
		if err != nil {
			return explain(err, cf.url)
		}
		defer body.Close()
		if *out == "-" {
			return copyVerified(m.Stdout, body, id)
		}
		path := *out
		if path == "" {
			path = agentbridge.CleanAttachmentName(a.Name)
		}
		if err := saveVerified(path, body, id, *force); err != nil {
			return err
		}
		if cf.json {
			a.Name = path
			return m.printJSON(a)
		}
		_, err = fmt.Fprintf(m.Stdout, "saved %s (%d bytes, %s)\n", path, a.Size, a.Type)
		return err
	}
}

// saveVerified writes body to path through a temporary file beside it,
// which becomes path only once the bytes are whole and their SHA-256 is
// id: an interrupted or corrupted download leaves no file behind. An
// existing path is refused unless force.
func saveVerified(path string, body io.Reader, id string, force bool) error {
	if _, err := os.Stat(path); err == nil && !force {
		return usagef("get: %s already exists; choose another name with -o, or pass --force to replace it", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".agent-bridge-get-*")
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := copyVerified(tmp, body, id); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("get: %w", err)
	}
	return nil
}

// copyVerified copies body to w and checks that its SHA-256 is id.
func copyVerified(w io.Writer, body io.Reader, id string) error {
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(w, h), body); err != nil {
		return fmt.Errorf("get: the download was cut: %w", err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != id {
		return errors.New("get: the bytes received are not those of " + id + " (their SHA-256 differs); try again")
	}
	return nil
}
