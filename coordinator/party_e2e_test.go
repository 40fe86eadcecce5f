package coordinator_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// partyPayload is what the tests read back from a payload the fake saved.
type partyPayload struct {
	ContextWindow []agentbridge.Event `json:"context_window"`
	SinceLastTurn []agentbridge.Event `json:"since_last_turn"`
	Party         *struct {
		Round    int      `json:"round"`
		Selected []string `json:"selected"`
	} `json:"party"`
}

func (s *stack) payload(trigger, participant string, round int) partyPayload {
	s.t.Helper()
	name := filepath.Join(s.fakeDir, trigger+"-"+participant+".json")
	if round > 0 {
		name = strings.TrimSuffix(name, ".json") + "-r" + string(rune('0'+round)) + ".json"
	}
	b, err := os.ReadFile(name)
	if err != nil {
		s.t.Fatalf("read payload: %v", err)
	}
	var p partyPayload
	if err := json.Unmarshal(b, &p); err != nil {
		s.t.Fatalf("decode payload: %v", err)
	}
	return p
}

// partyMetaOf returns meta.party of an event as {round, trigger}.
func partyMetaOf(t *testing.T, e agentbridge.Event) (int, string) {
	t.Helper()
	var pm struct {
		Round   int    `json:"round"`
		Trigger string `json:"trigger"`
	}
	raw, ok := e.Meta.Extra["party"]
	if !ok {
		return 0, ""
	}
	if err := json.Unmarshal(raw, &pm); err != nil {
		t.Fatalf("meta.party of %s: %v", e.ID, err)
	}
	return pm.Round, pm.Trigger
}

// waitPartyNotice waits for the notice that ends a party round.
func (s *stack) waitPartyNotice(thread, trigger string) agentbridge.Event {
	s.t.Helper()
	return s.waitTagged(thread, trigger, "party", "the party notice for "+trigger)
}

func partyThread(s *stack, name string, party map[string]any) string {
	th := s.thread(name)
	s.invite(th, "alice", agentbridge.Profile{Expertise: []string{"databases"}})
	s.invite(th, "bob", agentbridge.Profile{Roles: []string{"gopher"}, Expertise: []string{"go"}})
	s.invite(th, "carol", agentbridge.Profile{})
	s.control(th, "user", map[string]any{"party": party})
	return th
}

// TestPartyTwoRounds: the agents selected by their expertise answer on
// their own (the slow one's context still ends at the trigger, though the
// fast one answered before it started), then each reacts with every
// round-1 answer in context; replies carry meta.party, and one notice to
// the human closes the round.
func TestPartyTwoRounds(t *testing.T) {
	t.Parallel()
	// One at a time, so that bob's round-1 run starts after alice's answer
	// is in the thread.
	s := startStack(t, func(c *config.Config) { c.MaxConcurrency = 1 })
	th := partyThread(s, "party", map[string]any{"on": true})
	tr := s.say(th, "all", "how do we store go structs in databases? fake@bob/1:sleep=300ms")
	notice := s.waitPartyNotice(th, tr.ID)

	d := s.decision(tr.ID)
	if d.Rule != rules.RuleParty || d.Party == nil {
		t.Fatalf("decision = %+v, want rule party", d)
	}
	if got := participants(d.Invoke); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("invoked %q, want alice and bob", got)
	}
	if got := skipped(d.Skipped)["carol"]; got != rules.PartyOverMax {
		t.Errorf("carol skipped for %q, want %q", got, rules.PartyOverMax)
	}

	var round1, round2 []agentbridge.Event
	for _, e := range s.repliesTo(th, tr.ID) {
		if e.From == "user" || e.Meta.HasTag("party") {
			continue
		}
		round, trigger := partyMetaOf(t, e)
		if trigger != tr.ID {
			t.Errorf("reply %s has meta.party.trigger %q", e.ID, trigger)
		}
		switch round {
		case 1:
			round1 = append(round1, e)
		case 2:
			round2 = append(round2, e)
		default:
			t.Errorf("reply %s from %s has meta.party.round %d", e.ID, e.From, round)
		}
	}
	if len(round1) != 2 || len(round2) != 2 {
		t.Fatalf("round 1 has %d replies, round 2 %d; want 2 and 2", len(round1), len(round2))
	}
	for _, p := range []string{"alice", "bob"} {
		p1 := s.payload(tr.ID, p, 1)
		if p1.Party == nil || p1.Party.Round != 1 || !slices.Equal(p1.Party.Selected, []string{"alice", "bob"}) {
			t.Errorf("%s round-1 payload party = %+v", p, p1.Party)
		}
		if last := p1.ContextWindow[len(p1.ContextWindow)-1]; last.ID != tr.ID {
			t.Errorf("%s round-1 context ends at %s (%s), not the trigger", p, last.ID, last.From)
		}
		p2 := s.payload(tr.ID, p, 2)
		if p2.Party == nil || p2.Party.Round != 2 {
			t.Errorf("%s round-2 payload party = %+v", p, p2.Party)
		}
		var seen []string
		for _, e := range p2.ContextWindow {
			if e.Meta.ReplyTo == tr.ID {
				seen = append(seen, e.ID)
			}
		}
		if !slices.Contains(seen, round1[0].ID) || !slices.Contains(seen, round1[1].ID) {
			t.Errorf("%s round-2 context holds replies %q, want both round-1 answers", p, seen)
		}
		// A resumed session has its own round-1 answer already: it is
		// sent the trigger and the other agent's answer.
		if len(p2.SinceLastTurn) != 2 || p2.SinceLastTurn[0].ID != tr.ID || p2.SinceLastTurn[1].From == p || p2.SinceLastTurn[1].Meta.ReplyTo != tr.ID {
			t.Errorf("%s round-2 since_last_turn = %+v, want the trigger and the other round-1 answer", p, p2.SinceLastTurn)
		}
	}
	if notice.To != "user" || notice.From != s.cfg.CoordinatorID || !notice.Meta.HasTag("coordinator") {
		t.Errorf("notice = %+v", notice)
	}
	text := notice.Text()
	for _, want := range []string{"answered: alice, bob", "*exit"} {
		if !strings.Contains(text, want) {
			t.Errorf("notice %q does not say %q", text, want)
		}
	}
	for _, inv := range s.invocations(tr.ID) {
		if inv.Round != 1 && inv.Round != 2 {
			t.Errorf("invocation %d has round %d", inv.ID, inv.Round)
		}
	}
	if n := len(s.invocations(tr.ID)); n != 4 {
		t.Errorf("%d invocations, want 4", n)
	}
}

// TestPartyFailureSkipsRound2: a failing agent does not block the other,
// and with fewer than two answers there are no reactions; the notice says
// who failed.
func TestPartyFailureSkipsRound2(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := partyThread(s, "party-fail", map[string]any{"on": true, "max_agents": 2})
	tr := s.say(th, "all", "go and databases fake@bob:exit=3")
	notice := s.waitPartyNotice(th, tr.ID)
	s.waitStatus(tr.ID, "bob", ledger.StatusFailed)
	var errs int
	for _, e := range s.repliesTo(th, tr.ID) {
		if e.Meta.HasTag("error") {
			errs++
			if round, _ := partyMetaOf(t, e); round != 1 {
				t.Errorf("error message has meta.party.round %d", round)
			}
		}
	}
	if errs != 1 {
		t.Errorf("%d error messages, want 1", errs)
	}
	for _, inv := range s.invocations(tr.ID) {
		if inv.Round == 2 {
			t.Errorf("round 2 ran for %s with one answer", inv.Participant)
		}
	}
	text := notice.Text()
	for _, want := range []string{"answered: alice", "failed: bob (failed)", "fewer than two answered"} {
		if !strings.Contains(text, want) {
			t.Errorf("notice %q does not say %q", text, want)
		}
	}
}

// TestPartyNoCrossTalkAndExit: without cross-talk only round 1 runs; an
// exit word turns party mode off and starts no round.
func TestPartyNoCrossTalkAndExit(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := partyThread(s, "party-exit", map[string]any{"on": true, "agents": []string{"alice", "carol"}, "cross_talk": false})
	tr := s.say(th, "all", "what now?")
	notice := s.waitPartyNotice(th, tr.ID)
	if !strings.Contains(notice.Text(), "cross_talk is off") {
		t.Errorf("notice = %q", notice.Text())
	}
	if got := len(s.invocations(tr.ID)); got != 2 {
		t.Errorf("%d invocations, want 2 (alice and carol, round 1)", got)
	}
	bye := s.say(th, "all", "thanks, goodbye")
	if d := s.decision(bye.ID); d.Rule == rules.RuleParty || len(d.Invoke) != 0 {
		t.Errorf("exit message decision = %+v", d)
	}
	after := s.say(th, "all", "anyone?")
	if d := s.decision(after.ID); d.Rule != rules.RuleNone {
		t.Errorf("after exit, rule = %q, want none", d.Rule)
	}
	st, _, err := s.cl.State(t.Context(), th, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Party.On {
		t.Errorf("party still on after goodbye")
	}
}

// TestPartyPassAndQuestion: a [PASS] in round 2 posts nothing and is named
// in the notice; a [USER QUESTION] in round 1 goes to the person and ends
// the round without reactions.
func TestPartyPassAndQuestion(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := partyThread(s, "party-directives", map[string]any{"on": true})

	tr := s.say(th, "all", "go or databases? fake@bob/2:say=[PASS]")
	notice := s.waitPartyNotice(th, tr.ID)
	s.waitStatus(tr.ID, "bob", ledger.StatusPassed)
	var bobRound2 int
	for _, e := range s.repliesTo(th, tr.ID) {
		if round, _ := partyMetaOf(t, e); round == 2 && e.From == "bob" {
			bobRound2++
		}
	}
	if bobRound2 != 0 {
		t.Errorf("bob's [PASS] was posted")
	}
	if !strings.Contains(notice.Text(), "Reactions — answered: alice; passed: bob.") {
		t.Errorf("notice = %q", notice.Text())
	}

	tr = s.say(th, "all", "go or databases? fake@alice/1:say=[USER_QUESTION]:_which_one?")
	notice = s.waitPartyNotice(th, tr.ID)
	var question agentbridge.Event
	for _, e := range s.repliesTo(th, tr.ID) {
		if e.From == "alice" {
			question = e
		}
	}
	if question.To != "user" || !question.Meta.HasTag("question") {
		t.Errorf("alice's question = %+v, want it to the user, tagged question", question)
	}
	for _, inv := range s.invocations(tr.ID) {
		if inv.Round == 2 {
			t.Errorf("round 2 ran for %s after a question", inv.Participant)
		}
	}
	for _, want := range []string{"asked: alice", "alice asked you a question"} {
		if !strings.Contains(notice.Text(), want) {
			t.Errorf("notice %q does not say %q", notice.Text(), want)
		}
	}
}
