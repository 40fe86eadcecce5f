package bridge

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestPresenceLimits: details over 4 KiB and a new entry past a thread's
// 256 are refused through HTTP with a typed error and a sentence, and
// nothing changes; a participant already present may still report.
func TestPresenceLimits(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t1")
	details := func(n int) string { return `{"note":"` + strings.Repeat("x", n-len(`{"note":""}`)) + `"}` }
	ts.must(200, "POST", "/threads/t1/presence", `{"from":"codex","state":"idle","details":`+details(MaxPresenceDetails)+`}`)
	a := ts.do("POST", "/threads/t1/presence", `{"from":"big","state":"idle","details":`+details(MaxPresenceDetails+1)+`}`)
	if a.status != 413 || a.errCode() != agentbridge.ECodeDetailsTooLarge || a.errField("field") != "details" {
		t.Fatalf("details of 4 KiB + 1: %d %s", a.status, a.body)
	}
	for i := 1; i < MaxPresencePerThread; i++ {
		ts.must(200, "POST", "/threads/t1/presence", fmt.Sprintf(`{"from":"p%d","state":"idle"}`, i))
	}
	a = ts.do("POST", "/threads/t1/presence", `{"from":"one-too-many","state":"idle"}`)
	if a.status != 429 || a.errCode() != agentbridge.ECodeTooManyPresence {
		t.Fatalf("entry 257: %d %s", a.status, a.body)
	}
	if msg, _ := a.errField("message").(string); !strings.Contains(msg, "256 participants") {
		t.Errorf("message %q does not name the limit", msg)
	}
	ts.must(200, "POST", "/threads/t1/presence", `{"from":"codex","state":"thinking"}`)
	var list presenceAnswer
	if err := json.Unmarshal([]byte(ts.must(200, "GET", "/threads/t1/presence", "").body), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Participants) != MaxPresencePerThread {
		t.Fatalf("thread holds %d entries, want %d", len(list.Participants), MaxPresencePerThread)
	}
	for _, p := range list.Participants {
		if p.ID == "big" || p.ID == "one-too-many" {
			t.Fatalf("a refused report was kept: %+v", p)
		}
	}
}

// TestPresenceHubPerSender: one participant holds presence in at most
// MaxPresencePerSender threads; entries forgotten after ten TTLs free
// their places, in every thread.
func TestPresenceHubPerSender(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	p := newPresenceHub(time.Minute, func() time.Time { return now })
	for i := range MaxPresencePerSender {
		if _, err := p.set(fmt.Sprintf("t%d", i), agentbridge.PresenceInput{From: "codex", State: "idle"}); err != nil {
			t.Fatalf("thread %d: %v", i, err)
		}
	}
	_, err := p.set("one-more", agentbridge.PresenceInput{From: "codex", State: "idle"})
	if agentbridge.ErrorCode(err) != agentbridge.ECodeTooManyPresence {
		t.Fatalf("thread %d: %v, want too_many_presence", MaxPresencePerSender+1, err)
	}
	if _, err := p.set("one-more", agentbridge.PresenceInput{From: "claude", State: "idle"}); err != nil {
		t.Fatalf("another participant: %v", err)
	}
	if _, err := p.set("t0", agentbridge.PresenceInput{From: "codex", State: "thinking"}); err != nil {
		t.Fatalf("a report where codex is present: %v", err)
	}
	now = now.Add(10*time.Minute + time.Second)
	if _, err := p.set("one-more", agentbridge.PresenceInput{From: "codex", State: "idle"}); err != nil {
		t.Fatalf("after ten TTLs: %v", err)
	}
	if n := len(p.threads); n != 1 || p.perSender["codex"] != 1 {
		t.Fatalf("after forgetting: %d threads, codex in %d, want 1 and 1", n, p.perSender["codex"])
	}
}
