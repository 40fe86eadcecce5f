package agentbridge

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Receipt states: what became of one (event, participant) pair that the
// coordinator's trigger rules considered (contract 5.5). The invocation
// states mirror the coordinator's ledger; skipped means the rules decided
// not to invoke, with the decision's reason.
const (
	ReceiptQueued      = "queued"
	ReceiptRunning     = "running"
	ReceiptSucceeded   = "succeeded"
	ReceiptFailed      = "failed"
	ReceiptTimeout     = "timeout"
	ReceiptCancelled   = "cancelled"
	ReceiptPassed      = "passed"
	ReceiptRefused     = "refused"
	ReceiptInterrupted = "interrupted"
	ReceiptSkipped     = "skipped"
)

// ReceiptStates lists every receipt state, in the contract's order.
var ReceiptStates = []string{
	ReceiptQueued, ReceiptRunning, ReceiptSucceeded, ReceiptFailed, ReceiptTimeout,
	ReceiptCancelled, ReceiptPassed, ReceiptRefused, ReceiptInterrupted, ReceiptSkipped,
}

// ValidReceiptState reports whether s is a known receipt state.
func ValidReceiptState(s string) bool {
	for _, v := range ReceiptStates {
		if v == s {
			return true
		}
	}
	return false
}

// Bounds of a receipt's free-text fields, in bytes: a reason is one short
// sentence, invocation and reply are ids.
const (
	MaxReceiptReason = 512
	MaxReceiptID     = 128
)

// ReceiptInput is the body of PUT /threads/{id}/receipts/{event}/{participant}
// together with the path's three ids.
type ReceiptInput struct {
	Thread      string `json:"-"`
	Event       string `json:"-"`
	Participant string `json:"-"`
	From        string `json:"from"`
	State       string `json:"state"`
	Reason      string `json:"reason,omitempty"`
	Invocation  string `json:"invocation,omitempty"`
	Reply       string `json:"reply,omitempty"`
	// Fence, when set, makes the receipt one of a claim's writes, checked
	// inside the store's write as AppendRequest.Fence is.
	Fence *ClaimFence `json:"-"`
}

// Validate checks everything about in that does not need the store: the
// participant and sender ids, the state, and the length and encoding of the
// free-text fields. Errors are *Error values naming the field.
func (in ReceiptInput) Validate() error {
	switch {
	case in.Event == "":
		return FieldErrorf(ECodeMissingField, "event", "The event id is required in the path: /threads/{id}/receipts/{event}/{participant}.")
	case len(in.Event) > MaxReceiptID || !utf8.ValidString(in.Event):
		return FieldErrorf(ECodeInvalidField, "event", "The event id must be at most %d bytes of UTF-8.", MaxReceiptID)
	case !ParticipantIDPattern.MatchString(in.Participant):
		return FieldErrorf(ECodeInvalidField, "participant", "The participant id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(in.Participant, QuoteRunes))
	case in.From == "":
		return FieldErrorf(ECodeMissingField, "from", "The field \"from\" is required: say who reports this receipt (the coordinator's id).")
	case !ParticipantIDPattern.MatchString(in.From):
		return FieldErrorf(ECodeInvalidField, "from", "The sender id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(in.From, QuoteRunes))
	case in.State == "":
		return FieldErrorf(ECodeMissingField, "state", "The field \"state\" is required: one of %s.", strings.Join(ReceiptStates, ", "))
	case !ValidReceiptState(in.State):
		return FieldErrorf(ECodeInvalidField, "state", "The receipt state %q is not one of %s.", Clip(in.State, QuoteRunes), strings.Join(ReceiptStates, ", "))
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"reason", in.Reason, MaxReceiptReason}, {"invocation", in.Invocation, MaxReceiptID}, {"reply", in.Reply, MaxReceiptID}} {
		if len(f.v) > f.max || !utf8.ValidString(f.v) {
			return FieldErrorf(ECodeInvalidField, f.name, "The field %q must be at most %d bytes of UTF-8.", f.name, f.max)
		}
	}
	return nil
}

// Receipt is the latest state of one (event, participant) pair. It lives
// outside the event log: it has no seq, never makes a revision, and only
// the latest one per pair is kept.
type Receipt struct {
	// Thread is set on receipts sent over the streams, which mix threads
	// (the global one) or need no lookup to route (the thread's own).
	Thread      string `json:"thread,omitempty"`
	Event       string `json:"event"`
	Participant string `json:"participant"`
	// From is who reported it (the coordinator's id).
	From       string `json:"from"`
	State      string `json:"state"`
	Reason     string `json:"reason"`
	Invocation string `json:"invocation"`
	Reply      string `json:"reply"`
	UpdatedAt  string `json:"updated_at"`
}

// String renders a receipt as one line for logs and the CLI.
func (r Receipt) String() string {
	s := fmt.Sprintf("%s %s: %s", r.Event, r.Participant, r.State)
	if r.Reason != "" {
		s += " — " + r.Reason
	}
	return s
}
