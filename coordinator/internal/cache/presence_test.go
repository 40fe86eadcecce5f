package cache

import (
	"maps"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

func TestPresenceCache(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	pr := func(thread, id, state string, age time.Duration, stale bool) agentbridge.Presence {
		return agentbridge.Presence{Thread: thread, ID: id, State: state, Stale: stale, UpdatedAt: agentbridge.FormatTime(now.Add(-age))}
	}
	want := func(t *testing.T, c *Presence, thread string, ok bool, states map[string]string) {
		t.Helper()
		got, gotOK := c.States(thread)
		if gotOK != ok || (ok && !maps.Equal(got, states)) {
			t.Fatalf("states(%q) = %v, %v; want %v, %v", thread, got, gotOK, states, ok)
		}
	}
	ttl := 120 * time.Second

	t.Run("read once, then kept from the stream", func(t *testing.T) {
		c := NewPresence(clock)
		c.Opened(true)
		want(t, c, "T", false, nil)
		gen := c.Begin("T")
		c.Fill(gen, "T", []agentbridge.Presence{pr("", "alice", "listening", time.Second, false), pr("", "bob", "thinking", time.Hour, true)}, ttl)
		want(t, c, "T", true, map[string]string{"alice": "listening"})
		c.Change(pr("T", "bob", "thinking", 0, false))
		c.Change(pr("U", "carol", "thinking", 0, false)) // a thread not held stays unread
		want(t, c, "T", true, map[string]string{"alice": "listening", "bob": "thinking"})
		want(t, c, "U", false, nil)
	})
	t.Run("a report goes stale after the TTL", func(t *testing.T) {
		c := NewPresence(clock)
		c.Opened(true)
		c.Fill(c.Begin("T"), "T", []agentbridge.Presence{pr("", "alice", "listening", ttl-time.Second, false)}, ttl)
		want(t, c, "T", true, map[string]string{"alice": "listening"})
		now = now.Add(2 * time.Second)
		defer func() { now = now.Add(-2 * time.Second) }()
		want(t, c, "T", true, map[string]string{})
	})
	t.Run("a change during the read is applied after it", func(t *testing.T) {
		c := NewPresence(clock)
		c.Opened(true)
		gen := c.Begin("T")
		c.Change(pr("T", "alice", "thinking", 0, false))
		c.Fill(gen, "T", []agentbridge.Presence{pr("", "alice", "listening", time.Second, false)}, ttl)
		want(t, c, "T", true, map[string]string{"alice": "thinking"})
	})
	t.Run("a reconnection forgets, and drops a read begun before it", func(t *testing.T) {
		c := NewPresence(clock)
		c.Opened(true)
		c.Fill(c.Begin("T"), "T", nil, ttl)
		want(t, c, "T", true, map[string]string{})
		gen := c.Begin("U")
		c.Opened(true)
		want(t, c, "T", false, nil)
		c.Fill(gen, "U", nil, ttl)
		want(t, c, "U", false, nil)
	})
	t.Run("nothing is kept while long-polling", func(t *testing.T) {
		c := NewPresence(clock)
		c.Opened(false)
		c.Fill(c.Begin("T"), "T", nil, ttl)
		want(t, c, "T", false, nil)
	})
	t.Run("a bridge that gives no TTL is read every time", func(t *testing.T) {
		c := NewPresence(clock)
		c.Opened(true)
		c.Fill(c.Begin("T"), "T", nil, 0)
		want(t, c, "T", false, nil)
	})
}
