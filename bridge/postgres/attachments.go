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
	aUnreferenced = `NOT EXISTS (SELECT 1 FROM attachment_links l WHERE l.attachment = attachments.id AND l.event <> '')`
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

// SweepAttachments removes the attachments no event names, last uploaded
// before cutoff (agentbridge.AttachmentStore), each in a transaction of
// its own: it locks the row (skipping one another bridge's sweep, an
// upload or an append holds), then deletes it only if no event names it,
// a check that as a new statement sees every append committed before.
// An append that locked the row first keeps it; one that comes after
// finds it gone (unknown_attachment).
func (s *Store) SweepAttachments(ctx context.Context, cutoff time.Time) (n int, err error) {
	defer s.Guard(time.Now(), &err)
	rows, err := s.pool.Query(ctx, `SELECT id FROM attachments WHERE uploaded_ms < $1 AND `+aUnreferenced+` ORDER BY uploaded_ms LIMIT $2`,
		cutoff.UnixMilli(), storecore.SweepBatch)
	if err != nil {
		return 0, fmt.Errorf("find attachments to sweep: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("find attachments to sweep: %w", err)
	}
	for _, id := range ids {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var one int
			locked, err := storecore.Found(tx.QueryRow(ctx, `SELECT 1 FROM attachments WHERE id = $1 AND uploaded_ms < $2 FOR UPDATE SKIP LOCKED`,
				id, cutoff.UnixMilli()).Scan(&one))
			if err != nil || !locked {
				return err
			}
			tag, err := tx.Exec(ctx, `DELETE FROM attachments WHERE id = $1 AND `+aUnreferenced, id)
			if err != nil || tag.RowsAffected() == 0 {
				return err
			}
			var b pgx.Batch
			b.Queue(`DELETE FROM attachment_chunks WHERE attachment = $1`, id)
			b.Queue(`DELETE FROM attachment_links WHERE attachment = $1`, id)
			if err := tx.SendBatch(ctx, &b).Close(); err != nil {
				return err
			}
			n++
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("sweep attachment %s: %w", id, err)
		}
	}
	return n, nil
}

// Attachment reads a stored attachment in the batch's transaction and
// locks its row (FOR KEY SHARE) until COMMIT: a sweep that comes later
// skips it, and one that came first has removed it, which makes the
// append unknown_attachment. Shared locks: appends never wait for each
// other here.
func (l *lookups) Attachment(ctx context.Context, id string) (agentbridge.Attachment, bool, error) {
	return storecore.LookupAttachment(ctx, pgConn{l.tx}, id, ` FOR KEY SHARE`)
}
