package coordinator_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// BenchmarkResumedPromptBytes compares, on a 200-message thread where
// alice takes part, the prompt her next turn sends to a resumed CLI
// session (agent-bridge prompt with session.id set: roster plus
// since_last_turn) with the prompt every turn sent before sessions (the
// shipped primer plus the default 25-event context window). The payload is
// the one the real coordinator built for that turn.
func BenchmarkResumedPromptBytes(b *testing.B) {
	_, file, _, _ := runtime.Caller(0)
	primer := filepath.Join(filepath.Dir(file), "..", "docs", "bridge-agent-primer.md")
	s := startStack(b, func(c *config.Config) {
		c.PrimerPath = primer
		a := c.Agents["alice"]
		a.Env = map[string]string{"FAKE_ADAPTER_SESSION": "keep"}
		c.Agents["alice"] = a
	})
	th := s.thread("review")
	s.invite(th, "alice", agentbridge.Profile{Client: "codex"})
	s.invite(th, "bob", agentbridge.Profile{Client: "claude"})
	// alice's first turn opens her session.
	s.turn(th, "alice", "please review the storage layer")
	// 200 messages in turn from the person, bob and alice (to the person,
	// so they wake nobody): short questions, longer agent answers.
	speakers := []string{"user", "bob", "alice"}
	for i := range 200 {
		from := speakers[i%3]
		text := fmt.Sprintf("Point %d: should the writer batch commits?", i)
		if from != "user" {
			text = fmt.Sprintf("On point %d: ", i) + strings.Repeat("The writer goroutine holds one transaction per batch, and readers use the pool. ", 12)
		}
		s.post(th, agentbridge.EventInput{From: from, To: "user", Content: jsonString(text)})
	}
	trigger, _ := s.turn(th, "alice", "@alice what do you think now?")
	var p adapters.Payload
	if err := json.Unmarshal(s.savedPayload(trigger.ID, "alice"), &p); err != nil {
		b.Fatal(err)
	}
	if p.Session.ID == "" {
		b.Fatal("alice's turn was not resumed")
	}
	before := p
	before.Session = adapters.SessionInfo{}
	before.Participants = nil
	full := len(adapters.RenderPrompt(before))
	var resumed int
	b.ResetTimer()
	for range b.N {
		resumed = len(adapters.RenderPrompt(p))
	}
	b.StopTimer()
	b.ReportMetric(float64(resumed), "resumed-bytes")
	b.ReportMetric(float64(full), "full-window-bytes")
	b.ReportMetric(100*float64(resumed)/float64(full), "%-of-full")
	b.ReportMetric(float64(len(p.SinceLastTurn)), "since-events")
}
