package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"unicode/utf8"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// A reply the bridge refuses for good (too large, or invalid) must not
// vanish (contract 6.3): every trigger gets one reply or one error notice.
// A reply too large for the bridge's body limit is cut until it fits and
// says so in meta.truncated; anything else, and a reply that does not fit
// even cut to minCutChars, is replaced by the coordinator's error notice
// naming the bridge's reason. Both are posted under the pair's key, which
// the refused request left unused (a refusal stores nothing), but for an
// idempotency_conflict, whose key another writer holds.
const (
	// MetaTruncated is the meta key of a reply cut to fit the bridge:
	// {"original_chars": n, "posted_chars": m, "reason": code}.
	MetaTruncated = "truncated"
	// minCutChars is the shortest cut worth posting as the reply: below
	// it, the error notice tells more than the stump.
	minCutChars = 1000
	// maxCuts bounds the halvings: a 10 MB reply reaches a 1 MiB limit in
	// four.
	maxCuts = 12
)

// truncatedMeta is the value of meta.truncated.
type truncatedMeta struct {
	OriginalChars int    `json:"original_chars"`
	PostedChars   int    `json:"posted_chars"`
	Reason        string `json:"reason"`
}

// refusedPost is what became of a post the bridge refused for good.
type refusedPost struct {
	ev     agentbridge.Event
	status string // the invocation's status from now on ("" = unchanged)
	note   string // for the ledger's error column
}

// postRefused posts what stands in for in, which the bridge refused with
// ae: a cut of it, or the error notice. It returns an error only when that
// too could not be posted (the ledger then says so).
func (c *Coordinator) postRefused(ctx context.Context, inv ledger.Invocation, in agentbridge.EventInput, key string, ae *agentbridge.Error) (refusedPost, error) {
	var text string
	if ae.Code == agentbridge.ECodeBodyTooLarge && in.Type == agentbridge.TypeMessage && json.Unmarshal(in.Content, &text) == nil {
		orig := utf8.RuneCountInString(text)
		for n, i := orig/2, 0; n >= minCutChars && i < maxCuts; n, i = n/2, i+1 {
			cut := in
			cut.Content = mustJSON(adapters.TruncateReply(text, n))
			cut.Meta.Extra = maps.Clone(in.Meta.Extra)
			if cut.Meta.Extra == nil {
				cut.Meta.Extra = map[string]json.RawMessage{}
			}
			cut.Meta.Extra[MetaTruncated] = mustJSON(truncatedMeta{OriginalChars: orig, PostedChars: n, Reason: ae.Code})
			ev, err := c.appendRetry(ctx, inv.ID, inv.Thread, cut, key)
			if err == nil {
				c.log.Warn("the bridge refused a reply as too large; posted it cut", "id", inv.ID, "original_chars", orig, "posted_chars", n)
				return refusedPost{ev: ev, note: fmt.Sprintf("the bridge refused the reply of %d characters as too large (%s); posted its first %d", orig, ae.Message, n)}, nil
			}
			var again *agentbridge.Error
			if !errors.As(err, &again) {
				return refusedPost{}, err // ctx ended: the post stays owed
			}
			if again.Code != agentbridge.ECodeBodyTooLarge {
				ae = again
				break
			}
		}
	}
	if ae.Code == agentbridge.ECodeIdempotencyConflict {
		// The key holds another writer's event: the notice, which must
		// reach the thread, goes under a key derived from it, as
		// deterministic for the next run's retry.
		key = idempotencyKey(key, "conflict")
	}
	notice := errorPost(c.cfg.Load(), inv, fmt.Sprintf("the bridge refused %s's reply (%s): %s", inv.Participant, ae.Code, ae.Message))
	ev, err := c.appendRetry(ctx, inv.ID, inv.Thread, notice, key)
	if err != nil {
		return refusedPost{}, err
	}
	c.log.Warn("the bridge refused a reply; posted an error notice instead", "id", inv.ID, "code", ae.Code, "err", ae.Message)
	return refusedPost{ev: ev, status: ledger.StatusFailed, note: "the bridge refused the reply: " + ae.Message}, nil
}
