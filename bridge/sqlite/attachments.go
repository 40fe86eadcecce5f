package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

var _ agentbridge.AttachmentStore = (*Store)(nil)

// Attachment statements.
const (
	aSelect       = `SELECT name, type, size FROM attachments WHERE id = ?`
	aTouch        = `UPDATE attachments SET uploaded_ms = max(uploaded_ms, ?) WHERE id = ?`
	aInsert       = `INSERT INTO attachments (id, name, type, size, created_ms, uploaded_ms) VALUES (?, ?, ?, ?, ?, ?)`
	aInsertChunk  = `INSERT INTO attachment_chunks (attachment, n, data) VALUES (?, ?, ?)`
	aSelectChunk  = `SELECT data FROM attachment_chunks WHERE attachment = ? AND n = ?`
	aLink         = `INSERT OR IGNORE INTO attachment_links (attachment, thread, event) VALUES (?, ?, ?)`
	aHeld         = `SELECT EXISTS (SELECT 1 FROM attachment_links WHERE attachment = ? AND thread = ?)`
	aUnreferenced = `NOT EXISTS (SELECT 1 FROM attachment_links l WHERE l.attachment = attachments.id AND l.event <> '')`
	aCandidates   = `SELECT id FROM attachments WHERE uploaded_ms < ? AND ` + aUnreferenced + ` ORDER BY uploaded_ms LIMIT ?`
	aSweepOne     = `DELETE FROM attachments WHERE id = ? AND uploaded_ms < ? AND ` + aUnreferenced
)

// PutAttachment stores an upload (agentbridge.AttachmentStore) in one
// step of the writer. Reading the body there holds the writer for the
// time the file takes to write (docs/performance.md has the numbers); a
// body that fails to read is rolled back to a savepoint and refused
// alone, without failing the group commit it shares.
func (s *Store) PutAttachment(ctx context.Context, thread string, a agentbridge.Attachment, body io.Reader, now time.Time) (_ agentbridge.Attachment, err error) {
	defer s.guardWrite(time.Now(), &err)
	if !agentbridge.ThreadIDPattern.MatchString(thread) {
		return agentbridge.Attachment{}, agentbridge.ThreadNotFound(thread)
	}
	r := s.newRequest(ctx)
	r.other = func(ctx context.Context, conn *sql.Conn) (response, error) {
		var one int
		if found, err := storecore.Found(conn.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE id = ?`, thread).Scan(&one)); err != nil || !found {
			if err != nil {
				return response{}, fmt.Errorf("look up thread %s: %w", thread, err)
			}
			return response{err: agentbridge.ThreadNotFound(thread)}, nil
		}
		stored, found, err := scanAttachment(conn.QueryRowContext(ctx, aSelect, a.ID), a.ID)
		if err != nil {
			return response{}, err
		}
		if found {
			if _, err := conn.ExecContext(ctx, aTouch, now.UnixMilli(), a.ID); err != nil {
				return response{}, fmt.Errorf("touch attachment %s: %w", a.ID, err)
			}
			a.Type, a.Size = stored.Type, stored.Size
		} else if refusal, err := insertAttachment(ctx, conn, a, body, now); err != nil || refusal != nil {
			return response{err: refusal}, err
		}
		if _, err := conn.ExecContext(ctx, aLink, a.ID, thread, ""); err != nil {
			return response{}, fmt.Errorf("link attachment %s: %w", a.ID, err)
		}
		return response{value: a}, nil
	}
	resp := s.submit(ctx, r)
	if resp.err != nil {
		return agentbridge.Attachment{}, resp.err
	}
	return resp.value.(agentbridge.Attachment), nil
}

// insertAttachment writes a new attachment's row and chunks under a
// savepoint: a body that fails to read is undone and comes back as
// refusal, a database failure as err.
func insertAttachment(ctx context.Context, conn *sql.Conn, a agentbridge.Attachment, body io.Reader, now time.Time) (refusal, err error) {
	if _, err := conn.ExecContext(ctx, "SAVEPOINT upload"); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	werr := func() error {
		if _, err := conn.ExecContext(ctx, aInsert, a.ID, a.Name, a.Type, a.Size, now.UnixMilli(), now.UnixMilli()); err != nil {
			return fmt.Errorf("insert attachment %s: %w", a.ID, err)
		}
		return storecore.WriteChunks(body, a.Size, func(n int, data []byte) error {
			if _, err := conn.ExecContext(ctx, aInsertChunk, a.ID, n, data); err != nil {
				return fmt.Errorf("insert chunk %d of attachment %s: %w", n, a.ID, err)
			}
			return nil
		})
	}()
	if werr != nil && errors.Is(werr, storecore.ErrUploadRead) {
		if _, err := conn.ExecContext(ctx, "ROLLBACK TO upload"); err != nil {
			return nil, errors.Join(werr, fmt.Errorf("roll back the upload: %w", err))
		}
		refusal = werr
	} else if werr != nil {
		return nil, werr
	}
	if _, err := conn.ExecContext(ctx, "RELEASE upload"); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	return refusal, nil
}

// scanAttachment reads one attachment row (name, type, size) of id.
func scanAttachment(row *sql.Row, id string) (agentbridge.Attachment, bool, error) {
	a := agentbridge.Attachment{ID: id}
	found, err := storecore.Found(row.Scan(&a.Name, &a.Type, &a.Size))
	if err != nil {
		return a, false, fmt.Errorf("load attachment %s: %w", id, err)
	}
	return a, found, nil
}

// Attachment reads a stored attachment (agentbridge.AttachmentStore).
func (s *Store) Attachment(ctx context.Context, id string) (_ agentbridge.Attachment, _ bool, err error) {
	defer s.guard(time.Now(), &err)
	if !agentbridge.AttachmentIDPattern.MatchString(id) {
		return agentbridge.Attachment{}, false, nil
	}
	return scanAttachment(s.rdb.QueryRowContext(ctx, aSelect, id), id)
}

// AttachmentHeld reports whether thread holds id
// (agentbridge.AttachmentStore).
func (s *Store) AttachmentHeld(ctx context.Context, id, thread string) (held bool, err error) {
	defer s.guard(time.Now(), &err)
	if err := s.rdb.QueryRowContext(ctx, aHeld, id, thread).Scan(&held); err != nil {
		return false, fmt.Errorf("look up attachment %s in thread %s: %w", id, thread, err)
	}
	return held, nil
}

// OpenAttachment streams a stored attachment chunk by chunk from the read
// pool (agentbridge.AttachmentStore).
func (s *Store) OpenAttachment(ctx context.Context, id string) (_ io.ReadCloser, _ bool, err error) {
	defer s.guard(time.Now(), &err)
	a, found, err := s.Attachment(ctx, id)
	if err != nil || !found {
		return nil, false, err
	}
	return storecore.ChunkReader(ctx, a.Size, func(ctx context.Context, n int) ([]byte, bool, error) {
		var data []byte
		found, err := storecore.Found(s.rdb.QueryRowContext(ctx, aSelectChunk, id, n).Scan(&data))
		return data, found, err
	}), true, nil
}

// SweepAttachments removes the attachments no event names, last uploaded
// before cutoff (agentbridge.AttachmentStore): the candidates are read
// from the read pool, and each is deleted in a writer step of its own
// that checks again, so that an append naming it in between keeps it and
// a long sweep never holds the writer.
func (s *Store) SweepAttachments(ctx context.Context, cutoff time.Time) (n int, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.rdb.QueryContext(ctx, aCandidates, cutoff.UnixMilli(), storecore.SweepBatch)
	if err != nil {
		return 0, fmt.Errorf("find attachments to sweep: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("find attachments to sweep: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("find attachments to sweep: %w", err)
	}
	for _, id := range ids {
		err := s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
			res, err := conn.ExecContext(ctx, aSweepOne, id, cutoff.UnixMilli())
			if err != nil {
				return fmt.Errorf("sweep attachment %s: %w", id, err)
			}
			if k, _ := res.RowsAffected(); k == 0 {
				return nil
			}
			for _, q := range []string{`DELETE FROM attachment_chunks WHERE attachment = ?`, `DELETE FROM attachment_links WHERE attachment = ?`} {
				if _, err := conn.ExecContext(ctx, q, id); err != nil {
					return fmt.Errorf("sweep attachment %s: %w", id, err)
				}
			}
			n++
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// attachmentLookup answers lookups.Attachment from the writer's
// connection.
func (s *Store) attachmentLookup(ctx context.Context, id string) (agentbridge.Attachment, bool, error) {
	return scanAttachment(s.w.conn.QueryRowContext(ctx, aSelect, id), id)
}

// linkAttachments makes the event id of thread hold the attachments it
// names (storecore.Admission.Attachments).
func (s *Store) linkAttachments(ctx context.Context, thread, event string, ids []string) error {
	for _, id := range ids {
		if _, err := s.w.conn.ExecContext(ctx, aLink, id, thread, event); err != nil {
			return fmt.Errorf("link attachment %s to event %s: %w", id, event, err)
		}
	}
	return nil
}
