package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// question waits for the question with fields of trigger.
func (s *acpStack) question(trigger agentbridge.Event) (agentbridge.Event, agentbridge.QuestionMeta) {
	s.t.Helper()
	var req agentbridge.Event
	testutil.WaitFor(s.t, waitLong, "a question with fields", func() bool {
		for _, e := range s.repliesTo(s.thread, trigger.ID) {
			if agentbridge.IsFieldQuestion(e) {
				req = e
				return true
			}
		}
		return false
	})
	q, ok := agentbridge.QuestionOf(req)
	if !ok {
		s.t.Fatalf("meta.question of %q does not decode", req.Text())
	}
	return req, q
}

// agentReply waits for acpy's reply to trigger.
func (s *acpStack) agentReply(trigger agentbridge.Event) string {
	s.t.Helper()
	var reply string
	testutil.WaitFor(s.t, waitLong, "acpy's reply", func() bool {
		for _, e := range s.repliesTo(s.thread, trigger.ID) {
			if e.From == "acpy" {
				reply = e.Text()
				return true
			}
		}
		return false
	})
	return reply
}

// TestACPElicitationAnswered: the fake agent's form (a required string
// field and an enum field) becomes a question to the person who asked,
// tagged coordinator and question, with its fields in meta.question; an
// answer that does not fit is refused naming the field; the person's
// answer reaches the agent as exactly those values; a second answer is
// noted already_answered.
func TestACPElicitationAnswered(t *testing.T) {
	s := startACPStack(t, nil, nil)
	trig := s.ask("ELICIT the deploy")
	req, q := s.question(trig)
	if req.To != "user" || req.From != s.cfg.CoordinatorID || !req.Meta.HasTag("coordinator") || !req.Meta.HasTag("question") {
		t.Errorf("question from %s to %s tags %v", req.From, req.To, req.Meta.Tags)
	}
	inv := s.waitStatus(trig.ID, "acpy", ledger.StatusRunning)
	if q.Invocation != inv.ID || q.Message != "Which branch should I deploy, and how big?" || q.Title != "Deploy" || q.ExpiresAt == "" {
		t.Errorf("meta.question = %+v", q)
	}
	want := []agentbridge.QuestionField{
		{Name: "branch", Type: "string", Title: "Branch", Description: "the git branch", Required: true},
		{Name: "size", Type: "string", Title: "Size", Enum: []string{"s", "m", "l"}},
	}
	if got, _ := json.Marshal(q.Fields); string(got) != string(mustJSON(t, want)) {
		t.Errorf("fields = %s, want %s", got, mustJSON(t, want))
	}
	if !strings.Contains(req.Text(), "`branch` (text, required), `size` (one of s, m, l)") || !strings.Contains(req.Text(), "agent-bridge answer "+s.thread) {
		t.Errorf("question text = %q", req.Text())
	}
	_, err := s.cl.Append(context.Background(), s.thread, agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user",
		Content: json.RawMessage(`{"answer":{"event":"` + req.ID + `","fields":{"branch":"main","size":"xl"}}}`)}, "")
	var ae *agentbridge.Error
	if !errors.As(err, &ae) || ae.Code != agentbridge.ECodeInvalidControl || ae.Field != "content.answer.fields.size" {
		t.Errorf("a size out of the enum: %v, want invalid_control naming size", err)
	}
	s.control(s.thread, "user", map[string]any{"answer": map[string]any{"event": req.ID, "fields": map[string]any{"branch": "main", "size": "m"}}})
	if got := s.agentReply(trig); got != `elicitation: accept {"branch":"main","size":"m"}` {
		t.Errorf("reply = %q, want the agent to get exactly the values", got)
	}
	res, err := s.cl.AppendAnswer(context.Background(), s.thread, agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user",
		Content: json.RawMessage(`{"answer":{"event":"` + req.ID + `","action":"decline"}}`)}, "")
	if err != nil || res.Ignored == nil || res.Ignored.Code != agentbridge.IgnoredAlreadyAnswered || !strings.Contains(res.Ignored.Reason, "already answered by user at") {
		t.Errorf("a second answer: %+v, %v; want already_answered", res.Ignored, err)
	}
	s.waitStatus(trig.ID, "acpy", ledger.StatusSucceeded)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestACPElicitationDeclined: a person's decline reaches the agent as
// decline, and stays in the thread as the person's answer control.
func TestACPElicitationDeclined(t *testing.T) {
	s := startACPStack(t, nil, nil)
	trig := s.ask("ELICIT, to decline")
	req, _ := s.question(trig)
	decline := s.control(s.thread, "user", map[string]any{"answer": map[string]any{"event": req.ID, "action": "decline"}})
	if got := s.agentReply(trig); got != "elicitation: decline" {
		t.Errorf("reply = %q, want decline", got)
	}
	found := false
	for _, e := range s.events(s.thread) {
		if c := agentbridge.ControlOf(e); e.ID == decline.ID && c != nil && c.Answer != nil && c.Answer.Action == agentbridge.AnswerDecline && c.Answer.Event == req.ID {
			found = true
		}
	}
	if !found {
		t.Error("the decline is not in the thread")
	}
}

// TestACPElicitationTimeout: no answer within permission_timeout_s answers
// cancel, and says so in reply to the question, to the person it asked.
func TestACPElicitationTimeout(t *testing.T) {
	s := startACPStack(t, nil, func(cfg *config.Config) {
		cfg.PermissionTimeout = 500 * time.Millisecond
	})
	trig := s.ask("ELICIT and wait")
	req, _ := s.question(trig)
	if got := s.agentReply(trig); got != "elicitation: cancel" {
		t.Errorf("reply = %q, want cancel", got)
	}
	testutil.WaitFor(t, waitLong, "the timeout notice", func() bool {
		for _, e := range s.repliesTo(s.thread, req.ID) {
			if e.From == s.cfg.CoordinatorID && e.To == req.To && e.Meta.HasTag("coordinator") && !agentbridge.IsFieldQuestion(e) &&
				strings.HasPrefix(e.Text(), "No answer within 500ms: the question is withdrawn") {
				return true
			}
		}
		return false
	})
}
