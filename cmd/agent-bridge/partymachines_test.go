package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// partyCount is what a party trigger got: replies and error notices per
// "agent/round", the party notices, and the events each coordinator sent.
type partyCount struct {
	tally   map[string]int
	notices []agentbridge.Event
	from    map[string]int
}

func countParty(t *testing.T, cl *client.Client, thread, trigger string) partyCount {
	t.Helper()
	evs, err := cl.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := partyCount{tally: map[string]int{}, from: map[string]int{}}
	for _, ev := range evs {
		if ev.Meta.ReplyTo != trigger {
			continue
		}
		c.from[ev.From]++
		if ev.Meta.HasTag("party") {
			c.notices = append(c.notices, ev)
			continue
		}
		var pm struct{ Round int }
		_ = json.Unmarshal(ev.Meta.Extra["party"], &pm)
		who := ev.From
		if ev.Meta.HasTag("error") {
			_ = json.Unmarshal(ev.Meta.Extra["participant"], &who)
		}
		c.tally[fmt.Sprintf("%s/%d", who, pm.Round)]++
	}
	return c
}

// TestPartyTwoMachines runs a party across two coordinators, each a
// separate process with its own HOME, state file, status port and token,
// laptop serving alice and server serving bob (contract 7.1): a round gets
// one reply per agent per round, round 2 included, and one notice naming
// both; no skipped receipt is written for either agent. In a thread whose
// party has only alice, the server's coordinator posts nothing, and the
// notice says alice answered. A scene between alice and bob has its turns
// run by each actor's coordinator and closes once. It runs with the
// bridge on a SQLite file and on PostgreSQL.
func TestPartyTwoMachines(t *testing.T) {
	onBothBridges(t, testPartyTwoMachines)
}

func testPartyTwoMachines(t *testing.T, s *stack.Stack) {
	cl := s.Person
	ctx := context.Background()
	ms := s.Machines(nil, "laptop=alice", "server=bob")
	laptop, server := ms[0], ms[1]

	partyThread := func(name string, agents ...string) string {
		th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		var controls []string
		for _, a := range agents {
			controls = append(controls, fmt.Sprintf(`{"invite":{"participant_id":%q,"profile":{"client":"fake-%s","model":"m"}}}`, a, a))
		}
		for _, c := range append(controls, `{"party":{"on":true}}`) {
			if _, err := cl.Append(ctx, th.ID, agentbridge.EventInput{Type: "control", From: "user", Content: json.RawMessage(c)}, ""); err != nil {
				t.Fatal(err)
			}
		}
		return th.ID
	}
	say := func(thread, text string) agentbridge.Event {
		b, _ := json.Marshal(text)
		ev, err := cl.Append(ctx, thread, agentbridge.EventInput{From: "user", To: "all", Content: b}, "")
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	waitNotice := func(thread, trigger string) partyCount {
		t.Helper()
		var c partyCount
		testutil.WaitFor(t, 60*time.Second, "the party notice of "+trigger, func() bool {
			c = countParty(t, cl, thread, trigger)
			return len(c.notices) > 0
		})
		return c
	}

	both := partyThread("party on two machines", "alice", "bob")
	receipts := stack.FollowReceipts(t, cl, both, 0)
	first := say(both, "what do you both think?")
	waitNotice(both, first.ID)
	// A second round closes after the first on both coordinators, which
	// read the same thread: by its notice, any second notice of the
	// first would be in.
	second := say(both, "and now?")
	waitNotice(both, second.ID)
	for _, trig := range []agentbridge.Event{first, second} {
		c := countParty(t, cl, both, trig.ID)
		want := map[string]int{"alice/1": 1, "bob/1": 1, "alice/2": 1, "bob/2": 1}
		if fmt.Sprint(c.tally) != fmt.Sprint(want) {
			t.Errorf("%q: replies per agent/round = %v, want %v", trig.Text(), c.tally, want)
		}
		if len(c.notices) != 1 || !strings.Contains(c.notices[0].Text(), "First takes — answered: alice, bob.") ||
			!strings.Contains(c.notices[0].Text(), "Reactions — answered: alice, bob.") {
			t.Errorf("%q: notices %+v, want one naming both agents in both rounds", trig.Text(), c.notices)
		}
		// The notice went through one notice claim, done by its poster.
		claims, err := cl.Claims(ctx, both)
		if err != nil {
			t.Fatal(err)
		}
		var notice []agentbridge.Claim
		for _, k := range claims {
			if k.Event == trig.ID && k.Notice != "" {
				notice = append(notice, k)
			}
		}
		if len(notice) != 1 || notice[0].Notice != "party:done" || len(c.notices) != 1 || notice[0].Coordinator != c.notices[0].From {
			t.Errorf("%q: notice claims %+v, want one party:done held by the notice's poster", trig.Text(), notice)
		}
		for _, p := range []string{"alice", "bob"} {
			for _, r := range receipts.Of(trig.ID, p) {
				if r.State == agentbridge.ReceiptSkipped {
					t.Errorf("%q: a skipped receipt for %s: %+v", trig.Text(), p, r)
				}
			}
		}
	}

	// Only alice in the party: the laptop runs the round and posts its
	// notice; the server, serving nobody of it, posts nothing.
	solo := partyThread("alice's party", "alice")
	trig := say(solo, "just you")
	c := waitNotice(solo, trig.ID)
	if len(c.notices) != 1 || c.notices[0].From != "laptop" || !strings.Contains(c.notices[0].Text(), "First takes — answered: alice.") {
		t.Errorf("solo party: notices %+v, want one from laptop saying alice answered", c.notices)
	}
	if c.from["server"] != 0 || fmt.Sprint(c.tally) != fmt.Sprint(map[string]int{"alice/1": 1}) {
		t.Errorf("solo party: events by sender %v, replies %v; want none from server and one from alice", c.from, c.tally)
	}

	// A scene with alice and bob: each turn is run by the coordinator
	// serving its actor, turns alternate, one scene.closed, one journal
	// per actor.
	scene := partyThread("scene on two machines", "alice", "bob")
	sceneReceipts := stack.FollowReceipts(t, cl, scene, 0)
	start, _ := json.Marshal(map[string]any{"scene": map[string]any{"on": true, "actors": []string{"alice", "bob"},
		"setting": "A small kitchen.", "briefs": map[string]string{"alice": "fake:close=3", "bob": "listen"}}})
	if _, err := cl.Append(ctx, scene, agentbridge.EventInput{Type: "control", From: "user", Content: json.RawMessage(`{"party":{"on":false}}`)}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Append(ctx, scene, agentbridge.EventInput{Type: "control", From: "user", Content: start}, ""); err != nil {
		t.Fatal(err)
	}
	var evs []agentbridge.Event
	testutil.WaitFor(t, 60*time.Second, "the scene to close with both journals", func() bool {
		var err error
		evs, err = cl.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: scene, After: -1})
		journals := 0
		for _, e := range evs {
			if e.Type == agentbridge.TypeJournal {
				journals++
			}
		}
		return err == nil && journals == 2
	})
	var speeches []string
	closed, journals := 0, map[string]int{}
	for _, e := range evs {
		if m, ok := agentbridge.SceneMetaOf(e); ok && m.Turn > 0 && e.Type == agentbridge.TypeMessage {
			speeches = append(speeches, fmt.Sprintf("%s>%s#%d", e.From, e.To, m.Turn))
		}
		switch e.Type {
		case agentbridge.TypeSceneClosed:
			closed++
		case agentbridge.TypeJournal:
			journals[e.From]++
		}
	}
	if fmt.Sprint(speeches) != "[alice>bob#1 bob>alice#2 alice>bob#3 bob>alice#4]" || closed != 1 || journals["alice"] != 1 || journals["bob"] != 1 {
		t.Errorf("scene: speeches %v, %d scene.closed, journals %v; want four alternating turns, one close, one journal each", speeches, closed, journals)
	}
	for _, r := range sceneReceipts.All() {
		if r.State == agentbridge.ReceiptSkipped && r.Reason != "in a scene" {
			t.Errorf("scene: a skipped receipt: %+v", r)
		}
	}

	laptop.Proc.Terminate(t)
	server.Proc.Terminate(t)
}
