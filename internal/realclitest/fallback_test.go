package realclitest

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// When an agent cannot answer (contract 8.5), with the real CLIs: claude
// meets a usage limit from its model server (the Anthropic API's 429 with
// retry-after), and the trigger goes to codex, or waits for the limit.

// clockRe matches the "15:04" of a receipt's reason.
const clockRe = `\d\d:\d\d`

// threadWith creates a thread with only the given agents invited.
func (s *stack) threadWith(name string, agents ...*agent) string {
	s.t.Helper()
	th, err := s.cl.CreateThread(s.t.Context(), agentbridge.CreateThreadRequest{Name: name})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, a := range agents {
		ctl, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": a.id,
			"profile": map[string]any{"client": a.cli, "model": a.model}}})
		if _, err := s.cl.Append(s.t.Context(), th.ID, agentbridge.EventInput{Type: "control", From: "user", Content: ctl}, ""); err != nil {
			s.t.Fatal(err)
		}
	}
	return th.ID
}

// receipt is the pair's receipt, zero when there is none.
func (s *stack) receipt(thread, event, participant string) agentbridge.Receipt {
	s.t.Helper()
	list, err := s.cl.Receipts(s.t.Context(), agentbridge.ReceiptsQuery{Thread: thread, Event: event})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, r := range list {
		if r.Participant == participant {
			return r
		}
	}
	return agentbridge.Receipt{}
}

// replyFrom waits for the message from participant replying to trigger.
func (s *stack) replyFrom(thread string, trigger agentbridge.Event, participant string, timeout time.Duration) agentbridge.Event {
	s.t.Helper()
	var got agentbridge.Event
	testutil.WaitFor(s.t, timeout, participant+"'s reply to "+string(trigger.Content), func() bool {
		for _, e := range s.answers(thread, trigger.ID) {
			if e.From == participant {
				got = e
				return true
			}
		}
		return false
	})
	return got
}

// firstLimited is the time the fake first answered a usage limit.
func firstLimited(f *fakemodel.Server) time.Time {
	for _, r := range f.Requests() {
		if r.Status == 429 {
			return r.Time
		}
	}
	return time.Time{}
}

// handoverCheck asserts what a hand-over from agent from to agent to
// leaves: one notice and one reply from to ("<to> answers"), from's
// receipt naming the hand-over, one run of to, read from the status API of
// toStack (the coordinator serving it); it logs the time from from's first
// 429 to to's start.
func handoverCheck(t *testing.T, s, toStack *stack, from, to *agent, thread string, trig agentbridge.Event) {
	t.Helper()
	reply := s.replyFrom(thread, trig, to.id, 2*time.Minute)
	if text(reply) != to.id+" answers" {
		t.Errorf("%s replied %q", to.id, text(reply))
	}
	answers := s.answers(thread, trig.ID)
	var notices, replies int
	for _, e := range answers {
		switch {
		case hasTag(e, "handoff"):
			notices++
			if !strings.Contains(text(e), from.id+" could not answer (quota") || !strings.Contains(text(e), to.id+" answers instead") {
				t.Errorf("hand-over notice %q", text(e))
			}
		case e.From == to.id:
			replies++
		default:
			t.Errorf("unexpected answer %s from %s: %q (tags %v)", e.ID, e.From, text(e), e.Meta.Tags)
		}
	}
	if notices != 1 || replies != 1 {
		t.Errorf("%d hand-over notices and %d replies, want one of each", notices, replies)
	}
	var rc agentbridge.Receipt
	testutil.WaitFor(t, 10*time.Second, from.id+"'s receipt to name the hand-over", func() bool {
		rc = s.receipt(thread, trig.ID, from.id)
		return rc.State == agentbridge.ReceiptFailed && rc.Reason != ""
	})
	if !regexp.MustCompile(`^handed to ` + to.id + `: quota until ` + clockRe + `$`).MatchString(rc.Reason) {
		t.Errorf("%s's receipt: %s %q, want failed \"handed to %s: quota until HH:MM\"", from.id, rc.State, rc.Reason, to.id)
	}
	if n := len(toStack.invocations(thread, to.id)); n != 1 {
		t.Errorf("%d %s runs, want 1", n, to.id)
	}
	started, _ := agentbridge.ParseTime(toStack.finished(thread, to.id, 1).StartedAt)
	t.Logf("%s: first usage-limit answer to %s's start: %v", from.id, to.id, started.Sub(firstLimited(from.fake)).Round(time.Millisecond))
}

// TestRealClaudeHandsOverToCodex: the real claude hits a usage limit; with
// "fallback": ["codex"] the real codex, served by the same coordinator and
// not yet invited, answers the same trigger once.
func TestRealClaudeHandsOverToCodex(t *testing.T) {
	t.Parallel()
	need(t)
	claude, codex := newAgent(t, "claude", "claude"), newAgent(t, "codex", "codex")
	claude.fallback = []string{"codex"}
	codex.profile = map[string]any{"client": "codex", "model": codex.model}
	codex.fake.SetDefault(fakemodel.Reply{Text: "codex answers"})
	s := newStack(t, claude, codex)
	thread := s.threadWith("handover", claude)
	trig := s.ask(thread, claude, "hello "+fakemodel.LimitMarker(fakemodel.Anthropic, 30*time.Second))
	handoverCheck(t, s, s, claude, codex, thread, trig)
	inv := s.finished(thread, "claude", 1)
	if inv.Failure == nil || inv.Failure.Class != agentbridge.FailureQuota || inv.Failure.RetryAt == "" || inv.HandedTo != "codex" {
		t.Errorf("claude's invocation: failure %+v, handed to %q", inv.Failure, inv.HandedTo)
	}
	if got := s.metric("agent_bridge_coordinator_failures_total", `participant="claude"`, `class="quota"`); got != 1 {
		t.Errorf("failures_total{claude,quota} = %v, want 1", got)
	}
}

// TestRealCodexHandsOverToClaude: the real codex hits a ChatGPT plan's
// usage limit (it fails at once, naming the reset); with "fallback":
// ["claude"] the real claude answers the same trigger once.
func TestRealCodexHandsOverToClaude(t *testing.T) {
	t.Parallel()
	need(t)
	claude, codex := newAgent(t, "claude", "claude"), newAgent(t, "codex", "codex")
	codex.fallback = []string{"claude"}
	claude.profile = map[string]any{"client": "claude", "model": claude.model}
	claude.fake.SetDefault(fakemodel.Reply{Text: "claude answers"})
	s := newStack(t, claude, codex)
	thread := s.threadWith("handover from codex", codex)
	trig := s.ask(thread, codex, "hello "+fakemodel.LimitMarker(fakemodel.OpenAI, 10*time.Minute))
	handoverCheck(t, s, s, codex, claude, thread, trig)
	if inv := s.finished(thread, "codex", 1); inv.Failure == nil || inv.Failure.Class != agentbridge.FailureQuota || inv.Failure.RetryAt == "" || inv.HandedTo != "claude" {
		t.Errorf("codex's invocation: failure %+v, handed to %q", inv.Failure, inv.HandedTo)
	}
}

// TestRealClaudeWaitsForItsLimit: without a fallback, the real claude's
// trigger waits for its usage limit (the receipt says until when) and is
// answered by claude once the limit resets, once.
func TestRealClaudeWaitsForItsLimit(t *testing.T) {
	t.Parallel()
	need(t)
	claude := newAgent(t, "claude", "claude")
	claude.fake.SetDefault(fakemodel.Reply{Text: "claude answers"})
	s := newStack(t, claude)
	thread := s.threadWith("waits", claude)
	trig := s.ask(thread, claude, "hello "+fakemodel.LimitMarker(fakemodel.Anthropic, 6*time.Second))
	var rc agentbridge.Receipt
	testutil.WaitFor(t, time.Minute, "the receipt to say claude waits for its limit", func() bool {
		rc = s.receipt(thread, trig.ID, "claude")
		return strings.HasPrefix(rc.Reason, "waiting for")
	})
	if rc.State != agentbridge.ReceiptQueued || !regexp.MustCompile(`^waiting for claude's limit, until `+clockRe+`$`).MatchString(rc.Reason) {
		t.Errorf("receipt while waiting: %s %q", rc.State, rc.Reason)
	}
	reply := s.replyFrom(thread, trig, "claude", 2*time.Minute)
	if text(reply) != "claude answers" {
		t.Errorf("claude replied %q", text(reply))
	}
	if n := len(s.answers(thread, trig.ID)); n != 1 {
		t.Errorf("%d answers, want claude's one reply", n)
	}
	limitedAt := firstLimited(claude.fake)
	for _, r := range claude.fake.Requests() {
		if r.Status == 200 && r.Time.Before(limitedAt.Add(5*time.Second)) {
			t.Errorf("claude was served at %v, before its limit reset", r.Time.Sub(limitedAt))
		}
	}
	testutil.WaitFor(t, 10*time.Second, "the receipt to say claude replied", func() bool {
		rc = s.receipt(thread, trig.ID, "claude")
		return rc.State == agentbridge.ReceiptSucceeded
	})
	invs := s.invocations(thread, "claude")
	if len(invs) != 1 || invs[0].Status != "succeeded" {
		t.Errorf("claude's invocations: %+v", invs)
	}
}

// TestRealHandOverAcrossCoordinators: claude is served by one coordinator
// and codex by another (separate processes, state and HOME): claude's
// usage limit hands the trigger to codex, which the other coordinator
// claims and runs once.
func TestRealHandOverAcrossCoordinators(t *testing.T) {
	t.Parallel()
	need(t)
	claude, codex := newAgent(t, "claude", "claude"), newAgent(t, "codex", "codex")
	claude.fallback = []string{"codex"}
	codex.fake.SetDefault(fakemodel.Reply{Text: "codex answers"})
	s := newStackWith(t, true, claude)
	server := s.otherCoordinator("server", codex.home, map[string]any{"codex": codex.entry(t)})
	testutil.WaitFor(t, 30*time.Second, "the second coordinator to serve codex", func() bool {
		list, err := s.cl.Coordinators(t.Context())
		return err == nil && len(list.Agents["codex"]) == 1 && len(list.Agents["claude"]) == 1
	})
	thread := s.threadWith("across", claude)
	trig := s.ask(thread, claude, "hello "+fakemodel.LimitMarker(fakemodel.Anthropic, 30*time.Second))
	handoverCheck(t, s, server, claude, codex, thread, trig)
	if n := len(codex.fake.Calls()); n == 0 {
		t.Error("codex's model was never called")
	}
}
