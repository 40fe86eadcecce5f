package coordinator_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestRulesEndToEnd drives every trigger rule through a real bridge and a
// real coordinator with the fake adapter: who answers, who is skipped and
// why (read back through the status API, as `why` does), and the notices.
func TestRulesEndToEnd(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) {
		c.EnableBroadcast = true
		c.BroadcastAgents = []string{"carol"}
	})
	type tc struct {
		name    string
		setup   func(th string)
		trigger func(th string) agentbridge.Event
		rule    string
		invoked []string
		skipped map[string]string
		clarify bool
	}
	cases := []tc{
		{
			name:    "to",
			setup:   func(th string) { s.invite(th, "alice", agentbridge.Profile{}) },
			trigger: func(th string) agentbridge.Event { return s.say(th, "alice", "hello") },
			rule:    rules.RuleTo, invoked: []string{"alice"},
		},
		{
			name: "mention",
			setup: func(th string) {
				s.invite(th, "alice", agentbridge.Profile{})
				s.invite(th, "bob", agentbridge.Profile{})
			},
			trigger: func(th string) agentbridge.Event { return s.say(th, "all", "@bob, what do you think?") },
			rule:    rules.RuleMention, invoked: []string{"bob"},
		},
		{
			name: "adapter by client",
			setup: func(th string) {
				s.invite(th, "opus", agentbridge.Profile{Client: "claude", Model: "opus"})
			},
			trigger: func(th string) agentbridge.Event { return s.say(th, "opus", "hi") },
			rule:    rules.RuleTo, invoked: []string{"opus"},
		},
		{
			name: "nickname ambiguity",
			setup: func(th string) {
				s.invite(th, "alice", agentbridge.Profile{Nickname: "sam"})
				s.invite(th, "bob", agentbridge.Profile{Nickname: "sam"})
			},
			trigger: func(th string) agentbridge.Event { return s.say(th, "all", "@sam are you there?") },
			rule:    rules.RuleMention,
			skipped: map[string]string{"alice": rules.ReasonAmbiguous, "bob": rules.ReasonAmbiguous},
			clarify: true,
		},
		{
			name:    "reserved mention",
			setup:   func(th string) { s.invite(th, "alice", agentbridge.Profile{}) },
			trigger: func(th string) agentbridge.Event { return s.say(th, "all", "@all hello") },
			rule:    rules.RuleMention, clarify: true,
		},
		{
			name: "invited_auto",
			setup: func(th string) {
				s.invite(th, "alice", agentbridge.Profile{})
				s.invite(th, "bob", agentbridge.Profile{})
				s.control(th, "user", map[string]any{"invited_auto": map[string]any{"on": true}})
			},
			trigger: func(th string) agentbridge.Event { return s.say(th, "all", "hi everyone") },
			rule:    rules.RuleInvitedAuto, invoked: []string{"alice", "bob"},
		},
		{
			name:    "broadcast",
			setup:   func(th string) { s.invite(th, "carol", agentbridge.Profile{}) },
			trigger: func(th string) agentbridge.Event { return s.say(th, "all", "news for all") },
			rule:    rules.RuleBroadcast, invoked: []string{"carol"},
		},
		{
			name:  "prod",
			setup: func(th string) { s.invite(th, "alice", agentbridge.Profile{}) },
			trigger: func(th string) agentbridge.Event {
				return s.control(th, "user", map[string]any{"prod": []string{"alice"}})
			},
			rule: rules.RuleProd, invoked: []string{"alice"},
		},
		{
			name: "mute",
			setup: func(th string) {
				s.invite(th, "alice", agentbridge.Profile{})
				s.control(th, "user", map[string]any{"mute": map[string]any{"targets": []string{"alice"}, "mode": "hard"}})
			},
			trigger: func(th string) agentbridge.Event { return s.say(th, "alice", "are you muted?") },
			rule:    rules.RuleTo, skipped: map[string]string{"alice": rules.ReasonMuted},
		},
		{
			name: "pause",
			setup: func(th string) {
				s.invite(th, "alice", agentbridge.Profile{})
				s.control(th, "user", map[string]any{"pause": map[string]any{"on": true}})
			},
			trigger: func(th string) agentbridge.Event { return s.say(th, "alice", "paused?") },
			rule:    rules.RuleSkip,
		},
		{
			name:    "not invited",
			setup:   func(th string) { s.invite(th, "alice", agentbridge.Profile{}) },
			trigger: func(th string) agentbridge.Event { return s.say(th, "bob", "hello bob") },
			rule:    rules.RuleTo, skipped: map[string]string{"bob": rules.ReasonNotInvited},
		},
		{
			name: "self-mention",
			setup: func(th string) {
				s.invite(th, "alice", agentbridge.Profile{})
				s.invite(th, "bob", agentbridge.Profile{})
				s.control(th, "user", map[string]any{"discussion": map[string]any{"on": true}})
			},
			trigger: func(th string) agentbridge.Event {
				return s.post(th, agentbridge.EventInput{From: "alice", Content: jsonString("@alice @bob have a look")})
			},
			rule: rules.RuleMention, invoked: []string{"bob"},
			skipped: map[string]string{"alice": rules.ReasonSelfMention},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := s.thread(c.name)
			c.setup(th)
			e := c.trigger(th)
			d := s.decision(e.ID)
			if d.Rule != c.rule {
				t.Errorf("rule = %q (reason %q), want %q", d.Rule, d.Reason, c.rule)
			}
			if got := participants(d.Invoke); !slices.Equal(got, c.invoked) {
				t.Errorf("invoked %v, want %v", got, c.invoked)
			}
			sk := skipped(d.Skipped)
			for p, reason := range c.skipped {
				if sk[p] != reason {
					t.Errorf("skip reason of %s = %q, want %q (all: %v)", p, sk[p], reason, sk)
				}
			}
			// The ledger queued exactly the invoked participants (decision
			// and invocations are committed together).
			var queued []string
			for _, inv := range s.invocations(e.ID) {
				queued = append(queued, inv.Participant)
			}
			slices.Sort(queued)
			if !slices.Equal(queued, c.invoked) {
				t.Errorf("ledger queued %v, want %v", queued, c.invoked)
			}
			want := len(c.invoked)
			if c.clarify {
				want++
			}
			if want == 0 {
				return
			}
			replies := s.waitReplies(th, e.ID, want)
			var from []string
			for _, r := range replies {
				if r.From == "bridge-coordinator" {
					if !c.clarify || !r.Meta.HasTag("clarification") || r.To != e.From {
						t.Errorf("unexpected coordinator message %+v", r)
					}
					continue
				}
				from = append(from, r.From)
				if want := r.From + " got: "; !strings.HasPrefix(r.Text(), want) {
					t.Errorf("reply %q does not start with %q", r.Text(), want)
				}
				if r.Meta.Hop == nil || *r.Meta.Hop != d.Hop+1 || r.Meta.Via != "bridge-coordinator" || !r.Meta.HasTag("coordinator") {
					t.Errorf("reply meta = %+v, want hop %d, via and tag coordinator", r.Meta, d.Hop+1)
				}
			}
			slices.Sort(from)
			if !slices.Equal(from, c.invoked) {
				t.Errorf("replies from %v, want %v", from, c.invoked)
			}
			for _, p := range c.invoked {
				s.waitStatus(e.ID, p, "succeeded")
			}
		})
	}
}

// TestStatusAPI checks the status server's answers and its errors.
func TestStatusAPI(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("status")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "hello")
	s.waitReplies(th, e.ID, 1)
	s.waitStatus(e.ID, "alice", "succeeded")
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(s.coord.StatusURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The counter is bumped once the invocation's work is all done,
	// just after its record is final.
	testutil.WaitFor(t, waitLong, "the invocation to be counted", func() bool {
		_, body := get("/metrics")
		return strings.Contains(body, `agent_bridge_coordinator_invocations_total{status="succeeded"} 1`) &&
			strings.Contains(body, "agent_bridge_coordinator_cursor_lag 0")
	})
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/healthz", 200, `"following":true`},
		{"/invocations?thread=" + th, 200, `"status":"succeeded"`},
		{"/invocations?status=sideways", 400, `"invalid_field"`},
		{"/invocations?limit=0", 400, `"limit"`},
		{"/decisions", 400, `"missing_field"`},
		{"/decisions?event=nope", 404, `"event_not_found"`},
		{"/nowhere", 404, `"not_found"`},
	} {
		code, body := get(tc.path)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s = %d %s; want %d containing %s", tc.path, code, body, tc.code, tc.want)
		}
	}
}
