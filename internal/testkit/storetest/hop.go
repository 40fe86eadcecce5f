package storetest

import (
	"context"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// testServerAssignedHop checks contract 5.1 through the store: every
// message gets meta.hop, from its reply_to event when it has one, else one
// more than the thread's previous message, and a client's own hop is
// refused with nothing stored.
func testServerAssignedHop(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	hopOf := func(ev agentbridge.Event) int {
		t.Helper()
		if ev.Meta.Hop == nil {
			t.Fatalf("message %q has no hop", ev.Text())
		}
		got, err := EventAt(s, ev.Thread, ev.Seq)
		if err != nil || got.Meta.Hop == nil || *got.Meta.Hop != *ev.Meta.Hop {
			t.Fatalf("stored event %+v (%v) differs from the answer's hop %d", got, err, *ev.Meta.Hop)
		}
		return *ev.Meta.Hop
	}
	reply := func(from, to string) agentbridge.EventInput {
		in := Msg(from, "re")
		in.Meta.ReplyTo = to
		return in
	}
	NewThread(t, s, "t")
	ctl := MustAppend(t, s, "t", Control("user", `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m"}}}`))
	if ctl.Meta.Hop != nil {
		t.Errorf("a control got hop %d; only messages get one", *ctl.Meta.Hop)
	}
	first := MustAppend(t, s, "t", Msg("codex", "an agent speaks first"))
	if h := hopOf(first); h != 0 {
		t.Errorf("first message of a thread from an agent: hop %d, want 0", h)
	}
	human := MustAppend(t, s, "t", Msg("user", "hello"))
	a := MustAppend(t, s, "t", reply("codex", human.ID))
	b := MustAppend(t, s, "t", reply("claude", a.ID))
	for ev, want := range map[*agentbridge.Event]int{&human: 0, &a: 1, &b: 2} {
		if h := hopOf(*ev); h != want {
			t.Errorf("%s: hop %d, want %d", ev.From, h, want)
		}
	}
	c := MustAppend(t, s, "t", Msg("codex", "no reply_to: one more than the last message"))
	if h := hopOf(c); h != 3 {
		t.Errorf("without reply_to: hop %d, want 3", h)
	}
	// claude answered codex (hop 2) after the human spoke: going back to
	// the human's message, or to an event older still, does not lower its
	// count (contract 7.3). A sender that has not spoken since the parent
	// counts from it.
	d := MustAppend(t, s, "t", reply("claude", human.ID))
	if h := hopOf(d); h != 2 {
		t.Errorf("claude's reply to the human's message after its hop 2: hop %d, want 2", h)
	}
	e := MustAppend(t, s, "t", reply("claude", ctl.ID))
	if h := hopOf(e); h != 2 {
		t.Errorf("claude's reply to a control before any message: hop %d, want 2", h)
	}
	if h := hopOf(MustAppend(t, s, "t", reply("gemini", ctl.ID))); h != 1 {
		t.Errorf("a first reply to a control before any message: hop %d, want 1 (the control carries hop 0)", h)
	}

	// A chain of agent replies counts up from the human's message.
	prev := MustAppend(t, s, "t", Msg("user", "again"))
	for i := range 5 {
		ev := MustAppend(t, s, "t", reply("codex", prev.ID))
		if h := hopOf(ev); h != i+1 {
			t.Errorf("chain step %d: hop %d, want %d", i, h, i+1)
		}
		prev = ev
	}

	// The attack of issue 29: two agents ping-pong to hop 6, then one
	// replies to the human's message, or to the chain's first reply, to
	// start the count again. It keeps its hop.
	root := MustAppend(t, s, "t", Msg("user", "a new question"))
	prev, first1 := root, agentbridge.Event{}
	for i := range 6 {
		ev := MustAppend(t, s, "t", reply([]string{"codex", "claude"}[i%2], prev.ID))
		if i == 0 {
			first1 = ev
		}
		prev = ev
	}
	if h := hopOf(prev); h != 6 {
		t.Fatalf("ping-pong: claude at hop %d, want 6", h)
	}
	for name, parent := range map[string]agentbridge.Event{"the human's message": root, "the chain's first reply": first1} {
		if h := hopOf(MustAppend(t, s, "t", reply("claude", parent.ID))); h < 6 {
			t.Errorf("claude at hop 6 replying to %s: hop %d, want at least 6", name, h)
		}
	}
	// A human's new message starts a new count for everyone.
	fresh := MustAppend(t, s, "t", Msg("user", "something else"))
	if h := hopOf(MustAppend(t, s, "t", reply("claude", fresh.ID))); h != 1 {
		t.Errorf("claude's reply to a new human message: hop %d, want 1", h)
	}

	before := len(AllEvents(t, s, "t"))
	forged := Msg("codex", "resetting the chain")
	forged.Meta.Hop = new(0)
	_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: forged})
	if e := WantCode(t, err, agentbridge.ECodeFieldNotAllowed); e.Field != "meta.hop" {
		t.Errorf("field = %q, want meta.hop", e.Field)
	}
	unknown := reply("codex", "01NOSUCHEVENT0000000000000")
	_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: unknown})
	if e := WantCode(t, err, agentbridge.ECodeUnknownReplyTo); e.Field != "meta.reply_to" {
		t.Errorf("field = %q, want meta.reply_to", e.Field)
	}
	if n := len(AllEvents(t, s, "t")); n != before {
		t.Errorf("a refused append stored something: %d → %d events", before, n)
	}
}

// testSuggestions checks POST /suggest's storage: a suggestion is stored
// pending, listed in arrival order, filtered by status, and bad input is
// refused with nothing stored.
func testSuggestions(t *testing.T, newStore Factory) {
	ss, ok := newStore(t, nil).(agentbridge.SuggestionStore)
	if !ok {
		t.Skip("the store keeps no suggestions")
	}
	ctx := context.Background()
	if list, err := ss.Suggestions(ctx, ""); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("empty store: %v %v, want an empty, non-nil list", list, err)
	}
	var ids []string
	for _, title := range []string{"first", "second", "third"} {
		sg, err := ss.Suggest(ctx, agentbridge.SuggestionInput{From: "codex", Title: title, Description: "d\x00 " + title})
		if err != nil {
			t.Fatal(err)
		}
		if sg.ID == "" || sg.Status != agentbridge.SuggestionPending || sg.Timestamp == "" || sg.Title != title {
			t.Errorf("stored suggestion = %+v", sg)
		}
		ids = append(ids, sg.ID)
	}
	list, err := ss.Suggestions(ctx, "")
	if err != nil || len(list) != 3 {
		t.Fatalf("Suggestions = %v %v", list, err)
	}
	for i, sg := range list {
		if sg.ID != ids[i] {
			t.Errorf("suggestion %d is %s, want %s: not in arrival order", i, sg.ID, ids[i])
		}
	}
	if list, err := ss.Suggestions(ctx, agentbridge.SuggestionPending); err != nil || len(list) != 3 {
		t.Errorf("pending: %v %v", list, err)
	}
	if list, err := ss.Suggestions(ctx, "done"); err != nil || len(list) != 0 {
		t.Errorf("done: %v %v", list, err)
	}
	if _, err := ss.Suggest(ctx, agentbridge.SuggestionInput{From: "codex"}); agentbridge.ErrorCode(err) == "" {
		t.Errorf("a suggestion without a title: %v, want a typed error", err)
	}
	if list, _ := ss.Suggestions(ctx, ""); len(list) != 3 {
		t.Errorf("a refused suggestion was stored: %d suggestions", len(list))
	}
}
