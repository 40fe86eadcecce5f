package coordinator_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// runTokenOf reads BRIDGE_TOKEN from the environment the fake adapter
// saved for trigger (fake:env).
func (s *stack) runTokenOf(trigger, participant string) string {
	s.t.Helper()
	f, err := os.Open(filepath.Join(s.fakeDir, trigger+"-"+participant+".env"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "BRIDGE_TOKEN="); ok {
			return v
		}
	}
	s.t.Fatalf("no BRIDGE_TOKEN in %s's environment", participant)
	return ""
}

// Runs of several pairs at once, twice: every run holds an agent token of
// its own (never the coordinator's), bound to its pair; the second round's
// tokens were made ahead when the first round's runs ended; every run's
// token is revoked after it, and the ones made ahead at shutdown.
func TestRunsHoldTokensOfTheirOwn(t *testing.T) {
	t.Parallel()
	const person = "person-token-of-the-test"
	s := newTokenStack(t, person)
	s.cfg.MaxConcurrency = 8
	s.startCoordinator()
	agents := []string{"alice", "bob", "carol"}
	var threads []string
	for _, name := range []string{"one", "two"} {
		th := s.thread(name)
		for _, a := range agents {
			s.invite(th, a, agentbridge.Profile{})
		}
		threads = append(threads, th)
	}
	seen := map[string]string{} // token → its run
	for round := range 2 {
		var trigs []agentbridge.Event
		for _, th := range threads {
			for _, a := range agents {
				trigs = append(trigs, s.say(th, a, "fake:env"))
			}
		}
		for _, trig := range trigs {
			s.waitReplies(trig.Thread, trig.ID, 1)
			tok := s.runTokenOf(trig.ID, trig.To)
			if !strings.HasPrefix(tok, agentbridge.TokenPrefix) || tok == person {
				t.Fatalf("round %d: %s's run holds %q, want an agent token of its own", round+1, trig.To, tok)
			}
			if other, dup := seen[tok]; dup {
				t.Errorf("round %d: %s's run holds the token of %s", round+1, trig.To, other)
			}
			seen[tok] = trig.To + " in " + trig.Thread
		}
	}
	tokens := func() []agentbridge.Token {
		list, err := s.cl.Tokens(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	// One made ahead per pair, minted when the pair's run ends, which
	// may be just after its reply is seen; the twelve runs' own are
	// revoked (in the background: waited for at shutdown, below).
	testutil.WaitFor(t, waitLong, "the six agent tokens made ahead", func() bool {
		valid := 0
		for _, tok := range tokens() {
			if tok.Scope == agentbridge.ScopeAgent && tok.RevokedAt == "" {
				valid++
			}
		}
		return valid >= 6
	})
	s.stopCoordinator()
	made := 0
	for _, tok := range tokens() {
		if tok.Scope != agentbridge.ScopeAgent {
			continue
		}
		made++
		if tok.RevokedAt == "" {
			t.Errorf("agent token %s (%s, %s/%s) outlived the coordinator", tok.ID, tok.Name, tok.Thread, tok.Participant)
		}
		if tok.Name != "run-"+tok.Participant || (tok.Thread != threads[0] && tok.Thread != threads[1]) {
			t.Errorf("agent token %s is %s, bound to %s/%s", tok.ID, tok.Name, tok.Thread, tok.Participant)
		}
	}
	// Round one minted six, six were made ahead for round two, which
	// used them, and six more for a third: a round-two run that minted
	// its own would make more.
	if made != 18 {
		t.Errorf("%d agent tokens made for 12 runs of 6 pairs, want 18", made)
	}
}
