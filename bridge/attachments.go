package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// Attachments (contract 8.2, docs/api.md "Attachments"): an upload is
// spooled to a temporary file while it is hashed, measured and sniffed,
// so that neither a large nor an endless body sits in memory, and only
// then handed to the store; a download streams from the store chunk by
// chunk with headers that keep a browser from running what it holds.

// Defaults of the attachment options.
const (
	// DefaultAttachmentSweep is how often the bridge removes the
	// attachments no event named within agentbridge.AttachmentGrace.
	DefaultAttachmentSweep = time.Hour
	// uploadTimeout is how long an upload's body may take to arrive, in
	// place of the request timeout: 25 MiB from a phone on a slow uplink
	// takes minutes, and the sender has shown a credential before any of
	// it is read.
	uploadTimeout = 10 * time.Minute
	// multipartSlack is what a multipart body may hold beyond the file:
	// the part headers and boundaries, and small fields.
	multipartSlack = 64 << 10
	// sniffLen is how much of a file the type is sniffed from (the
	// WHATWG algorithm's own limit).
	sniffLen = 512
)

// attachmentCSP is the Content-Security-Policy of every download: the
// file may load nothing and runs sandboxed, so that even a browser that
// renders it (an image, plain text) gives it no script and no origin.
const attachmentCSP = "default-src 'none'; img-src 'self'; media-src 'self'; style-src 'unsafe-inline'; sandbox"

// isUpload reports whether r is an upload (httpguard.Options.Upload).
func isUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/threads/") && strings.HasSuffix(r.URL.Path, "/attachments") &&
		strings.Count(r.URL.Path, "/") == 3
}

// tooLarge is the refusal of an upload over the limit.
func tooLarge(limit int64) error {
	return agentbridge.Errorf(agentbridge.ECodeTooLarge,
		"The file is larger than this bridge takes (%s; attachments.max_bytes in its --bridge-config file). Nothing was stored.", byteSize(limit))
}

// byteSize writes n bytes for a person: "25 MiB", "512 KiB", "100 bytes".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// mayUpload checks that cred may post in thread: a person or a
// coordinator in any thread, an agent in its own.
func mayUpload(cred httpguard.Credential, thread string) error {
	if cred.Scope == agentbridge.ScopeAgent && cred.Thread != thread {
		return forbiddenThread(cred, thread)
	}
	return nil
}

// handleAttachmentPost is POST /threads/{id}/attachments: a multipart
// field "file", or the raw body named by ?name=.
func (s *Server) handleAttachmentPost(w http.ResponseWriter, r *http.Request) error {
	thread := chi.URLParam(r, "id")
	q, err := parseQuery(r, queryUpload)
	if err != nil {
		return err
	}
	cred, _ := httpguard.CredentialFrom(r.Context())
	if err := mayUpload(cred, thread); err != nil {
		return err
	}
	limit := s.opts.AttachmentMaxBytes
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.ContentLength > limit &&
		(mt != "multipart/form-data" || r.ContentLength > limit+multipartSlack) {
		// Refused before a byte is read; the connection closes rather
		// than take the rest.
		w.Header().Set("Connection", "close")
		return tooLarge(limit)
	}
	// The body may take longer than the request timeout (uploadTimeout);
	// a writer that cannot move the deadline keeps the usual one.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(uploadTimeout))
	body, name, err := uploadBody(w, r, q.str("name"), limit)
	if err != nil {
		return err
	}
	a, f, err := s.spool(body, name, limit)
	if err != nil {
		if agentbridge.ErrorCode(err) == agentbridge.ECodeTooLarge {
			w.Header().Set("Connection", "close")
		}
		return err
	}
	defer removeSpool(f)
	got, err := s.store.PutAttachment(r.Context(), thread, a, f, s.now())
	if err != nil {
		return storeErr("store attachment", err)
	}
	httpjson.Write(w, http.StatusOK, struct {
		Attachment agentbridge.Attachment `json:"attachment"`
	}{got})
	return nil
}

// uploadBody finds the file in r: the part of a multipart body named
// "file" (its file name, else name), or the raw body, which needs name.
func uploadBody(w http.ResponseWriter, r *http.Request, name string, limit int64) (io.Reader, string, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		if name == "" {
			return nil, "", agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "name",
				"A raw upload needs the file's name as ?name=, such as ?name=shot.png (or send it as multipart/form-data, field \"file\").")
		}
		return r.Body, name, nil
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit+multipartSlack)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, "", agentbridge.Errorf(agentbridge.ECodeInvalidField, "The multipart body cannot be read: %v.", err)
	}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, "", agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "file",
				"The multipart body has no field \"file\"; send the file in a field of that name (curl -F file=@FILE).")
		}
		if err != nil {
			return nil, "", uploadReadErr(err, limit)
		}
		if p.FormName() != "file" {
			continue
		}
		if fn := p.FileName(); fn != "" {
			name = fn
		}
		return p, name, nil
	}
}

// uploadReadErr is the answer to a body that failed to read: too_large
// when it went past the cap, a request timeout as it is, else invalid.
func uploadReadErr(err error, limit int64) error {
	var mbe *http.MaxBytesError
	var ae *agentbridge.Error
	switch {
	case errors.As(err, &mbe):
		return tooLarge(limit)
	case errors.As(err, &ae):
		return ae
	}
	return fmt.Errorf("read the upload: %w", err)
}

// spool copies body into a temporary file in the attachment folder while
// it hashes it, counts it and keeps its first bytes, and returns the
// attachment it is and the file, at its start. Over limit it stops at
// limit+1 bytes (too_large), and the file is gone.
func (s *Server) spool(body io.Reader, name string, limit int64) (agentbridge.Attachment, *os.File, error) {
	f, err := os.CreateTemp(s.opts.AttachmentDir, "agent-bridge-upload-*")
	if err != nil {
		return agentbridge.Attachment{}, nil, fmt.Errorf("spool the upload: %w", err)
	}
	h := agentbridge.NewAttachmentHash()
	head := &prefixWriter{max: sniffLen}
	n, err := io.Copy(io.MultiWriter(f, h, head), io.LimitReader(body, limit+1))
	switch {
	case err != nil:
		removeSpool(f)
		return agentbridge.Attachment{}, nil, uploadReadErr(err, limit)
	case n > limit:
		removeSpool(f)
		return agentbridge.Attachment{}, nil, tooLarge(limit)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		removeSpool(f)
		return agentbridge.Attachment{}, nil, fmt.Errorf("spool the upload: %w", err)
	}
	return agentbridge.Attachment{
		ID:   h.ID(),
		Name: agentbridge.CleanAttachmentName(name),
		Type: SniffType(head.b),
		Size: n,
	}, f, nil
}

// removeSpool closes and removes a spooled upload.
func removeSpool(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// prefixWriter keeps the first max bytes written to it.
type prefixWriter struct {
	b   []byte
	max int
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if room := p.max - len(p.b); room > 0 {
		p.b = append(p.b, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

// SniffType is an attachment's type, from its first bytes only: the
// WHATWG sniffing algorithm (net/http.DetectContentType), which never
// answers a type that would run script where the file is shown inline,
// and a unified diff, which it reads as plain text, as text/x-diff.
func SniffType(head []byte) string {
	t := http.DetectContentType(head)
	if strings.HasPrefix(t, "text/plain") && looksLikeDiff(head) {
		return strings.Replace(t, "text/plain", "text/x-diff", 1)
	}
	return t
}

// looksLikeDiff reports whether text starts as a unified diff does: a
// "diff --git" line, or "--- " followed by "+++ ".
func looksLikeDiff(head []byte) bool {
	s := string(head)
	if strings.HasPrefix(s, "diff --git ") {
		return true
	}
	first, rest, ok := strings.Cut(s, "\n")
	return ok && strings.HasPrefix(first, "--- ") && strings.HasPrefix(rest, "+++ ")
}

// ShownInline reports whether a browser may show an attachment of type t
// in the page rather than download it: the raster images the sniffer
// recognises, and plain text. Everything else is served as a download.
func ShownInline(t string) bool {
	mt, _, _ := mime.ParseMediaType(t)
	return mt == "text/plain" || (strings.HasPrefix(mt, "image/") && mt != "image/svg+xml")
}

// handleAttachmentGet is GET /attachments/{id}: the bytes with their
// sniffed type, to any credential that can read a thread holding it (an
// agent token: its own thread), as an immutable private response.
func (s *Server) handleAttachmentGet(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r, queryNone); err != nil {
		return err
	}
	// A client that escaped the colon (sha256%3A…) means the same id.
	id, _ := url.PathUnescape(chi.URLParam(r, "id"))
	notFound := agentbridge.Errorf(agentbridge.ECodeAttachmentNotFound, "There is no attachment %s here.", agentbridge.Clip(id, agentbridge.QuoteRunes))
	a, found, err := s.store.Attachment(r.Context(), id)
	if err != nil {
		return storeErr("read attachment", err)
	}
	if !found {
		return notFound
	}
	if cred, _ := httpguard.CredentialFrom(r.Context()); cred.Scope == agentbridge.ScopeAgent {
		// Not forbidden: an agent of another thread learns nothing, not
		// even that these bytes are stored.
		held, err := s.store.AttachmentHeld(r.Context(), id, cred.Thread)
		if err != nil {
			return storeErr("read attachment", err)
		}
		if !held {
			return notFound
		}
	}
	h := w.Header()
	etag := `"` + a.ID + `"`
	h.Set("ETag", etag)
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", attachmentCSP)
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	body, found, err := s.store.OpenAttachment(r.Context(), id)
	if err != nil {
		return storeErr("read attachment", err)
	}
	if !found {
		return notFound
	}
	defer body.Close()
	disposition := "attachment"
	if ShownInline(a.Type) {
		disposition = "inline"
	}
	if cd := mime.FormatMediaType(disposition, map[string]string{"filename": a.Name}); cd != "" {
		disposition = cd
	}
	h.Set("Content-Type", a.Type)
	h.Set("Content-Disposition", disposition)
	h.Set("Content-Length", strconv.FormatInt(a.Size, 10))
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, body); err != nil && r.Context().Err() == nil {
		// The status is sent: the client sees a short body, and the log
		// says why.
		s.log.Warn("send attachment", "id", id, "request_id", requestID(w), "err", err)
	}
	return nil
}

// sweepAttachments removes the attachments no event named within
// agentbridge.AttachmentGrace of their last upload, at once and then
// every AttachmentSweep, until ctx ends. Bridges sharing a database sweep
// it side by side (the store makes that safe).
func (s *Server) sweepAttachments(ctx context.Context) {
	tick := time.NewTicker(s.opts.AttachmentSweep)
	defer tick.Stop()
	for {
		n, err := s.store.SweepAttachments(ctx, s.now().Add(-agentbridge.AttachmentGrace))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("sweep attachments", "err", err)
		case n > 0:
			s.log.Info("removed attachments no event named", "removed", n, "grace", agentbridge.AttachmentGrace.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
