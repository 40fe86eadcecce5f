package agentbridge

import (
	"context"
	"time"
)

// Waiting for a usage limit (contract 8.5): a run that failed because its
// agent hit a usage limit, with no fallback to hand the trigger to, puts
// its claim back to waiting, due at the time the limit resets. Until then
// no coordinator may take it; from then on any coordinator serving the
// participant takes it as it takes any waiting claim, and the trigger
// runs once more, within the pending ttl.

// ClaimWaitRequest is the body of POST /claims/{id}/wait: the holder of a
// running claim puts it back to waiting, due at RetryAt.
type ClaimWaitRequest struct {
	// ID is the claim's id (from the path).
	ID int64 `json:"-"`
	// Coordinator, Instance and Fence name the holder, as for a finish.
	Coordinator string `json:"coordinator"`
	Instance    string `json:"instance"`
	Fence       int64  `json:"fence"`
	// RetryAt is when the claim is due again (TimeLayout or RFC 3339).
	RetryAt string `json:"retry_at"`
	// PendingTTLMillis bounds the wait from the claim's creation (0 =
	// DefaultPendingTTL): a limit that resets later is refused.
	PendingTTLMillis int64 `json:"pending_ttl_ms,omitempty"`
	// Reason is the queued receipt's reason meanwhile
	// (LimitWaitReason).
	Reason string `json:"reason,omitempty"`
}

// Validate checks req and returns its due time. Errors are *Error values
// naming the field.
func (req *ClaimWaitRequest) Validate() (time.Time, error) {
	switch {
	case !ParticipantIDPattern.MatchString(req.Coordinator):
		return time.Time{}, FieldErrorf(ECodeInvalidField, "coordinator", "The field \"coordinator\" must be the holder's coordinator id.")
	case req.Instance == "":
		return time.Time{}, FieldErrorf(ECodeMissingField, "instance", "The field \"instance\" is required: the instance id the coordinator registered with.")
	case req.Fence <= 0:
		return time.Time{}, FieldErrorf(ECodeMissingField, "fence", "The field \"fence\" is required: the fencing number the claim was granted with.")
	case len(req.Reason) > MaxReceiptReason:
		return time.Time{}, FieldErrorf(ECodeInvalidField, "reason", "The field \"reason\" must be at most %d bytes.", MaxReceiptReason)
	case req.PendingTTLMillis < 0 || req.PendingTTLMillis > MaxPendingTTL.Milliseconds():
		return time.Time{}, FieldErrorf(ECodeInvalidField, "pending_ttl_ms", "The pending ttl must be between 1 ms and %s.", MaxPendingTTL)
	}
	due, err := time.Parse(time.RFC3339Nano, req.RetryAt)
	if err != nil {
		return time.Time{}, FieldErrorf(ECodeInvalidField, "retry_at", "The field \"retry_at\" is %q: write an RFC 3339 time, when the claim is due again.", Clip(req.RetryAt, QuoteRunes))
	}
	if req.PendingTTLMillis == 0 {
		req.PendingTTLMillis = DefaultPendingTTL.Milliseconds()
	}
	return due, nil
}

// TooLateToWait is the refusal of a wait whose due time lies past the
// claim's pending ttl.
func TooLateToWait(due time.Time, ttl time.Duration) *Error {
	return FieldErrorf(ECodeInvalidField, "retry_at", "The claim would be due at %s, later than its pending ttl (%s) allows: it cannot wait that long.", FormatTime(due), ttl)
}

// ClaimWaitStore is a store that can put a running claim back to waiting
// until a due time; the bridge serves POST /claims/{id}/wait when its
// store implements it.
type ClaimWaitStore interface {
	// WaitClaim, in one transaction, checks that req's coordinator holds
	// claim req.ID at req.Fence (else ECodeFenced), makes it waiting with
	// no holder, due at due, expiring at its creation plus the pending
	// ttl, and writes the pair's queued receipt with req.Reason, which
	// it returns for the streams.
	WaitClaim(ctx context.Context, req ClaimWaitRequest, due time.Time) (Claim, Receipt, error)
}
