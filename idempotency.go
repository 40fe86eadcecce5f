package agentbridge

import (
	"bytes"
	"fmt"
	"slices"
)

// CheckReplay decides an append whose idempotency key already names the
// stored event: a retry of the same append (same sender, type, to, content
// and meta, compared in the stored form the store keeps) is answered with
// the stored event, and anything else is refused with 409
// idempotency_conflict, so that a key another writer used first never
// answers for a different event (contract 7.3). in must have passed
// AppendRequest.Validate and its meta the store's round trip, as a store's
// writer has them; the hop, which the bridge assigns, is not compared. The
// sentence names neither the stored event's sender nor its content.
func CheckReplay(thread, key string, stored Event, in EventInput) error {
	what := ""
	switch {
	case stored.From != in.From:
		what = "another sender"
	case stored.Type != in.Type || stored.To != in.To:
		what = "a different type or recipient"
	case !bytes.Equal(bytes.TrimSpace(stored.Content), bytes.TrimSpace(in.Content)):
		what = "different content"
	case !sameMeta(stored.Meta, in.Meta):
		what = "a different meta"
	default:
		return nil
	}
	return &Error{
		Code: ECodeIdempotencyConflict, Field: "Idempotency-Key", Thread: thread,
		Message: fmt.Sprintf("The Idempotency-Key %q was already used in thread %q for an event with %s; a retry must send the same event, and a new event needs a new key. Nothing was stored.", Clip(key, QuoteRunes), thread, what),
	}
}

// sameMeta compares the client's part of two metas (all but the hop).
func sameMeta(a, b Meta) bool {
	if a.ReplyTo != b.ReplyTo || a.Via != b.Via || !slices.Equal(a.Tags, b.Tags) || len(a.Extra) != len(b.Extra) {
		return false
	}
	for k, v := range a.Extra {
		w, ok := b.Extra[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
