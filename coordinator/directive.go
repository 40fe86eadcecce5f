package coordinator

import (
	"context"
	"fmt"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// Reply directives (contract 5.2): an adapter's output may tell the
// coordinator what to do with it instead of being posted as it is.
const (
	// PassDirective, as the whole trimmed output, posts nothing.
	PassDirective = "[PASS]"
	// QuestionDirective, at the start of a line, sends the reply to the
	// human who started the chain.
	QuestionDirective = "[USER QUESTION]:"
)

// DirectiveKind says how a reply is handled.
type DirectiveKind int

// The directive kinds.
const (
	// DirectiveReply is an ordinary reply, posted to all.
	DirectiveReply DirectiveKind = iota
	// DirectivePass posts nothing; the invocation's status is passed.
	DirectivePass
	// DirectiveQuestion is posted to the human who started the chain,
	// tagged question.
	DirectiveQuestion
)

// Directive is what an adapter's output asks of the coordinator.
type Directive struct {
	Kind DirectiveKind
}

// ParseDirective reads an adapter's stdout. Only the exact trimmed output
// "[PASS]" passes: a reply that merely mentions the word is still a reply,
// so an agent cannot lose a real answer by quoting the directive. A
// question is recognised on any line (leading blanks ignored) because
// agents often explain before they ask; the whole output is posted, the
// marker included, so the person sees the question in its context.
func ParseDirective(stdout string) Directive {
	trimmed := strings.TrimSpace(stdout)
	if trimmed == PassDirective {
		return Directive{Kind: DirectivePass}
	}
	for line := range strings.SplitSeq(trimmed, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " \t\r"), QuestionDirective) {
			return Directive{Kind: DirectiveQuestion}
		}
	}
	return Directive{Kind: DirectiveReply}
}

// maxChainReads bounds how many pages of the thread are read while walking
// a reply_to chain: chains are short (the loop guard stops them), and a
// question must never stall on an unbounded walk.
const maxChainReads = 4

// chainPage is how many events each read of the chain walk fetches.
const chainPage = 200

// questionRecipient finds the human who started the chain that trigger
// belongs to: trigger's sender if human, else the nearest human sender up
// its reply_to chain; the first of humans when the chain holds none (or
// cannot be followed within the bounds). known holds events already read
// (the context window), so most walks need no extra read.
func (c *Coordinator) questionRecipient(ctx context.Context, thread string, trigger agentbridge.Event, known []agentbridge.Event, humans agentbridge.Humans) (string, error) {
	fallback := agentbridge.ToAll
	if len(humans) > 0 {
		fallback = humans[0]
	}
	byID := make(map[string]agentbridge.Event, len(known)+1)
	oldest := trigger.Seq
	for _, e := range known {
		byID[e.ID] = e
		if e.Seq < oldest {
			oldest = e.Seq
		}
	}
	byID[trigger.ID] = trigger
	reads := 0
	cur := trigger
	for range chainPage * maxChainReads {
		if humans.Has(cur.From) {
			return cur.From, nil
		}
		next := cur.Meta.ReplyTo
		if next == "" {
			return fallback, nil
		}
		e, ok := byID[next]
		for !ok {
			if reads >= maxChainReads || oldest <= 1 {
				return fallback, nil
			}
			evs, err := c.bridge.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{
				Thread: thread, After: -1, Until: oldest - 1, Tail: chainPage,
			})
			reads++
			if err != nil {
				return "", fmt.Errorf("read the chain of %s: %w", trigger.ID, err)
			}
			if len(evs) == 0 {
				return fallback, nil
			}
			for _, ev := range evs {
				byID[ev.ID] = ev
				oldest = min(oldest, ev.Seq)
			}
			e, ok = byID[next]
		}
		cur = e
	}
	return fallback, nil
}

// questionTo is the recipient of a successful run's question directive:
// the person the question's chain leads to (questionRecipient), or the
// first human when the chain cannot be read. It is empty for any other
// run.
func (c *Coordinator) questionTo(ctx context.Context, cfg *config.Config, inv ledger.Invocation, in prepared, res adapters.Result) string {
	if in.scene != nil || !res.OK() || ParseDirective(string(res.Stdout)).Kind != DirectiveQuestion {
		return ""
	}
	to, err := c.questionRecipient(ctx, inv.Thread, in.trigger, in.p.ContextWindow, cfg.HumanIDs)
	if err != nil {
		// A question must still reach a person: the first human is
		// the documented fallback.
		c.log.Warn("cannot follow the chain of a question; sending it to the first human", "id", inv.ID, "err", err)
		to = fallbackRecipient(cfg.HumanIDs)
	}
	return to
}
