package storecore

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// ChunkReader reads an attachment of size bytes chunk by chunk through
// fetch (one query per chunk), never holding more than one chunk. A
// chunk missing before the end (the file swept while read) is an error.
func ChunkReader(ctx context.Context, size int64, fetch func(ctx context.Context, n int) (data []byte, found bool, err error)) io.ReadCloser {
	return &chunkReader{ctx: ctx, left: size, fetch: fetch}
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
