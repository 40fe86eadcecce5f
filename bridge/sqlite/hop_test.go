package sqlite

import (
	"context"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestServerAssignedHop checks contract 5.1 through the store: every
// message gets meta.hop, from its reply_to event when it has one, and a
// client's own hop is refused. It reopens the store halfway so that the
// hop of the previous message also comes from the database, not the cache.
func TestServerAssignedHop(t *testing.T) {
	path := t.TempDir() + "/bridge.db"
	ctx := context.Background()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hopOf := func(ev agentbridge.Event) int {
		t.Helper()
		if ev.Meta.Hop == nil {
			t.Fatalf("message %q has no hop", ev.Text())
		}
		got, err := s.Event(ctx, ev.ID)
		if err != nil || got.Meta.Hop == nil || *got.Meta.Hop != *ev.Meta.Hop {
			t.Fatalf("stored event %+v (%v) differs from the answer's hop %d", got, err, *ev.Meta.Hop)
		}
		return *ev.Meta.Hop
	}
	reply := func(from, to string) agentbridge.EventInput {
		in := msg(from, "re")
		in.Meta.ReplyTo = to
		return in
	}
	newThread(t, s, "t")
	ctl := mustAppend(t, s, "t", control("user", `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m"}}}`))
	if ctl.Meta.Hop != nil {
		t.Errorf("a control got hop %d; only messages get one", *ctl.Meta.Hop)
	}
	first := mustAppend(t, s, "t", msg("codex", "an agent speaks first"))
	if h := hopOf(first); h != 0 {
		t.Errorf("first message of a thread from an agent: hop %d, want 0", h)
	}
	human := mustAppend(t, s, "t", msg("user", "hello"))
	a := mustAppend(t, s, "t", reply("codex", human.ID))
	b := mustAppend(t, s, "t", reply("claude", a.ID))
	for ev, want := range map[*agentbridge.Event]int{&human: 0, &a: 1, &b: 2} {
		if h := hopOf(*ev); h != want {
			t.Errorf("%s: hop %d, want %d", ev.From, h, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(ctx, path, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := mustAppend(t, s, "t", msg("codex", "no reply_to: one more than the last message"))
	if h := hopOf(c); h != 3 {
		t.Errorf("after reopening: hop %d, want 3", h)
	}
	d := mustAppend(t, s, "t", reply("claude", human.ID))
	if h := hopOf(d); h != 1 {
		t.Errorf("reply to the human's message: hop %d, want 1", h)
	}
	e := mustAppend(t, s, "t", reply("claude", ctl.ID))
	if h := hopOf(e); h != 1 {
		t.Errorf("reply to a control before any message: hop %d, want 1 (the control carries hop 0)", h)
	}
	forged := msg("codex", "resetting the chain")
	forged.Meta.Hop = new(0)
	before := len(allEvents(t, s, "t"))
	_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: forged})
	if e := wantCode(t, err, agentbridge.ECodeFieldNotAllowed); e.Field != "meta.hop" {
		t.Errorf("field = %q, want meta.hop", e.Field)
	}
	if n := len(allEvents(t, s, "t")); n != before {
		t.Errorf("a refused append stored something: %d → %d events", before, n)
	}
}
