package coordinator_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestACPErrorAnswerRetiresTheAgent (contract 8.5): a prompt answered
// with a JSON-RPC error naming a 429 fails the turn as quota, and the
// agent that answered it is closed: the next trigger runs on a new
// process, so the fake's leftover end (claude-agent-acp 0.23 answers the
// prompt after a failed one at once, with nothing) never reaches a
// turn. An end_turn with no update and no tokens is an error notice, not
// an empty reply.
func TestACPErrorAnswerRetiresTheAgent(t *testing.T) {
	s := startACPStack(t, nil, nil)
	pid1, _, _, _, _ := parseReply(t, s.reply(s.ask("hello")))
	trig := s.ask("RPCERROR please")
	if r := s.reply(trig); r.From != s.cfg.CoordinatorID || !strings.Contains(r.Text(), "rate_limit_error") {
		t.Errorf("the failed turn's notice = %q from %s", r.Text(), r.From)
	}
	inv := s.waitStatus(trig.ID, "acpy", ledger.StatusFailed)
	if inv.Failure == nil || inv.Failure.Class != agentbridge.FailureQuota {
		t.Errorf("failure %+v, want quota", inv.Failure)
	}
	pid2, _, _, _, text := parseReply(t, s.reply(s.ask("after the error")))
	if pid2 == pid1 || text != "user -> acpy: after the error" {
		t.Errorf("after the error: pid %d (before %d) answered %q; want a new process answering the prompt", pid2, pid1, text)
	}
	testutil.WaitFor(t, waitLong, "the first agent to be closed", func() bool { return !alive(pid1) })

	trig = s.ask("NOTHING to say")
	if r := s.reply(trig); r.From != s.cfg.CoordinatorID || !strings.Contains(r.Text(), "without an answer") {
		t.Errorf("an empty end_turn's post = %q from %s, want the coordinator's error notice", r.Text(), r.From)
	}
	inv = s.waitStatus(trig.ID, "acpy", ledger.StatusFailed)
	if inv.Failure == nil || inv.Failure.Class != agentbridge.FailureCrash {
		t.Errorf("an empty end_turn: failure %+v, want crash", inv.Failure)
	}
}

// TestACPLimitFromStderr (contract 8.5): an agent that logs a usage limit
// on its stderr (OpenCode's line) while it waits to retry has its turn
// ended at once as quota, due when the line says; without a fallback the
// trigger waits for then and is answered once, by the agent's next run.
func TestACPLimitFromStderr(t *testing.T) {
	s := startACPStack(t, nil, nil)
	trig := s.ask("LIMITLOG please")
	// The fake waits for a cancel: only the stderr line ends its turn.
	testutil.WaitFor(t, waitLong, "the run to wait for the limit", func() bool {
		for _, inv := range s.invocations(trig.ID) {
			if inv.Status == ledger.StatusWaiting {
				return true
			}
		}
		return false
	})
	inv := s.waitStatus(trig.ID, "acpy", ledger.StatusSucceeded)
	var answers []agentbridge.Event
	for _, e := range s.repliesTo(s.thread, trig.ID) {
		if e.From == "acpy" {
			answers = append(answers, e)
		}
	}
	if len(answers) != 1 || !strings.Contains(answers[0].Text(), "LIMITLOG please") {
		t.Fatalf("answers %+v, want the agent's one reply", answers)
	}
	if inv.ReplyEventID != answers[0].ID {
		t.Errorf("the invocation's reply %s, want %s", inv.ReplyEventID, answers[0].ID)
	}
	if n := s.count("session/prompt"); n != 2 {
		t.Errorf("%d prompts, want the limited one and the one after the wait", n)
	}
	resp, err := http.Get(s.coord.StatusURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `agent_bridge_coordinator_failures_total{class="quota",participant="acpy"} 1`) {
		t.Errorf("/metrics does not count the quota failure")
	}
}
