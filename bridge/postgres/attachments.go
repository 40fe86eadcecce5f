package postgres

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

var _ agentbridge.AttachmentStore = (*Store)(nil)

// Attachment statements.
const (
	// aUpsert stores a new attachment's row or moves a stored one's
	// upload time; inserted says which (a row this statement inserted
	// has no xmax).
	aUpsert = `INSERT INTO attachments (id, name, type, size, created_ms, uploaded_ms) VALUES ($1, $2, $3, $4, $5, $5)
		ON CONFLICT (id) DO UPDATE SET uploaded_ms = GREATEST(attachments.uploaded_ms, excluded.uploaded_ms)
		RETURNING type, size, (xmax = 0) AS inserted`
)

// PutAttachment stores an upload (agentbridge.AttachmentStore) in one
// transaction of its own, outside the writer: the row's upsert decides
// whether the bytes are written, and holds the row against a sweep until
// COMMIT.
func (s *Store) PutAttachment(ctx context.Context, thread string, a agentbridge.Attachment, body io.Reader, now time.Time) (_ agentbridge.Attachment, err error) {
	defer s.GuardWrite(time.Now(), &err)
	if !agentbridge.ThreadIDPattern.MatchString(thread) {
		return agentbridge.Attachment{}, agentbridge.ThreadNotFound(thread)
	}
	var missing bool
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var one int
		found, err := storecore.Found(tx.QueryRow(ctx, `SELECT 1 FROM threads WHERE id = $1`, thread).Scan(&one))
		if err != nil || !found {
			missing = !found
			return err
		}
		var inserted bool
		if err := tx.QueryRow(ctx, aUpsert, a.ID, a.Name, a.Type, a.Size, now.UnixMilli()).Scan(&a.Type, &a.Size, &inserted); err != nil {
			return fmt.Errorf("store attachment %s: %w", a.ID, err)
		}
		if inserted {
			err := storecore.WriteChunks(body, a.Size, func(n int, data []byte) error {
				_, err := tx.Exec(ctx, `INSERT INTO attachment_chunks (attachment, n, data) VALUES ($1, $2, $3)`, a.ID, n, data)
				return err
			})
			if err != nil {
				return fmt.Errorf("store attachment %s: %w", a.ID, err)
			}
		}
		return storecore.LinkAttachments(ctx, pgConn{tx}, thread, "", a.ID)
	})
	if missing {
		return agentbridge.Attachment{}, agentbridge.ThreadNotFound(thread)
	}
	if err != nil {
		return agentbridge.Attachment{}, fmt.Errorf("upload to thread %s: %w", thread, err)
	}
	return a, nil
}

// Attachment reads a stored attachment in the batch's transaction and
// locks its row (FOR KEY SHARE) until COMMIT: a sweep that comes later
// skips it, and one that came first has removed it, which makes the
// append unknown_attachment. Shared locks: appends never wait for each
// other here.
func (l *lookups) Attachment(ctx context.Context, id string) (agentbridge.Attachment, bool, error) {
	return storecore.LookupAttachment(ctx, pgConn{l.tx}, id, ` FOR KEY SHARE`)
}
