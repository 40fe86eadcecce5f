package coordinator_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// BenchmarkPartyRound measures a whole party round of three agents whose
// adapters each take 1 s, in both rounds: from the POST of the human's
// message to the closing notice in the thread, read from a thread stream.
// Two parallel rounds make the floor 2 s; the rest is the coordinator's
// overhead (selection, ledger, context reads, posts, the round switch).
func BenchmarkPartyRound(b *testing.B) {
	s := startStack(b, func(c *config.Config) { c.MaxInvocationsPerMinute = 0 })
	th := s.thread("party-bench")
	for _, id := range []string{"alice", "bob", "carol"} {
		s.invite(th, id, agentbridge.Profile{})
	}
	s.control(th, "user", map[string]any{"party": map[string]any{"on": true, "max_agents": 3}})
	evs := s.events(th)
	st, err := s.cl.Stream(b.Context(), th, evs[len(evs)-1].Seq)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	rounds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		trig := s.say(th, "all", fmt.Sprintf("round %d fake:sleep=1s", i))
		replies := 0
		for {
			it := testutil.Within(b, time.Minute, "a reply", func() { st.Close() }, st.Next)
			if it.Event == nil || it.Event.Meta.ReplyTo != trig.ID {
				continue
			}
			if !it.Event.Meta.HasTag("party") {
				replies++
				continue
			}
			if replies != 6 {
				b.Fatalf("the round ended after %d replies, want 6 (3 agents, 2 rounds): %s", replies, it.Event.Text())
			}
			break
		}
		rounds = append(rounds, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(rounds)
	b.ReportMetric(rounds[len(rounds)/2].Seconds(), "s/round-p50")
	b.ReportMetric(rounds[len(rounds)-1].Seconds(), "s/round-max")
}
