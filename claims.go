package agentbridge

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Claims at the bridge (contract 7.1): a coordinator claims a run (one
// participant's answer to one trigger event) or a notice before it starts
// it; the first claimant wins and gets a fencing number, and a write that
// carries a stale one is refused (ECodeFenced). Claims live in the
// bridge's store, one row per ClaimKey, with the database's time, so that
// every bridge on one database agrees on who holds what.

// Claim states.
const (
	ClaimWaiting = "waiting" // filed for a participant no live coordinator serves; no holder
	ClaimRunning = "running" // held by a coordinator; its heartbeat keeps it
	ClaimDone    = "done"    // the holder finished it (reply or error posted, or nothing owed)
	ClaimExpired = "expired" // waited past its pending ttl; the bridge posted one error notice
	// ClaimNotATrigger: a coordinator that took the claim over decided,
	// with its own trigger rules, that its event is no trigger for its
	// participant, and ended it so (contract 8.3).
	ClaimNotATrigger = "not_a_trigger"
)

// MaxWaitingClaims caps the waiting claims one coordinator id has filed
// and that still wait (contract 8.3): past it a waiting claim is 429
// too_many.
const MaxWaitingClaims = 1000

// Claim errors.
const (
	// ECodeFenced refuses a write (or a claim's finish) whose fencing
	// number is not the claim's current one, or whose writer is not the
	// claim's holder: the run was claimed again by another coordinator.
	ECodeFenced = "fenced"
	// ECodeNotRegistered refuses a claim by a coordinator id and instance
	// that hold no live registration.
	ECodeNotRegistered = "not_registered"
)

// DefaultPendingTTL is how long a waiting claim waits for a coordinator
// when the request names no ttl; MaxPendingTTL bounds it.
const (
	DefaultPendingTTL = 24 * time.Hour
	MaxPendingTTL     = 30 * 24 * time.Hour
)

// ClaimHeader is the HTTP header that carries a write's claim and fence,
// as "<claim id>:<fence>", on appends, receipts and presence.
const ClaimHeader = "Bridge-Claim"

// ClaimSender is the sender of what the bridge itself writes about claims:
// the waiting and interrupted receipts and the expiry notice.
const ClaimSender = "bridge"

// MaxClaimText bounds a claim's event id, notice and client, in bytes.
const MaxClaimText = 256

// ClaimKey names what is claimed: a run (Participant set, Notice empty) or
// a notice (Notice set, Participant empty), of one trigger event. Round is
// the party round (0 outside party mode).
type ClaimKey struct {
	Thread      string `json:"thread"`
	Event       string `json:"event"`
	Participant string `json:"participant,omitempty"`
	Round       int    `json:"round,omitempty"`
	Notice      string `json:"notice,omitempty"` // e.g. "party:1", "party:done", "unserved:codex"
}

// IsRun reports whether k names a run (a participant's answer), not a
// notice.
func (k ClaimKey) IsRun() bool { return k.Participant != "" }

// ClaimRequest is the body of POST /claims.
type ClaimRequest struct {
	ClaimKey
	// Coordinator is the registered coordinator id, bound to the
	// credential as for PUT /coordinators.
	Coordinator string `json:"coordinator"`
	// Instance is the registering process's instance id.
	Instance string `json:"instance"`
	// Client is the participant's invited profile client (matching by
	// client, as ServesParticipant).
	Client string `json:"client,omitempty"`
	// Wait files a waiting claim instead of taking it.
	Wait bool `json:"wait,omitempty"`
	// PendingTTLMillis is, with Wait, how long it may wait (0 =
	// DefaultPendingTTL).
	PendingTTLMillis int64 `json:"pending_ttl_ms,omitempty"`
	// FallbackFrom, on a run claim, names the participant whose run failed
	// and handed this trigger to the claimed one, its fallback (contract
	// 8.5): the event must be a trigger for it, and Participant, invited
	// and not a human, answers in its place.
	FallbackFrom string `json:"fallback_from,omitempty"`
}

// Validate checks req and fills in its default pending ttl. Errors are
// *Error values naming the field.
func (req *ClaimRequest) Validate() error {
	if !ThreadIDPattern.MatchString(req.Thread) {
		return ThreadNotFound(req.Thread)
	}
	if req.Event == "" {
		return FieldErrorf(ECodeMissingField, "event", "The field \"event\" is required: the id of the trigger event.")
	}
	switch {
	case req.Participant == "" && req.Notice == "":
		return FieldErrorf(ECodeMissingField, "participant", "A claim names a \"participant\" (a run) or a \"notice\", and this one names neither.")
	case req.Participant != "" && req.Notice != "":
		return FieldErrorf(ECodeInvalidField, "notice", "A claim names a \"participant\" (a run) or a \"notice\", not both.")
	case req.Participant != "" && !ParticipantIDPattern.MatchString(req.Participant):
		return FieldErrorf(ECodeInvalidField, "participant", "The participant id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(req.Participant, QuoteRunes))
	case req.Round < 0:
		return FieldErrorf(ECodeInvalidField, "round", "The round must not be negative.")
	case req.FallbackFrom != "" && (req.Notice != "" || !ParticipantIDPattern.MatchString(req.FallbackFrom)):
		return FieldErrorf(ECodeInvalidField, "fallback_from", "\"fallback_from\" names the participant a run claim answers for, by its id (1 to 128 letters, digits or . _ @ : -).")
	case req.FallbackFrom != "" && req.FallbackFrom == req.Participant:
		return FieldErrorf(ECodeInvalidField, "fallback_from", "A fallback claim is for another participant than the one it answers for.")
	}
	if !ParticipantIDPattern.MatchString(req.Coordinator) {
		return FieldErrorf(ECodeInvalidField, "coordinator", "The coordinator id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(req.Coordinator, QuoteRunes))
	}
	if req.Instance == "" {
		return FieldErrorf(ECodeMissingField, "instance", "The field \"instance\" is required: the instance id the coordinator registered with.")
	}
	for _, f := range []struct{ name, v string }{{"event", req.Event}, {"notice", req.Notice}, {"client", req.Client}, {"instance", req.Instance}} {
		if len(f.v) > MaxClaimText || !utf8.ValidString(f.v) {
			return FieldErrorf(ECodeInvalidField, f.name, "The field %q must be at most %d bytes of UTF-8.", f.name, MaxClaimText)
		}
	}
	switch {
	case req.PendingTTLMillis < 0 || req.PendingTTLMillis > MaxPendingTTL.Milliseconds():
		return FieldErrorf(ECodeInvalidField, "pending_ttl_ms", "The pending ttl must be between 1 ms and %s.", MaxPendingTTL)
	case req.PendingTTLMillis != 0 && !req.Wait:
		return FieldErrorf(ECodeInvalidField, "pending_ttl_ms", "A pending ttl is for a waiting claim: set \"wait\" or leave it out.")
	case req.PendingTTLMillis == 0 && req.Wait:
		req.PendingTTLMillis = DefaultPendingTTL.Milliseconds()
	}
	return nil
}

// Claim is a claim as the bridge keeps it.
type Claim struct {
	ID int64 `json:"id"`
	ClaimKey
	Client string `json:"client,omitempty"`
	// FallbackFrom is the participant a fallback claim answers for.
	FallbackFrom string `json:"fallback_from,omitempty"`
	State        string `json:"state"`
	Coordinator  string `json:"coordinator,omitempty"` // holder (empty while waiting)
	Instance     string `json:"instance,omitempty"`
	Host         string `json:"host,omitempty"` // the holder's host, from its registration
	Fence        int64  `json:"fence"`          // 0 while never held; +1 on every new holder
	CreatedAt    string `json:"created_at"`     // database time (TimeLayout)
	ClaimedAt    string `json:"claimed_at,omitempty"`
	ExpiresAt    string `json:"expires_at,omitempty"` // waiting claims: created_at + pending ttl
	DueAt        string `json:"due_at,omitempty"`     // a waiting claim no coordinator may take before (a usage limit's reset)
}

// ClaimResult is the answer of POST /claims.
type ClaimResult struct {
	Claim   Claim `json:"claim"`
	Granted bool  `json:"granted"`
	// PreviousHost is set when this claim was taken over from a holder
	// whose heartbeat lapsed.
	PreviousHost string `json:"previous_host,omitempty"`
}

// ClaimFence is what a fenced write carries (the ClaimHeader) and who
// writes: the store refuses the write unless claim ID is running or done
// at Fence and held by Coordinator ("" when the writer is no coordinator,
// a person or an open bridge: then the holder is not compared).
type ClaimFence struct {
	ID          int64
	Fence       int64
	Coordinator string
}

// ParseClaimHeader parses a ClaimHeader value, "<claim id>:<fence>".
func ParseClaimHeader(v string) (id, fence int64, err error) {
	a, b, ok := strings.Cut(v, ":")
	if ok {
		id, err = strconv.ParseInt(a, 10, 64)
	}
	if ok && err == nil {
		fence, err = strconv.ParseInt(b, 10, 64)
	}
	if !ok || err != nil || id <= 0 || fence <= 0 {
		return 0, 0, FieldErrorf(ECodeInvalidField, ClaimHeader, "The %s header is %q: write \"<claim id>:<fence>\", two positive numbers.", ClaimHeader, Clip(v, QuoteRunes))
	}
	return id, fence, nil
}

// FormatClaimHeader is the ClaimHeader value of claim id at fence.
func FormatClaimHeader(id, fence int64) string {
	return strconv.FormatInt(id, 10) + ":" + strconv.FormatInt(fence, 10)
}

// Check returns the ECodeFenced refusal of a write fenced by f on claim c,
// or nil when c is running or done at f.Fence and held by f.Coordinator.
func (f ClaimFence) Check(c Claim) error {
	switch {
	case c.State != ClaimRunning && c.State != ClaimDone:
		return &Error{Code: ECodeFenced, Thread: c.Thread, Participant: c.Participant,
			Message: fmt.Sprintf("Claim %d is %s, held by nobody; a write with fence %d is refused.", c.ID, c.State, f.Fence)}
	case c.Fence != f.Fence || (f.Coordinator != "" && c.Coordinator != f.Coordinator):
		return &Error{Code: ECodeFenced, Thread: c.Thread, Participant: c.Participant,
			Message: fmt.Sprintf("This run was claimed again by %s on %s (fence %d); a write with fence %d is refused.", c.Coordinator, c.Host, c.Fence, f.Fence)}
	}
	return nil
}

// ClaimNotFound is the refusal of a fence or finish naming no claim.
func ClaimNotFound(id int64) *Error {
	return &Error{Code: ECodeFenced, Field: ClaimHeader, Message: fmt.Sprintf("There is no claim %d; a write fenced by it is refused.", id)}
}

// WaitingReason is the reason of a waiting claim's queued receipt.
func WaitingReason(participant string) string {
	return "waiting for a coordinator serving " + participant
}

// InterruptedReason is the reason of a lapsed holder's interrupted
// receipt; the state itself says "interrupted", so the reason does not.
func InterruptedReason(host string) string {
	return host + " offline"
}

// NotATriggerReason is the reason of the skipped receipt of a claim that
// a coordinator taking it over found to be no trigger.
func NotATriggerReason(why string) string {
	return "not a trigger: " + why
}

// ExpiredNotice is the content of the error message the bridge posts when
// a waiting claim expires: at most once per thread and participant per
// pending ttl, naming how many messages to it waited there.
func ExpiredNotice(participant string, ttl time.Duration, waited int) string {
	msgs := "1 message"
	if waited != 1 {
		msgs = fmt.Sprintf("%d messages", waited)
	}
	return fmt.Sprintf("Nobody served %s within %s: no coordinator serving it came online, so this message was not answered. %s to %s waited here for one; nothing more is said about %s in this thread for %s.",
		participant, ttl, msgs, participant, participant, ttl)
}

// LimitExpiredNotice is the content of the error message the bridge posts
// when a claim that waited for participant's usage limit, due at due,
// expires: a coordinator serving the participant put the trigger back to
// wait for the limit, and none took it up again within ttl.
func LimitExpiredNotice(participant string, due time.Time, ttl time.Duration) string {
	return fmt.Sprintf("%s waited for its usage limit to reset at %s, but no coordinator serving it took this message up again within %s, so it was not answered.",
		participant, due.UTC().Format("Jan 2 15:04 MST"), ttl)
}

// ClaimsResponse is the answer of GET /claims.
type ClaimsResponse struct {
	Claims []Claim `json:"claims"`
}

// ClaimStore keeps claims. A backend implements it next to
// CoordinatorStore; the bridge serves /claims only when its store does.
// Every write is one transaction of the store, stamped with the
// database's clock. Implementations are safe for concurrent use.
type ClaimStore interface {
	// Claim validates req and applies the claim rules (docs/api.md
	// "Claims") to its key's row: insert, take over, or leave it.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// FinishClaim marks claim id done when coordinator holds it at
	// fence (again: the same answer); else ECodeFenced.
	FinishClaim(ctx context.Context, id, fence int64, coordinator string) (Claim, error)
	// Claimable lists, oldest first, the claims coordinator may take
	// now: waiting ones not past their expiry and running ones whose
	// holder lapsed, of participants its live registration serves;
	// notice claims whose holder lapsed go to every live coordinator.
	Claimable(ctx context.Context, coordinator string) ([]Claim, error)
	// Claims lists a thread's claims, oldest first.
	Claims(ctx context.Context, thread string) ([]Claim, error)
	// CheckFence refuses (ECodeFenced) a write fenced by f unless its
	// claim is running or done at f.Fence under f.Coordinator. Appends
	// and receipts check their fence inside their own write
	// (AppendRequest.Fence, ReceiptInput.Fence); presence, which the
	// store does not keep, asks here.
	CheckFence(ctx context.Context, f ClaimFence) error
	// DueClaims lists the claims the sweeper acts on: running run claims
	// whose holder lapsed and whose receipt was not yet interrupted at
	// their fence, and waiting claims past their expiry.
	DueClaims(ctx context.Context) ([]Claim, error)
	// InterruptClaim, in one transaction, marks running claim id as
	// interrupted at fence and, when its receipt is queued or running,
	// makes it interrupted (InterruptedReason); changed is false when the
	// claim is no longer due (another bridge did it, or it moved on).
	InterruptClaim(ctx context.Context, id, fence int64) (r Receipt, changed bool, err error)
	// ExpireClaim, in one transaction, turns waiting claim id past its
	// expiry into expired, appends the bridge's error message
	// (ExpiredNotice) and, for a run claim, makes its receipt failed;
	// ok is false when the claim is no longer due.
	ExpireClaim(ctx context.Context, id int64) (ev *Event, r *Receipt, ok bool, err error)
	// ServedEver maps every agent name any registration ever listed to
	// its client.
	ServedEver(ctx context.Context) (map[string]string, error)
	// EndNotATrigger, in one transaction, marks claim id, held by
	// coordinator at fence, ClaimNotATrigger and, when its pair's receipt
	// is queued or running, makes it skipped (NotATriggerReason(why));
	// else ECodeFenced, as FinishClaim. r is the receipt written, if any.
	EndNotATrigger(ctx context.Context, id, fence int64, coordinator, why string) (c Claim, r *Receipt, err error)
}
