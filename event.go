package agentbridge

import (
	"bytes"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Known event types.
const (
	TypeMessage       = "message"
	TypeControl       = "control"
	TypeThreadCreated = "thread.created"
	TypeThreadRenamed = "thread.renamed"
)

// ToAll is the default recipient: everyone in the thread.
const ToAll = "all"

// TimeLayout is the format of Event.TS: UTC with exactly six fractional
// digits, so that string order is time order (the original's clients use
// since=<ts> as a cursor and compare strings).
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// FormatTime renders t in TimeLayout.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ParseTime reads a time written by FormatTime: the one parse of every
// stored or served timestamp (event ts, token expiry, invocation times).
func ParseTime(s string) (time.Time, error) { return time.Parse(TimeLayout, s) }

// Validation patterns shared by the server, the client and the coordinator.
var (
	// ParticipantIDPattern matches from, to and invited participant ids.
	ParticipantIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$`)
	// ThreadIDPattern matches client-chosen thread ids.
	ThreadIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	// TypePattern matches event types other than the known ones.
	TypePattern = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)
)

// MaxThreadNameLen bounds thread names, in bytes.
const MaxThreadNameLen = 200

// Event is one entry of a thread's append-only log. ID, Seq, GSeq, TS and
// Thread are assigned by the server.
type Event struct {
	ID      string          `json:"id"`
	Seq     int64           `json:"seq"`
	GSeq    int64           `json:"gseq"`
	TS      string          `json:"ts"`
	Thread  string          `json:"thread"`
	Type    string          `json:"type"`
	From    string          `json:"from"`
	To      string          `json:"to"`
	Content json.RawMessage `json:"content"`
	Meta    Meta            `json:"meta"`
}

// Text returns the content as a string: the string itself when the content
// is a JSON string, the raw JSON otherwise.
func (e Event) Text() string {
	var s string
	if err := json.Unmarshal(e.Content, &s); err == nil {
		return s
	}
	return string(e.Content)
}

// Meta is an event's metadata. The keys the system understands are typed;
// any other key is kept verbatim in Extra and written back out.
type Meta struct {
	// ReplyTo names an earlier event of the same thread.
	ReplyTo string
	// Tags are free-form labels; the coordinator uses "coordinator",
	// "error", "clarification" and "loop-guard".
	Tags []string
	// Via names the daemon that posted on a participant's behalf.
	Via string
	// Hop is the provenance hop count the bridge assigns to every message
	// (contract 5.1; nil on other events and on messages stored before
	// it). Clients may not send it: see Admit and AssignHop.
	Hop *int
	// Extra holds every other key as raw JSON.
	Extra map[string]json.RawMessage
}

// HasTag reports whether tag is among m.Tags.
func (m Meta) HasTag(tag string) bool {
	for _, t := range m.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

// metaKnown is Meta without Extra, its fields in sorted key order, so that
// encoding/json writes the same bytes MarshalJSON's general path would,
// without building and sorting a map for every event.
type metaKnown struct {
	Hop     *int     `json:"hop,omitzero"`
	ReplyTo string   `json:"reply_to,omitempty"`
	Tags    []string `json:"tags,omitzero"`
	Via     string   `json:"via,omitempty"`
}

// MarshalJSON writes the typed keys and Extra as one object, keys sorted.
// Tags are written when non-nil, so an empty list stays [].
func (m Meta) MarshalJSON() ([]byte, error) {
	if len(m.Extra) == 0 {
		return json.Marshal(metaKnown{Hop: m.Hop, ReplyTo: m.ReplyTo, Tags: m.Tags, Via: m.Via})
	}
	obj := make(map[string]json.RawMessage, len(m.Extra)+4)
	for k, v := range m.Extra {
		obj[k] = v
	}
	put := func(k string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		obj[k] = b
		return nil
	}
	if m.ReplyTo != "" {
		if err := put("reply_to", m.ReplyTo); err != nil {
			return nil, err
		}
	}
	if m.Tags != nil {
		if err := put("tags", m.Tags); err != nil {
			return nil, err
		}
	}
	if m.Via != "" {
		if err := put("via", m.Via); err != nil {
			return nil, err
		}
	}
	if m.Hop != nil {
		if err := put("hop", *m.Hop); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(obj[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON accepts null or an object; it checks the types of the known
// keys and keeps the rest in Extra. Errors are *Error with field "meta.<key>".
func (m *Meta) UnmarshalJSON(b []byte) error {
	*m = Meta{}
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return FieldErrorf(ECodeInvalidField, "meta", "meta must be a JSON object.")
	}
	// In key order, so that a meta with several malformed keys always gets
	// the same error.
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		v := obj[k]
		switch k {
		case "reply_to":
			if isNull(v) {
				continue
			}
			if err := json.Unmarshal(v, &m.ReplyTo); err != nil || m.ReplyTo == "" {
				return FieldErrorf(ECodeInvalidField, "meta.reply_to", "meta.reply_to must be the id of an event, as a string.")
			}
		case "tags":
			if isNull(v) {
				continue
			}
			if err := json.Unmarshal(v, &m.Tags); err != nil {
				return FieldErrorf(ECodeInvalidField, "meta.tags", "meta.tags must be an array of strings.")
			}
		case "via":
			if isNull(v) {
				continue
			}
			if err := json.Unmarshal(v, &m.Via); err != nil {
				return FieldErrorf(ECodeInvalidField, "meta.via", "meta.via must be a string.")
			}
		case "hop":
			if isNull(v) {
				continue
			}
			var h int
			if err := json.Unmarshal(v, &h); err != nil || h < 0 {
				return FieldErrorf(ECodeInvalidField, "meta.hop", "meta.hop must be a non-negative integer.")
			}
			m.Hop = &h
		default:
			if m.Extra == nil {
				m.Extra = make(map[string]json.RawMessage)
			}
			m.Extra[k] = v
		}
	}
	return nil
}

func isNull(b json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

// EventInput is what a client posts to append an event. The zero values of
// Type and To mean "message" and "all".
type EventInput struct {
	Type    string          `json:"type,omitempty"`
	From    string          `json:"from"`
	To      string          `json:"to,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`
	Meta    Meta            `json:"meta"`
}

// serverFields are assigned by the server; a client that sends one is told
// so rather than told the field is unknown.
var serverFields = map[string]bool{"id": true, "seq": true, "gseq": true, "ts": true, "thread": true}

var inputFields = map[string]bool{"type": true, "from": true, "to": true, "content": true, "meta": true}

// ParseEventInput parses a request body into an EventInput without
// Validate: it refuses what is not an event's shape (bad JSON,
// server-assigned or unknown fields, wrong JSON types) but checks no
// content rule. It is for callers that hand the
// input to something that validates it anyway, such as an EventStore's
// Append, so that an append is validated once.
func ParseEventInput(body []byte) (EventInput, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		if err := CheckJSONDepth(body); err != nil {
			return EventInput{}, err
		}
		if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) || !json.Valid(body) {
			return EventInput{}, Errorf(ECodeInvalidJSON, "The request body is not valid JSON: %s.", jsonErrText(err))
		}
		return EventInput{}, Errorf(ECodeInvalidJSON, "The request body must be a JSON object.")
	}
	if raw == nil {
		return EventInput{}, Errorf(ECodeInvalidJSON, "The request body must be a JSON object.")
	}
	if err := CheckJSONBody(body); err != nil {
		return EventInput{}, err
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if serverFields[k] {
			return EventInput{}, FieldErrorf(ECodeFieldNotAllowed, k, "The field %q is assigned by the server; leave it out.", k)
		}
	}
	for _, k := range keys {
		if !inputFields[k] {
			return EventInput{}, FieldErrorf(ECodeUnknownField, k, "The field %q is not part of an event; known fields are type, from, to, content and meta.", k)
		}
	}
	var in EventInput
	for _, k := range keys {
		v := raw[k]
		switch k {
		case "type", "from", "to":
			var s string
			if isNull(v) {
				continue
			}
			if err := json.Unmarshal(v, &s); err != nil {
				return EventInput{}, FieldErrorf(ECodeInvalidField, k, "The field %q must be a string.", k)
			}
			if s == "" && k != "from" {
				// Only an absent (or null) type or to takes the default:
				// an empty string is more likely a client's bug.
				return EventInput{}, FieldErrorf(ECodeInvalidField, k, "The field %q must not be empty; leave it out to take the default (%s).", k, fieldDefault(k))
			}
			switch k {
			case "type":
				in.Type = s
			case "from":
				in.From = s
			case "to":
				in.To = s
			}
		case "content":
			if !isNull(v) {
				in.Content = append(json.RawMessage(nil), bytes.TrimSpace(v)...)
			}
		case "meta":
			if err := json.Unmarshal(v, &in.Meta); err != nil {
				return EventInput{}, err
			}
		}
	}
	return in, nil
}

// fieldDefault says what an absent event field means, for error messages.
func fieldDefault(k string) string {
	switch k {
	case "type":
		return "a message"
	case "to":
		return "everyone"
	}
	return "none: it is required"
}

func jsonErrText(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "json: ")
	return strings.TrimSuffix(s, ".")
}

// Validate applies defaults and checks every content rule that does not need
// the store (reply_to existence, mute and pause are checked on append).
func (in *EventInput) Validate() error {
	_, err := in.validate()
	return err
}

// validate is Validate, returning a control event's parsed control (nil
// for any other type) for AppendRequest.Validate to hand on.
func (in *EventInput) validate() (*Control, error) {
	if in.Type == "" {
		in.Type = TypeMessage
	}
	if in.To == "" {
		in.To = ToAll
	}
	if in.From == "" {
		return nil, FieldErrorf(ECodeMissingField, "from", "The field \"from\" is required: say who is speaking.")
	}
	if !ParticipantIDPattern.MatchString(in.From) {
		return nil, FieldErrorf(ECodeInvalidField, "from", "The sender id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(in.From, QuoteRunes))
	}
	if !ParticipantIDPattern.MatchString(in.To) {
		return nil, FieldErrorf(ECodeInvalidField, "to", "The recipient id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(in.To, QuoteRunes))
	}
	if _, err := EventAttachments(in.Meta); err != nil {
		return nil, err
	}
	if in.Type != TypeControl {
		return nil, in.checkContent()
	}
	if len(in.Content) == 0 {
		return nil, FieldErrorf(ECodeMissingField, "content", "A control event needs content: a JSON object such as {\"pause\":{\"on\":true}}.")
	}
	c, err := checkControl(in.Content)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// checkContent checks the content (and the type) of an event that is not
// a control, by its type.
func (in *EventInput) checkContent() error {
	switch in.Type {
	case TypeMessage:
		return checkMessageContent(in.Content)
	case TypeSceneClosed:
		var reason string
		if json.Unmarshal(in.Content, &reason) != nil || !slices.Contains(closeReasons, reason) {
			return FieldErrorf(ECodeInvalidField, "content", "A scene.closed event's content must be its close reason, one of %s, as a string.", strings.Join(closeReasons, ", "))
		}
	case TypeJournal:
		var s string
		if json.Unmarshal(in.Content, &s) != nil || strings.TrimSpace(s) == "" {
			return FieldErrorf(ECodeInvalidField, "content", "A journal entry's content must be non-empty text, as a string.")
		}
	case TypeThreadCreated, TypeThreadRenamed:
		return checkNameContent(in.Type, in.Content)
	default:
		if !TypePattern.MatchString(in.Type) {
			return FieldErrorf(ECodeInvalidField, "type", "The event type %q is not valid: use up to 64 lowercase letters, digits or _ . -, starting with a letter.", Clip(in.Type, QuoteRunes))
		}
	}
	return nil
}

// checkMessageContent checks a message's content: non-blank text.
func checkMessageContent(content json.RawMessage) error {
	var s string
	if len(content) == 0 {
		return FieldErrorf(ECodeMissingField, "content", "A message needs content.")
	}
	if err := json.Unmarshal(content, &s); err != nil {
		return FieldErrorf(ECodeInvalidField, "content", "A message's content must be a string.")
	}
	if strings.TrimSpace(s) == "" {
		return FieldErrorf(ECodeInvalidField, "content", "A message's content must not be empty.")
	}
	return nil
}

// checkNameContent checks the content of a thread.created or
// thread.renamed event: the thread's name, as a string.
func checkNameContent(typ string, content json.RawMessage) error {
	if len(content) == 0 {
		return FieldErrorf(ECodeMissingField, "content", "A %s event needs the thread's name as content.", typ)
	}
	var s string
	if err := json.Unmarshal(content, &s); err != nil {
		return FieldErrorf(ECodeInvalidField, "content", "A %s event's content must be the thread's name, as a string.", typ)
	}
	return ValidateThreadName(s)
}

// ValidateThreadName checks a thread name: non-blank, at most
// MaxThreadNameLen bytes, valid UTF-8.
func ValidateThreadName(name string) error {
	if strings.TrimSpace(name) == "" {
		return FieldErrorf(ECodeInvalidField, "name", "A thread name must not be empty.")
	}
	if len(name) > MaxThreadNameLen || !utf8.ValidString(name) {
		return FieldErrorf(ECodeInvalidField, "name", "A thread name must be valid text of at most %d bytes.", MaxThreadNameLen)
	}
	return nil
}
