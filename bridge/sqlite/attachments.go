package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

var _ agentbridge.AttachmentStore = (*Store)(nil)

// Attachment statements.
const (
	aTouch  = `UPDATE attachments SET uploaded_ms = max(uploaded_ms, ?) WHERE id = ?`
	aInsert = `INSERT INTO attachments (id, name, type, size, created_ms, uploaded_ms) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET uploaded_ms = max(uploaded_ms, excluded.uploaded_ms)`
	aInsertChunk = `INSERT OR REPLACE INTO attachment_chunks (attachment, n, data) VALUES (?, ?, ?)`
	aChunkTotals = `SELECT count(*), coalesce(sum(length(data)), 0) FROM attachment_chunks WHERE attachment = ?`
	aOrphans     = `SELECT DISTINCT attachment FROM attachment_chunks c WHERE NOT EXISTS (SELECT 1 FROM attachments a WHERE a.id = c.attachment)`
)

// PutAttachment stores an upload (agentbridge.AttachmentStore). A file
// whose id is stored already is one short writer step (its upload time
// and a link). A new one is written a chunk per writer step, read from
// body outside the writer, so that appends go on between the chunks
// (docs/performance.md: a 25 MiB file in one step held them for over a
// second); then one step checks every chunk is there and inserts the row,
// which is what makes the file exist for readers, appends and the sweep.
// Chunks with no row are an upload under way, or one cut short, which
// the sweep removes unless this store is uploading them (uploads).
func (s *Store) PutAttachment(ctx context.Context, thread string, a agentbridge.Attachment, body io.Reader, now time.Time) (_ agentbridge.Attachment, err error) {
	defer s.GuardWrite(time.Now(), &err)
	if !agentbridge.ThreadIDPattern.MatchString(thread) {
		return agentbridge.Attachment{}, agentbridge.ThreadNotFound(thread)
	}
	stored, found, err := s.touchAttachment(ctx, thread, a, now)
	if err != nil || found {
		return stored, err
	}
	s.uploads.add(a.ID)
	defer s.uploads.done(a.ID)
	err = storecore.WriteChunks(body, a.Size, func(n int, data []byte) error {
		err := s.writeTx(ctx, func(ctx context.Context, c storecore.Conn) error {
			if _, err := c.Exec(ctx, aInsertChunk, a.ID, n, data); err != nil {
				return fmt.Errorf("insert chunk %d of attachment %s: %w", n, a.ID, err)
			}
			return nil
		})
		// A chunk is 256 pages of WAL: the background checkpoint copies
		// them now, so that the writer's own checkpoint, which every
		// append waits for, finds little left to copy.
		select {
		case s.checkpoint <- struct{}{}:
		default:
		}
		return err
	})
	if err != nil {
		return agentbridge.Attachment{}, err
	}
	r := s.newRequest(ctx)
	r.other = func(ctx context.Context, conn *sql.Conn) (response, error) {
		var n, size int64
		if err := conn.QueryRowContext(ctx, aChunkTotals, a.ID).Scan(&n, &size); err != nil {
			return response{}, fmt.Errorf("count the chunks of attachment %s: %w", a.ID, err)
		}
		if size != a.Size || n != chunksOf(a.Size) {
			return response{err: fmt.Errorf("attachment %s: %d chunks of %d bytes stored, not the %d bytes uploaded", a.ID, n, size, a.Size)}, nil
		}
		if _, err := conn.ExecContext(ctx, aInsert, a.ID, a.Name, a.Type, a.Size, now.UnixMilli(), now.UnixMilli()); err != nil {
			return response{}, fmt.Errorf("insert attachment %s: %w", a.ID, err)
		}
		if err := storecore.LinkAttachments(ctx, storecore.SQLConn(conn), thread, "", a.ID); err != nil {
			return response{}, err
		}
		return response{}, nil
	}
	if resp := s.submit(ctx, r); resp.err != nil {
		return agentbridge.Attachment{}, resp.err
	}
	return a, nil
}

// touchAttachment is an upload's first writer step: it checks the thread,
// and for bytes stored already moves their upload time, links them to
// thread and returns them as stored (found), under this upload's name.
func (s *Store) touchAttachment(ctx context.Context, thread string, a agentbridge.Attachment, now time.Time) (stored agentbridge.Attachment, found bool, err error) {
	r := s.newRequest(ctx)
	r.other = func(ctx context.Context, conn *sql.Conn) (response, error) {
		var one int
		if ok, err := storecore.Found(conn.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE id = ?`, thread).Scan(&one)); err != nil || !ok {
			if err != nil {
				return response{}, fmt.Errorf("look up thread %s: %w", thread, err)
			}
			return response{err: agentbridge.ThreadNotFound(thread)}, nil
		}
		if stored, found, err = storecore.LookupAttachment(ctx, storecore.SQLConn(conn), a.ID, ""); err != nil || !found {
			return response{}, err
		}
		if _, err := conn.ExecContext(ctx, aTouch, now.UnixMilli(), a.ID); err != nil {
			return response{}, fmt.Errorf("touch attachment %s: %w", a.ID, err)
		}
		if err := storecore.LinkAttachments(ctx, storecore.SQLConn(conn), thread, "", a.ID); err != nil {
			return response{}, err
		}
		return response{}, nil
	}
	if resp := s.submit(ctx, r); resp.err != nil {
		return agentbridge.Attachment{}, false, resp.err
	}
	if found {
		stored.Name = a.Name
	}
	return stored, found, nil
}

// chunksOf is how many chunks a file of size bytes is stored in.
func chunksOf(size int64) int64 {
	return (size + storecore.AttachmentChunk - 1) / storecore.AttachmentChunk
}

// uploadSet is the ids whose chunks this store is writing: the sweep of
// chunks without a row leaves them alone. Safe for concurrent use.
type uploadSet struct {
	mu  sync.Mutex
	ids map[string]int
}

func (u *uploadSet) add(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ids == nil {
		u.ids = map[string]int{}
	}
	u.ids[id]++
}

func (u *uploadSet) done(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ids[id]--; u.ids[id] <= 0 {
		delete(u.ids, id)
	}
}

func (u *uploadSet) has(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ids[id] > 0
}

// SweepAttachments removes the chunks of unfinished uploads, then the
// attachments no event names, last uploaded before cutoff
// (storecore.Engine.SweepAttachments).
func (s *Store) SweepAttachments(ctx context.Context, cutoff time.Time) (int, error) {
	if err := s.sweepOrphanChunks(ctx); err != nil {
		return 0, err
	}
	return s.Engine.SweepAttachments(ctx, cutoff)
}

// sweepOrphanChunks removes the chunks of uploads that stopped before
// their row was written (a bridge killed mid-upload, a body cut short),
// each id in a writer step that checks again that no row has come and
// that this store is not writing it now.
func (s *Store) sweepOrphanChunks(ctx context.Context) (err error) {
	defer s.Guard(time.Now(), &err)
	ids, err := storecore.List(ctx, s.Read, "chunks of unfinished uploads", storecore.ScanString, aOrphans)
	if err != nil {
		return err
	}
	for _, id := range ids {
		err := s.writeTx(ctx, func(ctx context.Context, c storecore.Conn) error {
			if s.uploads.has(id) {
				return nil
			}
			_, err := c.Exec(ctx, `DELETE FROM attachment_chunks WHERE attachment = ? AND NOT EXISTS (SELECT 1 FROM attachments WHERE id = ?)`, id, id)
			return err
		})
		if err != nil {
			return fmt.Errorf("remove the chunks of an unfinished upload: %w", err)
		}
	}
	return nil
}
