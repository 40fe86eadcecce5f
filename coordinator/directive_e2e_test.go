package coordinator_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// TestPassPostsNothing: an adapter answering [PASS] posts nothing, its
// invocation is passed, and a restarted coordinator never runs it again.
func TestPassPostsNothing(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("pass")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "fake:say=[PASS]")
	s.waitStatus(e.ID, "alice", ledger.StatusPassed)
	// A later trigger answered means the pass has long been settled.
	later := s.say(th, "alice", "and now?")
	s.waitReplies(th, later.ID, 1)
	if got := s.repliesTo(th, e.ID); len(got) != 0 {
		t.Fatalf("a pass posted %+v", got)
	}
	s.stopCoordinator()
	s.startCoordinator()
	again := s.say(th, "alice", "still there?")
	s.waitReplies(th, again.ID, 1)
	if n := s.runCount(e.ID, "alice"); n != 1 {
		t.Errorf("the passed invocation ran %d times, want 1", n)
	}
	if got := s.repliesTo(th, e.ID); len(got) != 0 {
		t.Errorf("a pass posted after restart: %+v", got)
	}
}

// TestUserQuestionGoesToTheHuman: a [USER QUESTION]: reply is posted to the
// human who started the chain, tagged question; with no human in the chain
// it goes to the first human id.
func TestUserQuestionGoesToTheHuman(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) { c.HumanIDs = agentbridge.Humans{"user", "boss"} })
	th := s.thread("question")
	s.invite(th, "alice", agentbridge.Profile{})
	s.invite(th, "bob", agentbridge.Profile{})
	const ask = "fake:say=[USER_QUESTION]:_merge_now?"

	direct := s.post(th, agentbridge.EventInput{From: "boss", To: "alice", Content: jsonString(ask)})
	q := s.waitReplies(th, direct.ID, 1)[0]
	if q.From != "alice" || q.To != "boss" || !q.Meta.HasTag("question") || !q.Meta.HasTag("coordinator") {
		t.Errorf("question to boss's message: from %s to %s tags %v, want from alice to boss tagged coordinator, question", q.From, q.To, q.Meta.Tags)
	}
	if q.Text() != "[USER QUESTION]: merge now?" {
		t.Errorf("question content %q", q.Text())
	}

	// bob (an agent) asks alice in reply to boss's message: the chain
	// leads to boss.
	chained := s.post(th, agentbridge.EventInput{From: "bob", To: "alice", Content: jsonString(ask), Meta: agentbridge.Meta{ReplyTo: direct.ID}})
	if q := s.waitReplies(th, chained.ID, 1)[0]; q.To != "boss" {
		t.Errorf("question in boss's chain went to %q, want boss", q.To)
	}

	// No human in the chain: the first human id.
	orphan := s.post(th, agentbridge.EventInput{From: "bob", To: "alice", Content: jsonString(ask)})
	if q := s.waitReplies(th, orphan.ID, 1)[0]; q.To != "user" {
		t.Errorf("question without a human in its chain went to %q, want user", q.To)
	}
	inv := s.waitStatus(orphan.ID, "alice", ledger.StatusSucceeded)
	if inv.ReplyEventID == "" {
		t.Error("the question's invocation has no reply recorded")
	}
}

// TestPayloadRosterAndSince: the payload names everyone in the room with
// a mention handle and presence, and since_last_turn holds what came after
// the participant's previous reply, up to the trigger.
func TestPayloadRosterAndSince(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("roster")
	s.invite(th, "alice", agentbridge.Profile{Nickname: "al"})
	s.invite(th, "bob", agentbridge.Profile{})
	first := s.say(th, "alice", "one")
	s.waitReplies(th, first.ID, 1)
	pass := s.say(th, "bob", "fake:say=[PASS]")
	s.waitStatus(pass.ID, "bob", ledger.StatusPassed)
	second := s.say(th, "alice", "two")
	s.waitReplies(th, second.ID, 1)

	var p struct {
		Participants []struct {
			ID       string               `json:"id"`
			Profile  *agentbridge.Profile `json:"profile"`
			Presence string               `json:"presence"`
			Mention  string               `json:"mention"`
			Human    bool                 `json:"human"`
		} `json:"participants"`
		Session *struct {
			ID    string `json:"id"`
			Turns int    `json:"turns"`
		} `json:"session"`
		Since []agentbridge.Event `json:"since_last_turn"`
	}
	if err := json.Unmarshal(s.savedPayload(second.ID, "alice"), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Participants) != 3 {
		t.Fatalf("participants = %+v, want alice, bob and the human", p.Participants)
	}
	a, b, h := p.Participants[0], p.Participants[1], p.Participants[2]
	if a.ID != "alice" || a.Mention != "@alice" || a.Profile == nil || a.Profile.Nickname != "al" || !agentbridge.ValidPresenceState(a.Presence) {
		t.Errorf("alice's roster entry = %+v (profile %+v), want @alice, nickname al and a presence", a, a.Profile)
	}
	if b.ID != "bob" || b.Mention != "@bob" || !agentbridge.ValidPresenceState(b.Presence) {
		t.Errorf("bob's roster entry = %+v, want @bob and a presence", b)
	}
	if h.ID != "user" || !h.Human || h.Profile != nil || h.Mention != "" {
		t.Errorf("human roster entry = %+v, want {id: user, human: true}", h)
	}
	if p.Session == nil || p.Session.ID != "" || p.Session.Turns != 0 {
		t.Errorf("session = %+v, want an empty session", p.Session)
	}
	// After alice's reply to "one": bob's trigger, then the trigger "two".
	var texts []string
	for _, e := range p.Since {
		texts = append(texts, e.Text())
	}
	if len(texts) != 2 || texts[0] != "fake:say=[PASS]" || texts[1] != "two" {
		t.Errorf("since_last_turn = %q, want the two messages after alice's reply", texts)
	}
}

// savedPayload is the payload the fake adapter received for a pair.
func (s *stack) savedPayload(trigger, participant string) []byte {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.fakeDir, trigger+"-"+participant+".json"))
	if err != nil {
		s.t.Fatalf("read the payload the fake adapter saved: %v", err)
	}
	return b
}
