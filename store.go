package agentbridge

import (
	"context"
	"fmt"
	"strings"
)

// MaxEventsLimit caps the limit parameter of every event query.
const MaxEventsLimit = 10000

// CreateThreadRequest creates a thread. ID is optional (the server assigns a
// ULID); Name defaults to "Untitled"; From defaults to "user".
type CreateThreadRequest struct {
	ID   string
	Name string
	From string
}

// WithDefaults checks req and fills in its defaults (Name "Untitled", From
// "user"), so that every store refuses the same requests with the same
// errors before anything reaches its writer.
func (req CreateThreadRequest) WithDefaults() (CreateThreadRequest, error) {
	if req.ID != "" && !ThreadIDPattern.MatchString(req.ID) {
		return req, FieldErrorf(ECodeInvalidField, "id",
			"The thread id %q is not valid: use 1 to 64 letters, digits or . _ -, starting with a letter or digit.", Clip(req.ID, QuoteRunes))
	}
	if req.Name == "" {
		req.Name = "Untitled"
	}
	if err := ValidateThreadName(req.Name); err != nil {
		return req, err
	}
	if req.From == "" {
		req.From = "user"
	}
	if !ParticipantIDPattern.MatchString(req.From) {
		return req, FieldErrorf(ECodeInvalidField, "from",
			"The sender id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(req.From, QuoteRunes))
	}
	return req, nil
}

// AppendRequest appends one event to a thread.
type AppendRequest struct {
	Thread string
	Input  EventInput
	// IdempotencyKey, when set, makes a retry with the same key in the same
	// thread return the first event instead of storing a new one.
	IdempotencyKey string
	// KeyScope is the id of the credential that sent the key (contract
	// 7.3): the same key from two credentials is two keys, so no writer
	// pre-empts another's key. Validate folds it into IdempotencyKey.
	KeyScope string
	// LegacyIdempotencyKey is set by Validate, not by callers: the key as
	// a release before scoped keys stored it (the header's value), for the
	// principals such a release knew, a person and a coordinator (which
	// held the person's token then). A store looks it up among the keys
	// that release left when the scoped key finds nothing, so a retry
	// spanning the upgrade answers with the event its first try stored
	// (contract 8.3).
	LegacyIdempotencyKey string
	// Scope is the scope of the credential that sends the event (contract
	// 7.3), "" when none is checked: every scope but person may set no
	// human-only control key (HumanOnlyKeys), which Validate refuses with
	// forbidden_sender, so that the control is parsed once for both checks.
	Scope string
	// Fence, when set, makes the append one of a claim's writes: the
	// store refuses it (ECodeFenced) inside its write unless the claim is
	// running or done at this fence under this coordinator (ClaimFence).
	Fence *ClaimFence
	// Schedule, when set, makes the append a schedule's post for one due
	// time (or its notice of skipped ones): the store refuses it with
	// ErrScheduleTaken unless the claim holds, and records it in the same
	// transaction (ScheduleClaim). Only the bridge's scheduler sets it.
	Schedule *ScheduleClaim
}

// MaxIdempotencyKeyLen bounds an idempotency key (the Idempotency-Key
// header), in bytes.
const MaxIdempotencyKeyLen = 256

// Validate checks req on its own, before any store looks at the thread:
// the input (EventInput.Validate, whose defaults it applies to req.Input),
// the thread id (a malformed one names no thread: thread_not_found), the
// idempotency key's length, and a human-only control key from a credential
// that is not a person's (Scope). For a control it returns the parsed
// control (nil for any other type), which Admit, IgnoredEffect and
// FoldParsed take, so that an appended control is parsed once. Every
// store's Append starts with it, so all refuse the same requests with the
// same errors.
func (req *AppendRequest) Validate() (*Control, error) {
	c, err := req.Input.validate()
	if err != nil {
		return nil, err
	}
	if !ThreadIDPattern.MatchString(req.Thread) {
		return nil, ThreadNotFound(req.Thread)
	}
	if len(req.IdempotencyKey) > MaxIdempotencyKeyLen {
		return nil, FieldErrorf(ECodeInvalidField, "idempotency_key",
			"An idempotency key must be at most %d bytes.", MaxIdempotencyKeyLen)
	}
	req.LegacyIdempotencyKey = ""
	if req.IdempotencyKey != "" && req.KeyScope != "" {
		if req.KeyScope == ScopePerson || strings.HasPrefix(req.KeyScope, ScopeCoordinator+":") {
			req.LegacyIdempotencyKey = req.IdempotencyKey
		}
		// A credential id holds no "/", so the scoped key is unambiguous.
		req.IdempotencyKey = req.KeyScope + "/" + req.IdempotencyKey
	}
	req.KeyScope = ""
	if c != nil && req.Scope != "" && req.Scope != ScopePerson {
		if keys := HumanOnlyKeys(*c); len(keys) > 0 {
			return nil, &Error{Code: ECodeForbiddenSender, Participant: req.Input.From, Thread: req.Thread,
				Message: fmt.Sprintf("A %s token may not set %s: only a person may (a human control, or an answer to a permission request).", req.Scope, strings.Join(keys, ", "))}
		}
	}
	return c, nil
}

// AppendResult is the committed event, and whether it was an idempotent
// replay of an earlier append.
type AppendResult struct {
	Event    Event
	Replayed bool
	// Ignored says why the new event will have no effect (IgnoredEffect),
	// decided by the store from the thread's state before it, read under
	// the write; nil when it may have one. On a replay (whose state before
	// is not at hand) it is only the already_answered note the first try
	// got, for a human's second answer to a permission request or a
	// question.
	Ignored *Ignored
}

// ThreadEventsQuery selects events of one thread, in seq order. At most one
// of Since, After and Tail is used (precedence: After, Since, Tail); Until
// caps the seq (history as of revision Until); Limit caps the count
// (0 = no cap for the v0 shape, which returns everything).
type ThreadEventsQuery struct {
	Thread string
	Since  string // v0: ts strictly greater than this
	After  int64  // seq strictly greater than this; -1 = unset
	Until  int64  // seq ≤ this; 0 = unset
	Tail   int    // the last Tail events; 0 = unset
	Limit  int
}

// EventStore is the durable event log. Implementations are safe for
// concurrent use. Errors a client should see are *Error values
// (thread_not_found, thread_exists, unknown_reply_to, participant_muted,
// thread_paused, cursor_ahead); anything else is internal.
type EventStore interface {
	// CreateThread creates a thread and appends its thread.created event,
	// returning both once committed.
	CreateThread(ctx context.Context, req CreateThreadRequest) (Thread, Event, error)
	// Append validates the event (EventInput.Validate, defaults included)
	// and against the thread (reply_to, mute, pause), commits it and
	// returns it. It returns only after the commit. The store may keep
	// req.Input's content and meta (for the streams): the caller must not
	// change them afterwards.
	Append(ctx context.Context, req AppendRequest) (AppendResult, error)
	// Thread returns one thread.
	Thread(ctx context.Context, id string) (Thread, error)
	// Threads lists threads, most recently updated first, after the thread
	// with id after (empty = from the start), at most limit (0 = all).
	Threads(ctx context.Context, after string, limit int) ([]Thread, error)
	// ThreadEvents answers a per-thread query; a cursor past the head is a
	// cursor_ahead error.
	ThreadEvents(ctx context.Context, q ThreadEventsQuery) ([]Event, error)
	// Events returns events of all threads with gseq > after, in gseq
	// order, at most limit; a cursor past the head is cursor_ahead.
	Events(ctx context.Context, after int64, limit int) ([]Event, error)
	// Head returns the last gseq (0 for an empty log).
	Head(ctx context.Context) (int64, error)
	// State returns a thread's derived state as of revision at (0 = now)
	// and the seq it reflects.
	State(ctx context.Context, thread string, at int64) (ThreadState, int64, error)
	// Notify returns a channel that is closed after the next commit.
	// Readers grab it before querying so that no commit is missed.
	Notify() <-chan struct{}
}

// ReceiptsQuery selects receipts of one thread: only Event's when Event is
// set, else those of events whose id is FromEvent or later (ids are ULIDs,
// which sort in append order; "" = from the start); at most Limit (0 =
// MaxEventsLimit).
type ReceiptsQuery struct {
	Thread    string
	Event     string
	FromEvent string
	Limit     int
}

// ReceiptStore keeps receipts (contract 5.5): the latest one per (thread,
// event, participant), outside the event log. It is separate from
// EventStore because receipts are not events: a backend implements both,
// and the HTTP server serves the receipt endpoints only when its store
// does. Implementations are safe for concurrent use.
type ReceiptStore interface {
	// PutReceipt validates in (ReceiptInput.Validate), checks that its
	// thread exists (thread_not_found) and that its event is an event of
	// that thread (event_not_found), and stores it as the pair's latest
	// receipt, stamped with the time of the write, in order with appends
	// (a receipt for an event whose append returned finds it). changed is
	// false when the pair's receipt already said exactly this (state,
	// reason, invocation, reply): nothing is written then and the stored
	// receipt is returned as it was, so a retried report neither moves
	// updated_at nor counts as a change. Nothing is stored on error.
	PutReceipt(ctx context.Context, in ReceiptInput) (r Receipt, changed bool, err error)
	// Receipts answers q, ordered by event id then participant. An
	// unknown thread is thread_not_found.
	Receipts(ctx context.Context, q ReceiptsQuery) ([]Receipt, error)
}

// ReceiptWatcher is a receipt store that several bridge processes share
// (PostgreSQL). A bridge announces the receipts it stores on its own
// streams; WatchReceipts hands it those that other processes stored, so
// that every bridge's streams announce every receipt change. fn is called
// from one goroutine, in the order the changes committed, and must not
// block.
type ReceiptWatcher interface {
	WatchReceipts(fn func(Receipt))
}

// StoreStats are a store's cumulative counters since it was opened, for
// /metrics. They are read atomically one by one, so a snapshot may be a
// few appends out of step between fields.
type StoreStats struct {
	// Appends counts committed events (including thread.created events).
	Appends uint64
	// Replayed counts appends answered from an idempotency key.
	Replayed uint64
	// Rejected counts appends refused inside the writer (unknown thread or
	// reply_to, muted, paused, thread exists).
	Rejected uint64
	// Batches counts group commits; Appends/Batches is the mean batch size.
	Batches uint64
	// MaxBatchSeen is the largest number of requests one commit carried.
	MaxBatchSeen uint64
}

// StatsStore is a store that counts its group commits. The bridge exports
// the counts on /metrics when its store implements it.
type StatsStore interface {
	Stats() StoreStats
}
