package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// statusJSON does one request on the coordinator's status API and decodes
// the answer into out (when not nil), returning the HTTP status.
func (s *stack) statusJSON(method, path string, out any) int {
	s.t.Helper()
	req, err := http.NewRequest(method, s.coord.StatusURL()+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

// pairInvocation waits for the pair's ledger record to exist.
func (s *stack) pairInvocation(trigger, participant string) ledger.Invocation {
	s.t.Helper()
	var got ledger.Invocation
	testutil.WaitFor(s.t, waitLong, "the invocation of "+participant, func() bool {
		for _, inv := range s.invocations(trigger) {
			if inv.Participant == participant {
				got = inv
				return true
			}
		}
		return false
	})
	return got
}

// presenceStatus is the participant's presence details.status.
func (s *stack) presenceStatus(thread, participant string) string {
	ps, err := s.cl.Presence(context.Background(), thread)
	if err != nil {
		return ""
	}
	for _, p := range ps {
		if p.ID == participant && p.State == agentbridge.PresenceThinking {
			var d struct{ Status string }
			_ = json.Unmarshal(p.Details, &d)
			return d.Status
		}
	}
	return ""
}

// cancelNotices returns the coordinator's cancel notices replying to
// trigger.
func (s *stack) cancelNotices(thread, trigger string) []agentbridge.Event {
	var out []agentbridge.Event
	for _, e := range s.repliesTo(thread, trigger) {
		if slices.Contains(e.Meta.Tags, "cancelled") {
			out = append(out, e)
		}
	}
	return out
}

func TestProgressReachesLedgerPresenceAndStatusAPI(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("progress")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "fake:progress=3 fake:sleep=30s")
	inv := s.pairInvocation(e.ID, "alice")
	testutil.WaitFor(t, waitLong, "presence details.status to show the latest progress", func() bool {
		return s.presenceStatus(th, "alice") == "step 3"
	})
	var got status.InvocationResponse
	testutil.WaitFor(t, waitLong, "the progress records on the status API", func() bool {
		s.statusJSON("GET", "/invocations/"+strconv.FormatInt(inv.ID, 10), &got)
		return len(got.Progress) == 3
	})
	if got.InputTokens != 3 || got.OutputTokens != 6 || got.CostUSD != 0.003 || got.ProgressCount != 3 || got.Status != ledger.StatusRunning {
		t.Errorf("record %+v", got.Invocation)
	}
	if p := got.Progress[2]; p.Status != "step 3" || p.Kind != "tool" || string(p.Detail) != `{"i":3}` || p.TS == "" {
		t.Errorf("last progress %+v", p)
	}
	var newer status.InvocationResponse
	s.statusJSON("GET", fmt.Sprintf("/invocations/%d?after=%d", inv.ID, got.Progress[1].ID), &newer)
	if len(newer.Progress) != 1 || newer.Progress[0].Status != "step 3" {
		t.Errorf("after: %+v", newer.Progress)
	}
	var metrics string
	testutil.WaitFor(t, waitLong, "usage in /metrics", func() bool {
		resp, err := http.Get(s.coord.StatusURL() + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		metrics = string(b)
		return strings.Contains(metrics, `agent_bridge_coordinator_tokens_total{direction="output",participant="alice"} 6`)
	})
	if !strings.Contains(metrics, `agent_bridge_coordinator_cost_usd_total{participant="alice"} 0.003`) {
		t.Errorf("no cost counter in\n%s", metrics)
	}

	// Stopping it through the status API: cancelled, one notice, no reply.
	var cancelled ledger.Invocation
	if code := s.statusJSON("POST", fmt.Sprintf("/invocations/%d/cancel", inv.ID), &cancelled); code != http.StatusOK || cancelled.Status != ledger.StatusCancelled {
		t.Fatalf("cancel: %d %+v", code, cancelled)
	}
	s.waitStatus(e.ID, "alice", ledger.StatusCancelled)
	testutil.WaitFor(t, waitLong, "the cancel notice", func() bool { return len(s.cancelNotices(th, e.ID)) == 1 })
	var errBody struct{ Error agentbridge.Error }
	if code := s.statusJSON("POST", fmt.Sprintf("/invocations/%d/cancel", inv.ID), &errBody); code != http.StatusConflict || errBody.Error.Code != agentbridge.ECodeNotRunning {
		t.Errorf("second cancel: %d %+v", code, errBody)
	}
	if code := s.statusJSON("POST", "/invocations/99999/cancel", &errBody); code != http.StatusNotFound {
		t.Errorf("unknown cancel: %d", code)
	}
	if code := s.statusJSON("GET", "/invocations/99999", &errBody); code != http.StatusNotFound || errBody.Error.Code != agentbridge.ECodeNotFound {
		t.Errorf("unknown show: %d %+v", code, errBody)
	}
	s.waitPresence(th, "alice", agentbridge.PresenceListening)
	var final status.InvocationResponse
	s.statusJSON("GET", "/invocations/"+strconv.FormatInt(inv.ID, 10), &final)
	if final.ProgressBad != 2 || final.FinishedAt == "" {
		t.Errorf("final record %+v", final.Invocation)
	}
	for _, r := range s.repliesTo(th, e.ID) {
		if r.From == "alice" {
			t.Errorf("a cancelled run posted a reply: %s", r.Content)
		}
	}
}

// TestCancelControl: a human's cancel stops the participant's running run
// (with a grandchild that ignores SIGTERM) and drops its queued ones, with
// one notice; another participant's run goes on.
func TestCancelControl(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("cancel")
	s.invite(th, "alice", agentbridge.Profile{})
	s.invite(th, "bob", agentbridge.Profile{})
	run := s.say(th, "alice", "fake:ignoreterm fake:child")
	q1 := s.say(th, "alice", "queued one")
	q2 := s.say(th, "alice", "queued two")
	other := s.say(th, "bob", "fake:sleep=2s fake:say=bob_done")
	childFile := filepath.Join(s.fakeDir, run.ID+".child")
	testutil.WaitFor(t, waitLong, "alice's grandchild", func() bool {
		_, err := os.Stat(childFile)
		return err == nil
	})
	inv := s.waitStatus(run.ID, "alice", ledger.StatusRunning)
	b, _ := os.ReadFile(childFile)
	child, _ := strconv.Atoi(string(b))
	s.control(th, "user", map[string]any{"cancel": map[string]any{"participant_id": "alice"}})
	s.waitStatus(run.ID, "alice", ledger.StatusCancelled)
	testutil.WaitFor(t, waitLong, "alice's process group to be gone", func() bool {
		return !testutil.GroupAlive(inv.PGID) && !processAlive(child)
	})
	s.waitStatus(q1.ID, "alice", ledger.StatusCancelled)
	s.waitStatus(q2.ID, "alice", ledger.StatusCancelled)
	s.waitReplies(th, other.ID, 1)
	s.waitStatus(other.ID, "bob", ledger.StatusSucceeded)
	testutil.WaitFor(t, waitLong, "the cancel notice", func() bool { return len(s.cancelNotices(th, run.ID)) == 1 })
	n := s.cancelNotices(th, run.ID)[0]
	if n.To != agentbridge.ToAll || !strings.Contains(n.Text(), "alice") || !strings.Contains(n.Text(), "user") {
		t.Errorf("notice %+v", n)
	}
	// Nothing else arrives for alice: a later message to her is answered
	// (the cancel is not sticky), and the queued ones never ran.
	later := s.say(th, "alice", "fake:say=back")
	s.waitReplies(th, later.ID, 1)
	for _, tr := range []agentbridge.Event{run, q1, q2} {
		if r := s.repliesTo(th, tr.ID); len(r) != boolInt(tr.ID == run.ID) {
			t.Errorf("%d replies to %s", len(r), tr.ID)
		}
	}
	if s.runCount(q1.ID, "alice") != 0 || s.runCount(q2.ID, "alice") != 0 {
		t.Errorf("a dropped invocation ran")
	}
	// A cancel from an agent is ignored.
	busy := s.say(th, "alice", "fake:sleep=1s fake:say=finished")
	s.control(th, "bob", map[string]any{"cancel": map[string]any{"participant_id": "alice"}})
	s.waitStatus(busy.ID, "alice", ledger.StatusSucceeded)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// processAlive reports whether pid is a live process, a zombie counting as
// dead.
func processAlive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// TestCancelRacesExit: a cancel that arrives as the adapter exits (or
// starts) yields either the reply or the cancel, never both, and a notice
// only for a cancelled run.
func TestCancelRacesExit(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("race")
	s.invite(th, "alice", agentbridge.Profile{})
	const rounds = 20
	var triggers []agentbridge.Event
	for i := range rounds {
		// The cancel is sent once the adapter has started, and the
		// adapter sleeps 0 to 72 ms: it meets the run running, exiting
		// or done. Odd rounds use the control, even ones the status API.
		e := s.say(th, "alice", fmt.Sprintf("fake:sleep=%dms fake:say=r%d", (i%10)*8, i))
		testutil.WaitFor(t, waitLong, "the adapter to start", func() bool {
			_, err := os.Stat(filepath.Join(s.fakeDir, e.ID+"-alice.json"))
			return err == nil
		})
		if i%2 == 1 {
			s.control(th, "user", map[string]any{"cancel": map[string]any{"participant_id": "alice"}})
		} else {
			s.statusJSON("POST", fmt.Sprintf("/invocations/%d/cancel", s.invocations(e.ID)[0].ID), nil)
		}
		testutil.WaitFor(t, waitLong, "the race's outcome", func() bool {
			for _, x := range s.invocations(e.ID) {
				if x.Status == ledger.StatusSucceeded && x.ReplyEventID != "" ||
					x.Status == ledger.StatusCancelled && (x.FinishedAt != "" || x.StartedAt == "") {
					return true
				}
			}
			return false
		})
		triggers = append(triggers, e)
	}
	// Settle: a last message is answered after everything before it.
	last := s.say(th, "alice", "fake:say=end")
	s.waitReplies(th, last.ID, 1)
	var replied, cancelled int
	for i, e := range triggers {
		inv := s.invocations(e.ID)[0]
		var fromAlice int
		for _, r := range s.repliesTo(th, e.ID) {
			if r.From == "alice" {
				fromAlice++
			}
		}
		notices := len(s.cancelNotices(th, e.ID))
		switch inv.Status {
		case ledger.StatusSucceeded:
			replied++
			if fromAlice != 1 || notices != 0 {
				t.Errorf("round %d succeeded with %d replies and %d notices", i, fromAlice, notices)
			}
		case ledger.StatusCancelled:
			cancelled++
			if fromAlice != 0 || notices > 1 {
				t.Errorf("round %d was cancelled with %d replies and %d notices", i, fromAlice, notices)
			}
		default:
			t.Errorf("round %d ended %s", i, inv.Status)
		}
	}
	t.Logf("%d replied, %d cancelled", replied, cancelled)
}
