package agentbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Attachment is a file in a thread (contract 8.2): its id is the SHA-256
// of its bytes ("sha256:<hex>"), so the same bytes are stored once; Type is
// what the bridge sniffed from the bytes, never what a client said; Name is
// the file name a person or an agent gave it (cleaned: CleanAttachmentName).
type Attachment struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

// AttachmentIDPattern matches an attachment id.
var AttachmentIDPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// DefaultAttachmentMaxBytes is the largest attachment a bridge takes when
// its config sets no attachments.max_bytes: 25 MiB, a phone's photo or
// screen recording, a log file.
const DefaultAttachmentMaxBytes = 25 << 20

// AttachmentGrace is how long an uploaded attachment that no event
// references is kept: the time a client has between the upload and the
// event that points at it. Each upload of the same bytes starts it again.
const AttachmentGrace = 24 * time.Hour

// MaxEventAttachments caps meta.attachments of one event.
const MaxEventAttachments = 32

// MaxAttachmentNameLen caps an attachment's name, in bytes.
const MaxAttachmentNameLen = 255

// MetaAttachments is the meta key of an event's attachments.
const MetaAttachments = "attachments"

// ECodeUnknownAttachment refuses an event whose meta names an attachment
// the bridge does not hold; ECodeTooLarge an upload over the bridge's
// attachments.max_bytes; ECodeAttachmentNotFound a download of an id the
// credential cannot see.
const (
	ECodeUnknownAttachment  = "unknown_attachment"
	ECodeTooLarge           = "too_large"
	ECodeAttachmentNotFound = "attachment_not_found"
)

// CleanAttachmentName makes a client's file name safe to show and to write
// to disk: its last path element only (either slash), control and
// formatting characters dropped, leading dots and spaces trimmed (no
// hidden or relative names), cut to MaxAttachmentNameLen bytes on a rune
// boundary; "file" when nothing is left.
func CleanAttachmentName(name string) string {
	name = strings.ToValidUTF8(name, "")
	name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, name)
	name = strings.TrimLeft(strings.TrimSpace(name), ". ")
	if len(name) > MaxAttachmentNameLen {
		cut := MaxAttachmentNameLen
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut]
	}
	if name == "" || name == "/" {
		return "file"
	}
	return name
}

// attachmentRef is one entry of meta.attachments as a client sends it:
// the id is required; name, type and size are optional, and the store
// writes the stored type and size over whatever a client said.
type attachmentRef struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Type json.RawMessage `json:"type"`
	Size json.RawMessage `json:"size"`
}

// EventAttachments reads meta.attachments: each entry's id and cleaned
// name (empty when the client gave none). A malformed list is an
// invalid_field error naming the entry.
func EventAttachments(m Meta) ([]Attachment, error) {
	raw, ok := m.Extra[MetaAttachments]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var refs []attachmentRef
	if err := json.Unmarshal(raw, &refs); err != nil {
		return nil, FieldErrorf(ECodeInvalidField, "meta.attachments",
			"meta.attachments must be an array of objects such as {\"id\": \"sha256:…\", \"name\": \"shot.png\"}, as POST /threads/{id}/attachments answered.")
	}
	if len(refs) > MaxEventAttachments {
		return nil, FieldErrorf(ECodeInvalidField, "meta.attachments", "An event may carry at most %d attachments; this one names %d.", MaxEventAttachments, len(refs))
	}
	out := make([]Attachment, 0, len(refs))
	for i, r := range refs {
		if !AttachmentIDPattern.MatchString(r.ID) {
			return nil, FieldErrorf(ECodeInvalidField, fmt.Sprintf("meta.attachments[%d].id", i),
				"meta.attachments[%d].id must be an attachment id, \"sha256:\" and 64 hex digits, as the upload answered (got %q).", i, Clip(r.ID, QuoteRunes))
		}
		a := Attachment{ID: r.ID}
		if r.Name != "" {
			a.Name = CleanAttachmentName(r.Name)
		}
		out = append(out, a)
	}
	return out, nil
}

// ChangeDiff is the attachment id of meta.change.diff (contract 8.1: a
// run's unified diff), "" when the event has none. The bridge checks it is
// stored as it checks meta.attachments, and it makes the thread hold the
// diff as an attachment.
func ChangeDiff(m Meta) string {
	raw, ok := m.Extra["change"]
	if !ok {
		return ""
	}
	var c struct {
		Diff string `json:"diff"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return ""
	}
	return c.Diff
}

// NormalizeAttachments is meta with its attachments written as stored:
// each entry {id, name, type, size} from stored (by id), the name the
// client gave or else the stored one. m is not changed (its Extra map
// may be a client's request's); the result shares nothing with it that
// is changed.
func NormalizeAttachments(m Meta, given []Attachment, stored map[string]Attachment) (Meta, error) {
	list := make([]Attachment, len(given))
	for i, a := range given {
		s := stored[a.ID]
		if a.Name != "" {
			s.Name = a.Name
		}
		list[i] = s
	}
	b, err := json.Marshal(list)
	if err != nil {
		return m, fmt.Errorf("encode meta.attachments: %w", err)
	}
	extra := make(map[string]json.RawMessage, len(m.Extra))
	for k, v := range m.Extra {
		extra[k] = v
	}
	extra[MetaAttachments] = b
	m.Extra = extra
	return m, nil
}

// UnknownAttachment is the refusal of an event that names an attachment
// the bridge does not hold.
func UnknownAttachment(thread, id string) *Error {
	return &Error{Code: ECodeUnknownAttachment, Field: "meta.attachments", Thread: thread,
		Message: fmt.Sprintf("The attachment %s is not stored on this bridge (never uploaded, or removed a day after an upload no event pointed at); upload the file first with POST /threads/{id}/attachments. Nothing was stored.", Clip(id, QuoteRunes))}
}

// AttachmentStore keeps attachments (contract 8.2) in the bridge's store,
// so that every bridge on a database serves them. Implementations are
// safe for concurrent use. The append side is the EventStore's: an event
// naming an attachment that is not stored is refused there
// (unknown_attachment), and the event then holds it.
type AttachmentStore interface {
	// PutAttachment stores an upload to thread (thread_not_found when
	// there is none): a's ID, Type and Size are the caller's reading of
	// body's bytes, a.Name the cleaned name. When the id is stored
	// already, body is not read and the stored row is kept (its type,
	// size and first name); its upload time becomes now either way, and
	// the thread holds it. It returns a with the stored type and size.
	PutAttachment(ctx context.Context, thread string, a Attachment, body io.Reader, now time.Time) (Attachment, error)
	// Attachment returns the stored attachment id (its first name);
	// found is false when there is none.
	Attachment(ctx context.Context, id string) (a Attachment, found bool, err error)
	// AttachmentHeld reports whether thread holds id: it was uploaded to
	// thread, or an event of thread names it.
	AttachmentHeld(ctx context.Context, id, thread string) (bool, error)
	// OpenAttachment returns the bytes of id, read from the store as the
	// caller reads (never the whole file in memory); found is false when
	// there is none.
	OpenAttachment(ctx context.Context, id string) (r io.ReadCloser, found bool, err error)
	// SweepAttachments removes the attachments last uploaded before
	// cutoff that no event names, and returns how many. Several bridges
	// may sweep one database at once, and an append naming one of them
	// either keeps it or is refused unknown_attachment.
	SweepAttachments(ctx context.Context, cutoff time.Time) (int, error)
}
