package storecore

import (
	"encoding/json"
	"fmt"
	"sync"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// The stored rows both stores read, scanned alike: database/sql's *sql.Row
// and *sql.Rows and pgx's Row and Rows all have this Scan, and scanning a
// text or bytea column into []byte works in both drivers, so one scan per
// row type serves both. The SQL that selects the columns stays in each
// store (placeholders and tables differ); the column order is fixed here.

// Row is one result row of either driver.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set of either driver (*sql.Rows, pgx.Rows); the caller
// closes it.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// EventColumns are the columns ScanEvent reads, in order.
const EventColumns = `gseq, id, thread, seq, ts, type, sender, recipient, content, meta`

// ThreadColumns are the columns ScanThread reads, in order.
const ThreadColumns = `id, name, created_at, updated_at, last_seq`

// ReceiptColumns are the columns ScanReceipt reads, in order.
const ReceiptColumns = `event, participant, sender, state, reason, invocation, reply, updated_at`

// SuggestionColumns are the columns ScanSuggestion reads, in order.
const SuggestionColumns = `id, sender, title, description, status, ts`

// ScanEvent scans an EventColumns row: content is the raw JSON as stored,
// meta decoded (the common "{}" without the decoder). A value stored
// before the bridge refused bodies nested deeper than
// agentbridge.MaxJSONDepth is served as a note instead
// (agentbridge.Event.ClipTooDeep), so that it breaks no reader.
func ScanEvent(r Row) (agentbridge.Event, error) { return scanEvent(r) }

// scanEvent is ScanEvent of a row with more columns after the event's,
// scanned into more.
func scanEvent(r Row, more ...any) (agentbridge.Event, error) {
	var ev agentbridge.Event
	var content, meta []byte
	if err := r.Scan(append([]any{&ev.GSeq, &ev.ID, &ev.Thread, &ev.Seq, &ev.TS, &ev.Type, &ev.From, &ev.To, &content, &meta}, more...)...); err != nil {
		return agentbridge.Event{}, err
	}
	if content != nil {
		ev.Content = json.RawMessage(content)
	}
	if string(meta) != "{}" { // most events' meta is: skip the decoder, same result
		if err := json.Unmarshal(meta, &ev.Meta); err != nil {
			return agentbridge.Event{}, fmt.Errorf("decode meta of event %s: %w", ev.ID, err)
		}
	}
	ev.ClipTooDeep()
	return ev, nil
}

// ScanThread scans a ThreadColumns row. The event count is the last seq:
// seq is gapless from 1.
func ScanThread(r Row) (agentbridge.Thread, error) {
	var t agentbridge.Thread
	var name []byte
	err := r.Scan(&t.ID, &name, &t.CreatedAt, &t.UpdatedAt, &t.LastSeq)
	t.Name, t.EventCount = string(name), t.LastSeq
	return t, err
}

// ScanReceipt scans a ReceiptColumns row (the thread is the caller's).
func ScanReceipt(r Row) (agentbridge.Receipt, error) {
	var rc agentbridge.Receipt
	err := r.Scan(&rc.Event, &rc.Participant, &rc.From, &rc.State, &rc.Reason, &rc.Invocation, &rc.Reply, &rc.UpdatedAt)
	return rc, err
}

// ScanSuggestion scans a SuggestionColumns row.
func ScanSuggestion(r Row) (agentbridge.Suggestion, error) {
	var sg agentbridge.Suggestion
	var title, desc []byte
	err := r.Scan(&sg.ID, &sg.From, &title, &desc, &sg.Status, &sg.Timestamp)
	sg.Title, sg.Description = string(title), string(desc)
	return sg, err
}

// TokenColumns are the columns ScanToken reads, in order.
const TokenColumns = `id, name, scope, thread, participant, created_at, expires_at, revoked_at, created_by, agents`

// ScanToken scans a TokenColumns row.
func ScanToken(r Row) (agentbridge.Token, error) {
	var t agentbridge.Token
	err := r.Scan(&t.ID, &t.Name, &t.Scope, &t.Thread, &t.Participant, &t.CreatedAt, &t.ExpiresAt, &t.RevokedAt, &t.CreatedBy, &t.Agents)
	return t, err
}

// LiveAgentTokens is the count, in SQL, of the live agent tokens one
// creator holds (the first argument), as of a TimeLayout time (the
// second): what TokenInput.MaxLive caps.
const LiveAgentTokens = `SELECT count(*) FROM tokens WHERE created_by = ? AND scope = 'agent' AND revoked_at = '' AND (expires_at = '' OR expires_at > ?)`

// CollectTokenPage scans rows of seq and TokenColumns: the tokens, and
// each one's position (its seq), for the next page's cursor.
func CollectTokenPage(rows Rows) ([]agentbridge.Token, []int64, error) {
	tokens, pos := []agentbridge.Token{}, []int64{}
	for rows.Next() {
		var seq int64
		var t agentbridge.Token
		if err := rows.Scan(&seq, &t.ID, &t.Name, &t.Scope, &t.Thread, &t.Participant, &t.CreatedAt, &t.ExpiresAt, &t.RevokedAt, &t.CreatedBy, &t.Agents); err != nil {
			return nil, nil, fmt.Errorf("scan token: %w", err)
		}
		tokens, pos = append(tokens, t), append(pos, seq)
	}
	return tokens, pos, rows.Err()
}

// ScanString scans a row of one text column.
func ScanString(r Row) (v string, err error) {
	err = r.Scan(&v)
	return v, err
}

// LookupToken scans the one token row r; found is false when there is
// none. what names the lookup in errors.
func LookupToken(r Row, what string) (_ agentbridge.Token, found bool, _ error) {
	t, err := ScanToken(r)
	if found, err = Found(err); err != nil || !found {
		return agentbridge.Token{}, false, wrapf(err, "look up %s", what)
	}
	return t, true, nil
}

// LookupClaimEvent scans the one claimEventQuery row r, the state decoded
// through states; found is false when there is none.
func LookupClaimEvent(r Row, states *StateCache) (ev agentbridge.Event, before agentbridge.ThreadState, found bool, err error) {
	var seq int64
	var state []byte
	ev, err = scanEvent(r, &seq, &state)
	if found, err = Found(err); err != nil || !found {
		return ev, before, false, wrapf(err, "look up a claim's event")
	}
	if before, err = states.Decode(ev.Thread, seq, state); err != nil {
		return ev, before, false, fmt.Errorf("decode the state before event %s: %w", ev.ID, err)
	}
	return ev, before, true, nil
}

// StateCache keeps the states decoded from a store's snapshots, by thread
// and snapshot seq: a snapshot never changes, and every message between
// two controls of a thread is claimed against the same one. Its zero value
// is ready to use; it is safe for concurrent use. The states it hands out
// share their slices and maps, which nobody modifies (the fold copies).
type StateCache struct {
	mu sync.Mutex
	m  map[stateKey]agentbridge.ThreadState
}

type stateKey struct {
	thread string
	seq    int64
}

// maxCachedStates bounds a StateCache; past it, it starts afresh.
const maxCachedStates = 1024

// Decode is the state raw, the snapshot of thread at seq, decoded once.
func (c *StateCache) Decode(thread string, seq int64, raw []byte) (agentbridge.ThreadState, error) {
	k := stateKey{thread, seq}
	c.mu.Lock()
	st, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return st, nil
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, err
	}
	st = st.Normalize()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedStates {
		c.m = make(map[stateKey]agentbridge.ThreadState)
	}
	c.m[k] = st
	return st, nil
}

// LookupThread scans the one thread row r of thread id: thread_not_found
// when there is none.
func LookupThread(r Row, id string) (agentbridge.Thread, error) {
	t, err := ScanThread(r)
	found, err := Found(err)
	switch {
	case err != nil:
		return agentbridge.Thread{}, fmt.Errorf("load thread %s: %w", id, err)
	case !found:
		return agentbridge.Thread{}, agentbridge.ThreadNotFound(id)
	}
	return t, nil
}

// wrapf wraps err with the context format names; nil stays nil.
func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// FirstEvent scans rows of EventColumns up to the first event match
// accepts; false when none does.
func FirstEvent(rows Rows, match func(agentbridge.Event) bool) (agentbridge.Event, bool, error) {
	for rows.Next() {
		ev, err := ScanEvent(rows)
		if err != nil {
			return agentbridge.Event{}, false, err
		}
		if match(ev) {
			return ev, true, nil
		}
	}
	return agentbridge.Event{}, false, rows.Err()
}

// Collect scans every row of rows with scan, what naming the rows in
// errors. The result is never nil, so an empty answer encodes as [].
func Collect[T any](rows Rows, what string, scan func(Row) (T, error)) ([]T, error) {
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return out, nil
}

// PushSubscriptionColumns are the columns ScanPushSubscription reads, in
// order.
const PushSubscriptionColumns = "endpoint, p256dh, auth, device, categories, token_id, created_at, last_outcome, last_at"

// ScanPushSubscription scans a PushSubscriptionColumns row; the device's
// choices are stored as JSON.
func ScanPushSubscription(r Row) (agentbridge.PushSubscription, error) {
	var sub agentbridge.PushSubscription
	var cats string
	if err := r.Scan(&sub.Endpoint, &sub.P256dh, &sub.Auth, &sub.Device, &cats, &sub.TokenID, &sub.CreatedAt, &sub.LastOutcome, &sub.LastAt); err != nil {
		return sub, err
	}
	if err := json.Unmarshal([]byte(cats), &sub.Categories); err != nil {
		return sub, fmt.Errorf("push subscription categories: %w", err)
	}
	return sub, nil
}
