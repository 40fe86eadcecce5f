package storecore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// AttachmentChunk is the most bytes of an attachment one row holds: a
// download reads one chunk at a time, so a 25 MiB file never sits whole
// in the bridge's memory, and a row stays far under either database's
// limits.
const AttachmentChunk = 1 << 20

// SweepBatch caps the attachments one sweep looks at; the next sweep
// takes the rest.
const SweepBatch = 256

// ErrUploadRead wraps WriteChunks' failures to read the body (not the
// database's), which a store answers without failing its other writes.
var ErrUploadRead = errors.New("read the upload")

// WriteChunks reads size bytes from body and hands them to put as chunks
// of AttachmentChunk bytes, numbered from 0. A body that ends early or
// holds more is an error wrapping ErrUploadRead: the caller measured it.
func WriteChunks(body io.Reader, size int64, put func(n int, data []byte) error) error {
	buf := make([]byte, min(size, AttachmentChunk))
	for n, left := 0, size; left > 0; n++ {
		chunk := buf[:min(left, AttachmentChunk)]
		if _, err := io.ReadFull(body, chunk); err != nil {
			return fmt.Errorf("%w: %w", ErrUploadRead, err)
		}
		if err := put(n, chunk); err != nil {
			return err
		}
		left -= int64(len(chunk))
	}
	var one [1]byte
	if k, _ := body.Read(one[:]); k > 0 {
		return fmt.Errorf("%w: more bytes than measured", ErrUploadRead)
	}
	return nil
}

var _ interface {
	Attachment(ctx context.Context, id string) (agentbridge.Attachment, bool, error)
	AttachmentHeld(ctx context.Context, id, thread string) (bool, error)
	OpenAttachment(ctx context.Context, id string) (io.ReadCloser, bool, error)
	SweepAttachments(ctx context.Context, cutoff time.Time) (int, error)
} = (*Engine)(nil)

// attachmentSelect reads an attachment's row (scanAttachment).
const attachmentSelect = `SELECT name, type, size FROM attachments WHERE id = ?`

// LookupAttachment reads attachment id on c; lock ends the query (an
// append's FOR KEY SHARE on PostgreSQL).
func LookupAttachment(ctx context.Context, c Conn, id, lock string) (agentbridge.Attachment, bool, error) {
	a := agentbridge.Attachment{ID: id}
	found, err := Found(c.QueryRow(ctx, attachmentSelect+lock, id).Scan(&a.Name, &a.Type, &a.Size))
	if err != nil {
		return a, false, fmt.Errorf("load attachment %s: %w", id, err)
	}
	return a, found, nil
}

// LinkAttachments makes the event of thread hold the attachments ids
// ("" for an upload's own link), on c.
func LinkAttachments(ctx context.Context, c Conn, thread, event string, ids ...string) error {
	for _, id := range ids {
		if _, err := c.Exec(ctx, `INSERT INTO attachment_links (attachment, thread, event) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, id, thread, event); err != nil {
			return fmt.Errorf("link attachment %s to event %q: %w", id, event, err)
		}
	}
	return nil
}

// Attachment reads a stored attachment (agentbridge.AttachmentStore).
func (e *Engine) Attachment(ctx context.Context, id string) (_ agentbridge.Attachment, _ bool, err error) {
	defer e.Guard(time.Now(), &err)
	if !agentbridge.AttachmentIDPattern.MatchString(id) {
		return agentbridge.Attachment{}, false, nil
	}
	return LookupAttachment(ctx, e.Read, id, "")
}

// AttachmentHeld reports whether thread holds id
// (agentbridge.AttachmentStore).
func (e *Engine) AttachmentHeld(ctx context.Context, id, thread string) (held bool, err error) {
	defer e.Guard(time.Now(), &err)
	var n int
	if err := e.Read.QueryRow(ctx, `SELECT count(*) FROM attachment_links WHERE attachment = ? AND thread = ?`, id, thread).Scan(&n); err != nil {
		return false, fmt.Errorf("look up attachment %s in thread %s: %w", id, thread, err)
	}
	return n > 0, nil
}

// OpenAttachment streams a stored attachment (agentbridge.AttachmentStore):
// its row, then, as the caller reads, one chunk per read, never more than
// one chunk in memory. A chunk missing before the end (the file swept
// while read) is an error of the read.
func (e *Engine) OpenAttachment(ctx context.Context, id string) (_ io.ReadCloser, _ bool, err error) {
	defer e.Guard(time.Now(), &err)
	a, found, err := e.Attachment(ctx, id)
	if err != nil || !found {
		return nil, false, err
	}
	fetch := func(ctx context.Context, n int) (data []byte, found bool, err error) {
		found, err = Found(e.Read.QueryRow(ctx, `SELECT data FROM attachment_chunks WHERE attachment = ? AND n = ?`, id, n).Scan(&data))
		return data, found, err
	}
	return &chunkReader{ctx: ctx, left: a.Size, fetch: fetch}, true, nil
}

type chunkReader struct {
	ctx   context.Context
	left  int64 // bytes not yet fetched
	n     int   // the next chunk to fetch
	cur   []byte
	fetch func(ctx context.Context, n int) ([]byte, bool, error)
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.left <= 0 {
			return 0, io.EOF
		}
		data, found, err := r.fetch(r.ctx, r.n)
		if err != nil {
			return 0, fmt.Errorf("read attachment chunk %d: %w", r.n, err)
		}
		if !found || len(data) == 0 || int64(len(data)) > r.left {
			return 0, fmt.Errorf("read attachment chunk %d: %w", r.n, errChunkMissing)
		}
		r.cur, r.left, r.n = data, r.left-int64(len(data)), r.n+1
	}
	k := copy(p, r.cur)
	r.cur = r.cur[k:]
	return k, nil
}

func (r *chunkReader) Close() error { r.cur, r.left = nil, 0; return nil }

var errChunkMissing = errors.New("the attachment's bytes are missing (removed while read?)")

// unreferenced is true of an attachment no event names (a link to no
// event is an upload's to its thread).
const unreferenced = `NOT EXISTS (SELECT 1 FROM attachment_links l WHERE l.attachment = attachments.id AND l.event <> '')`

// SweepAttachments removes the attachments no event names, last uploaded
// before cutoff (agentbridge.AttachmentStore). The candidates are read
// from what is committed, then each is deleted in a write transaction of
// its own that checks again, so that an append naming it in between keeps
// it and a long sweep never holds SQLite's writer. On PostgreSQL the row
// is locked first, and skipped when another bridge's sweep, an upload or
// an append holds it; an append that comes after finds it gone
// (unknown_attachment).
func (e *Engine) SweepAttachments(ctx context.Context, cutoff time.Time) (n int, err error) {
	defer e.Guard(time.Now(), &err)
	ids, err := List(ctx, e.Read, "attachments to sweep", ScanString,
		`SELECT id FROM attachments WHERE uploaded_ms < ? AND `+unreferenced+` ORDER BY uploaded_ms LIMIT ?`, cutoff.UnixMilli(), SweepBatch)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		var deleted bool
		err := e.Write(ctx, func(ctx context.Context, c Conn) error {
			deleted = false
			if e.PG {
				var one int
				locked, err := Found(c.QueryRow(ctx, `SELECT 1 FROM attachments WHERE id = ? AND uploaded_ms < ? FOR UPDATE SKIP LOCKED`,
					id, cutoff.UnixMilli()).Scan(&one))
				if err != nil || !locked {
					return err
				}
			}
			k, err := c.Exec(ctx, `DELETE FROM attachments WHERE id = ? AND uploaded_ms < ? AND `+unreferenced, id, cutoff.UnixMilli())
			if err != nil || k == 0 {
				return err
			}
			for _, q := range []string{`DELETE FROM attachment_chunks WHERE attachment = ?`, `DELETE FROM attachment_links WHERE attachment = ?`} {
				if _, err := c.Exec(ctx, q, id); err != nil {
					return err
				}
			}
			deleted = true
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("sweep attachment %s: %w", id, err)
		}
		if deleted {
			n++
		}
	}
	return n, nil
}
