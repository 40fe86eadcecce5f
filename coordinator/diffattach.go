package coordinator

import (
	"bytes"
	"context"
	"log/slog"

	"github.com/agent-bridge/agent-bridge/client"
)

// uploadDiff stores a change's unified diff as an attachment of thread
// (contract 8.2: content-addressed, so a retry stores it once; the bridge
// sniffs it as text/x-diff) and returns its id; an empty diff stores
// nothing. Transient failures are retried until ctx ends.
func (d deps) uploadDiff(ctx context.Context, thread, name string, body []byte) (string, error) {
	if len(body) == 0 {
		return "", nil
	}
	var id string
	err := d.retry(ctx, retrying{what: "store a change's diff", attrs: []any{"thread", thread}, level: slog.LevelDebug, permanent: client.Permanent},
		func() error {
			a, err := d.bridge.UploadAttachment(ctx, thread, name, bytes.NewReader(body))
			id = a.ID
			return err
		})
	return id, err
}
