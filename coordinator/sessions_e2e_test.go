package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
)

// sessionStack runs alice and bob as adapters that keep CLI sessions.
func sessionStack(t *testing.T) *stack {
	return startStack(t, func(c *config.Config) {
		for _, id := range []string{"alice", "bob"} {
			a := c.Agents[id]
			a.Env = map[string]string{"FAKE_ADAPTER_SESSION": "keep"}
			c.Agents[id] = a
		}
	})
}

type sentPayload struct {
	Session struct {
		ID    string `json:"id"`
		Turns int    `json:"turns"`
	} `json:"session"`
	Since []agentbridge.Event `json:"since_last_turn"`
}

// turn posts text to participant, waits for the reply, and returns the
// payload the adapter got.
func (s *stack) turn(thread, participant, text string) (agentbridge.Event, sentPayload) {
	s.t.Helper()
	e := s.say(thread, participant, text)
	s.waitReplies(thread, e.ID, 1)
	var p sentPayload
	if err := json.Unmarshal(s.savedPayload(e.ID, participant), &p); err != nil {
		s.t.Fatal(err)
	}
	return e, p
}

// sessionsAPI lists the kept sessions through the status API, as
// "agent-bridge sessions" does.
func (s *stack) sessionsAPI(thread string) []ledger.Session {
	s.t.Helper()
	resp, err := http.Get(s.coord.StatusURL() + "/sessions?thread=" + thread)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body status.SessionsResponse
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		s.t.Fatal(err)
	}
	return body.Sessions
}

// TestSessionResumesAcrossRestart: the session an adapter reports comes
// back on the pair's next run with its turn count, also after the
// coordinator restarts; a refused session is replaced by the new id the
// adapter reports.
func TestSessionResumesAcrossRestart(t *testing.T) {
	t.Parallel()
	s := sessionStack(t)
	th := s.thread("sessions")
	s.invite(th, "alice", agentbridge.Profile{})
	first, p := s.turn(th, "alice", "hello")
	if p.Session.ID != "" || p.Session.Turns != 0 {
		t.Fatalf("first run got session %+v, want none", p.Session)
	}
	want := "s-alice-" + first.ID
	_, p = s.turn(th, "alice", "again")
	if p.Session.ID != want || p.Session.Turns != 1 {
		t.Fatalf("second run got session %+v, want %s after 1 turn", p.Session, want)
	}
	s.stopCoordinator()
	s.startCoordinator()
	_, p = s.turn(th, "alice", "after restart")
	if p.Session.ID != want || p.Session.Turns != 2 {
		t.Fatalf("after a restart: session %+v, want %s after 2 turns", p.Session, want)
	}
	// The CLI no longer knows the session: the adapter starts afresh and
	// reports a new id, which the next run resumes.
	refused, _ := s.turn(th, "alice", "fake:session=fresh")
	_, p = s.turn(th, "alice", "and now")
	if fresh := "s-alice-" + refused.ID; p.Session.ID != fresh || p.Session.Turns != 1 {
		t.Fatalf("after a refused session: %+v, want %s after 1 turn", p.Session, fresh)
	}
	list := s.sessionsAPI(th)
	if len(list) != 1 || list[0].Participant != "alice" || list[0].Client != "fake" || list[0].Turns != 2 {
		t.Fatalf("GET /sessions = %+v", list)
	}
}

// TestResetSession: reset_session from any participant forgets the
// participant's session; the next run starts a new one.
func TestResetSession(t *testing.T) {
	t.Parallel()
	s := sessionStack(t)
	th := s.thread("reset")
	s.invite(th, "alice", agentbridge.Profile{})
	s.invite(th, "bob", agentbridge.Profile{})
	s.turn(th, "alice", "one")
	s.turn(th, "bob", "one")
	_, p := s.turn(th, "alice", "two")
	if p.Session.ID == "" {
		t.Fatal("no session kept before the reset")
	}
	// Sent by bob, a participant: anyone may reset a session.
	s.control(th, "bob", map[string]any{"reset_session": map[string]any{"participant_id": "alice"}})
	after, p := s.turn(th, "alice", "three")
	if p.Session.ID != "" || p.Session.Turns != 0 {
		t.Fatalf("after reset_session alice got %+v, want a new session", p.Session)
	}
	_, p = s.turn(th, "alice", "four")
	if p.Session.ID != "s-alice-"+after.ID {
		t.Fatalf("after the reset the new session is not kept: %+v", p.Session)
	}
	_, p = s.turn(th, "bob", "two")
	if p.Session.ID == "" {
		t.Fatal("resetting alice forgot bob's session")
	}
}

// TestSameClientSeparateSessions: two participants of the same client in
// one thread each resume their own session.
func TestSameClientSeparateSessions(t *testing.T) {
	t.Parallel()
	s := sessionStack(t)
	th := s.thread("two")
	s.invite(th, "alice", agentbridge.Profile{Client: "claude"})
	s.invite(th, "bob", agentbridge.Profile{Client: "claude"})
	a1, _ := s.turn(th, "alice", "a")
	b1, _ := s.turn(th, "bob", "b")
	_, pa := s.turn(th, "alice", "a again")
	_, pb := s.turn(th, "bob", "b again")
	if pa.Session.ID != "s-alice-"+a1.ID || pb.Session.ID != "s-bob-"+b1.ID {
		t.Fatalf("alice resumed %q and bob %q, want their own sessions", pa.Session.ID, pb.Session.ID)
	}
	if list := s.sessionsAPI(th); len(list) != 2 {
		t.Fatalf("GET /sessions = %+v, want two", list)
	}
}

// TestResumedTurnGetsOnlyWhatIsNew: after 50 messages, the second turn of
// a resumed session is sent only the events since its last reply.
func TestResumedTurnGetsOnlyWhatIsNew(t *testing.T) {
	t.Parallel()
	s := sessionStack(t)
	th := s.thread("fifty")
	s.invite(th, "alice", agentbridge.Profile{})
	for i := range 50 {
		// To a human: stored, wakes nobody.
		s.say(th, "user", fmt.Sprintf("note %d", i))
	}
	_, p := s.turn(th, "alice", "first")
	if p.Session.ID != "" || len(p.Since) != 53 {
		// thread.created, the invite, 50 notes and the trigger.
		t.Fatalf("first turn: session %+v, %d events since the last turn, want none and 53", p.Session, len(p.Since))
	}
	between := s.say(th, "user", "meanwhile")
	trigger, p := s.turn(th, "alice", "second")
	if p.Session.ID == "" || p.Session.Turns != 1 {
		t.Fatalf("second turn not resumed: %+v", p.Session)
	}
	if len(p.Since) != 2 || p.Since[0].ID != between.ID || p.Since[1].ID != trigger.ID {
		var got []string
		for _, e := range p.Since {
			got = append(got, e.Text())
		}
		t.Fatalf("second turn got since_last_turn %q, want only \"meanwhile\" and the trigger", got)
	}
}
