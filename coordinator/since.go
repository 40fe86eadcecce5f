package coordinator

import (
	"context"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// sinceReadSpan is the most events up to the trigger prepare reads: enough
// for since_last_turn's cap plus the previous reply that bounds it. A reply
// further back than that would not change since_last_turn (it is capped),
// so the whole thread is never scanned.
const sinceReadSpan = adapters.MaxSinceLastTurn + 1

// sinceSpan is how many events up to the trigger prepare must read for
// since_last_turn: from the participant's last reply the coordinator
// posted (kept in the ledger) when it is recent, else sinceReadSpan. A
// reply the participant posted itself since then is newer, so it lies
// inside the span too and sinceLastTurn still finds it.
func (c *Coordinator) sinceSpan(ctx context.Context, inv ledger.Invocation) (int, error) {
	seq, ok, err := c.db.LastReply(ctx, inv.Thread, inv.Participant)
	if err != nil {
		return 0, err
	}
	if !ok || seq >= inv.TriggerSeq || inv.TriggerSeq-seq >= sinceReadSpan {
		return sinceReadSpan, nil
	}
	// The reply itself is read too, so that it bounds the search.
	return int(inv.TriggerSeq-seq) + 1, nil
}

// sinceLastTurn returns what participant has not seen: the events after its
// previous message, up to and including the trigger (the last of events),
// without other participants' private events, at most
// adapters.MaxSinceLastTurn, oldest first. events are the thread's last
// events up to the trigger, oldest first. It never returns nil.
func sinceLastTurn(events []agentbridge.Event, participant string) []agentbridge.Event {
	start := 0
	// The trigger itself is never the previous reply.
	for i := len(events) - 2; i >= 0; i-- {
		if e := events[i]; e.From == participant && e.Type == agentbridge.TypeMessage {
			start = i + 1
			break
		}
	}
	out := agentbridge.VisibleTo(events[start:], participant)
	if len(out) > adapters.MaxSinceLastTurn {
		out = out[len(out)-adapters.MaxSinceLastTurn:]
	}
	return out
}

// presenceStates reads the thread's presence for the roster: from the
// cache kept from the stream, else from the bridge (once per thread and
// connection). It is
// best effort: a participant the bridge has no fresh presence for is
// offline, and a failed read leaves everyone offline rather than holding
// up the invocation.
func (c *Coordinator) presenceStates(ctx context.Context, thread string) map[string]string {
	if m, ok := c.rosterPresence.States(thread); ok {
		return m
	}
	gen := c.rosterPresence.Begin(thread)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	list, ttl, err := c.bridge.PresenceTTL(pctx, thread)
	c.rosterPresence.Fill(gen, thread, list, ttl)
	if err != nil {
		c.log.Debug("read presence for the roster", "thread", thread, "err", err)
		return nil
	}
	out := make(map[string]string, len(list))
	for _, p := range list {
		if !p.Stale {
			out[p.ID] = p.State
		}
	}
	return out
}

// partySince is since_last_turn for a party round-2 run: the participant
// answered round 1 after the trigger, so what it has not seen is the
// trigger it reacts to and the other agents' round-1 answers (the events
// after the trigger in window, which partyPayload appended).
func partySince(trigger agentbridge.Event, window []agentbridge.Event, participant string) []agentbridge.Event {
	out := []agentbridge.Event{trigger}
	for _, e := range window {
		if e.Seq > trigger.Seq && e.From != participant {
			out = append(out, e)
		}
	}
	return out
}
