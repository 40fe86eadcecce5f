// Package storecore holds what the SQLite and PostgreSQL event stores do
// alike below the shared rules of the root package: the stored form of
// meta and of a thread's state, the strictly increasing timestamps, an
// append's preamble (append.go), the rows both read (rows.go) and their
// common errors. One copy, so that the two stores cannot drift.
package storecore

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// PrepareAppend is what an append hands its store's writer: req
// validated, its control parsed (once, by Validate), and its meta encoded
// as stored (StoredMeta).
func PrepareAppend(req *agentbridge.AppendRequest) (*agentbridge.Control, string, error) {
	ctl, err := req.Validate()
	if err != nil {
		return nil, "", err
	}
	meta, err := StoredMeta(&req.Input.Meta)
	return ctl, meta, err
}

// StoredMeta encodes m as it is stored and turns m into what readers will
// decode from that (see MetaIsStoredForm).
func StoredMeta(m *agentbridge.Meta) (string, error) {
	b, err := m.MarshalJSON()
	if err != nil {
		return "", fmt.Errorf("encode meta: %w", err)
	}
	if !MetaIsStoredForm(*m) {
		// Decoded into a fresh value, not into m, so that m (the caller's
		// request, on its stack) does not escape to the heap.
		fresh := new(agentbridge.Meta)
		if err := json.Unmarshal(b, fresh); err != nil {
			return "", fmt.Errorf("decode meta: %w", err)
		}
		*m = *fresh
	}
	return string(b), nil
}

// MetaIsStoredForm reports whether m decodes from its own encoding
// unchanged, so that StoredMeta can skip decoding what it just encoded
// (every meta a client posts without extra keys). Extra keys, invalid UTF-8
// (encoded as U+FFFD) and a negative hop (refused by the decoder) take the
// round trip, so the event Append returns is always what readers get.
func MetaIsStoredForm(m agentbridge.Meta) bool {
	if len(m.Extra) > 0 || (m.Hop != nil && *m.Hop < 0) ||
		!utf8.ValidString(m.ReplyTo) || !utf8.ValidString(m.Via) {
		return false
	}
	for _, t := range m.Tags {
		if !utf8.ValidString(t) {
			return false
		}
	}
	return true
}

// StateKey is the stored form of a state: its JSON without LastHop, which
// changes with every message and is kept per event instead.
func StateKey(st agentbridge.ThreadState) (string, error) {
	st.LastHop = 0
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("encode thread state: %w", err)
	}
	return string(b), nil
}

// NextTime returns now, truncated to the microsecond, or 1µs after last
// when the clock has not moved past it (or, with several bridges, another
// one's clock runs ahead): a thread's ts must strictly increase, because
// v0 clients page with since=<ts>.
func NextTime(last time.Time) time.Time {
	now := time.Now().UTC().Truncate(time.Microsecond)
	if now.After(last) {
		return now
	}
	return last.Add(time.Microsecond)
}

// DefaultMaxBatch is the default cap on appends per group commit: large
// enough to absorb a burst, small enough that one commit stays short.
const DefaultMaxBatch = 256

// Options configures a store's Open (sqlite.Options and postgres.Options
// are this type). The zero value is usable.
type Options struct {
	// Humans lists whose controls count (mute, pause, …); default
	// agentbridge.DefaultHumans. It must match the coordinator's human_ids,
	// or the two would fold different states from the same log.
	Humans agentbridge.Humans
	// Logger receives the store's few operational messages; default
	// slog.Default() with component=store.
	Logger *slog.Logger
	// MaxBatch caps appends per group commit; default DefaultMaxBatch.
	MaxBatch int
	// TailEvents caps the latest events the SQLite store keeps in memory
	// for the streams (Tail); default DefaultTailEvents. PostgreSQL keeps
	// none.
	TailEvents int
}

// WithDefaults returns o with its zero fields set to the defaults.
func (o Options) WithDefaults() Options {
	if o.Humans == nil {
		o.Humans = agentbridge.DefaultHumans
	}
	if o.Logger == nil {
		o.Logger = slog.Default().With("component", "store")
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.TailEvents <= 0 {
		o.TailEvents = DefaultTailEvents
	}
	return o
}
