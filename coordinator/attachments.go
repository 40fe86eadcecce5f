package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// A run's attachments (contract 8.2): the files its payload's events name
// are copied from the bridge into a folder of the run's own before the
// agent starts, each at the path the payload gives, and the folder is
// removed when the run ends. docs/adapter-protocol.md "Attachments".

// Caps of one run's copies: past them, the newest events' files are
// copied and the rest are listed without a path.
const (
	maxRunAttachments     = 32
	maxRunAttachmentBytes = 256 << 20
)

// runAttachmentDir is the one place that decides where a run's copies go:
// a folder per invocation under the coordinator's attachment folder.
func runAttachmentDir(root string, inv ledger.Invocation) string {
	return filepath.Join(root, fmt.Sprintf("run-%d", inv.ID))
}

// defaultAttachmentDir is the attachment folder when Options leaves it
// empty: agent-bridge/attachments in the user's cache folder (the
// temporary folder when there is none), one folder per coordinator id so
// that two coordinators of one user never share it.
func defaultAttachmentDir(dir, coordinatorID string) string {
	if dir != "" {
		return dir
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "agent-bridge", "attachments", agentbridge.CleanAttachmentName(coordinatorID))
}

// clearAttachments removes the copies left by runs of a coordinator that
// stopped without removing them (kill -9): at start no run is going.
func (c *Coordinator) clearAttachments() {
	entries, err := os.ReadDir(c.attDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "run-") {
			if err := os.RemoveAll(filepath.Join(c.attDir, e.Name())); err != nil {
				c.log.Warn("remove a run's old attachment copies", "path", filepath.Join(c.attDir, e.Name()), "err", err)
			}
		}
	}
}

// fetchAttachments copies the files in's payload names into the run's
// folder and sets their paths in the payload (and in the adapter's
// encoded payload); the newest events' files come first, within the
// run's caps. A file the bridge no longer has, or that fails to arrive
// after retries, is listed without a path and logged. It returns what
// removes the folder, which the caller runs once the run has ended.
func (c *Coordinator) fetchAttachments(ctx context.Context, inv ledger.Invocation, in *prepared) (remove func()) {
	files := in.p.Attachments
	if len(files) == 0 || in.startErr != nil {
		return func() {}
	}
	dir := runAttachmentDir(c.attDir, inv)
	remove = func() {
		if err := os.RemoveAll(dir); err != nil {
			c.log.Warn("remove a run's attachment copies", "id", inv.ID, "path", dir, "err", err)
		}
	}
	remove() // a copy left by an earlier try of this run
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.log.Error("make a run's attachment folder", "id", inv.ID, "path", dir, "err", err)
		return remove
	}
	names := map[string]bool{}
	var total int64
	copied := 0
	for i := len(files) - 1; i >= 0; i-- {
		f := &files[i]
		if copied >= maxRunAttachments || total+f.Size > maxRunAttachmentBytes {
			continue
		}
		path := filepath.Join(dir, uniqueName(agentbridge.CleanAttachmentName(f.Name), names))
		err := c.retry(ctx, retrying{what: "copy attachment", attrs: []any{"id", inv.ID, "attachment", f.ID},
			permanent: func(err error) bool { return bridgeStatus(err, http.StatusNotFound) || errors.Is(err, errNotTheBytes) }},
			func() error { return c.copyAttachment(ctx, f.ID, path) })
		if err != nil {
			c.log.Warn("an attachment is not copied for the run", "id", inv.ID, "attachment", f.ID, "err", err)
			continue
		}
		f.Path = path
		total += f.Size
		copied++
	}
	if len(in.payload) > 0 { // an adapter's: encoded already
		body, err := json.Marshal(in.p)
		if err != nil {
			c.log.Error("encode payload", "id", inv.ID, "err", err)
			return remove
		}
		in.payload = body
	}
	return remove
}

// errNotTheBytes is a download whose bytes are not those of its id.
var errNotTheBytes = errors.New("the bytes received are not those of the attachment's id")

// copyAttachment downloads attachment id to path, which it creates (never
// following a link there), and checks the bytes against the id.
func (c *Coordinator) copyAttachment(ctx context.Context, id, path string) error {
	body, _, err := c.bridge.DownloadAttachment(ctx, id)
	if err != nil {
		return err
	}
	defer body.Close()
	_ = os.Remove(path) // an earlier try's partial copy
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	h := agentbridge.NewAttachmentHash()
	_, err = io.Copy(io.MultiWriter(f, h), body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy attachment %s: %w", id, err)
	}
	if h.ID() != id {
		return errNotTheBytes
	}
	return nil
}

// uniqueName is name, or name with " (2)", " (3)" … before its extension
// when a file of the run has it already; it records the one it gives.
func uniqueName(name string, taken map[string]bool) string {
	ext := filepath.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	out := name
	for n := 2; taken[strings.ToLower(out)]; n++ {
		out = fmt.Sprintf("%s (%d)%s", stem, n, ext)
	}
	taken[strings.ToLower(out)] = true
	return out
}
