package coordinator

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// TestBuildPayload checks the payload rules on facts alone: no bridge,
// ledger or process is involved.
func TestBuildPayload(t *testing.T) {
	msg := func(seq int64, from, text string) agentbridge.Event {
		return agentbridge.Event{ID: "E" + string(rune('0'+seq)), Thread: "T", Seq: seq, Type: agentbridge.TypeMessage,
			From: from, To: agentbridge.ToAll, Content: mustJSON(text)}
	}
	events := []agentbridge.Event{msg(1, "bob", "hi"), msg(2, "alice", "hello"), msg(3, "carol", "yo"), msg(4, "bob", "@alice?")}
	trigger := events[3]
	inv := ledger.Invocation{ID: 7, Thread: "T", TriggerID: trigger.ID, TriggerSeq: 4, Participant: "alice", Agent: "a"}
	base := func() (invokeFacts, *config.Config) {
		f := invokeFacts{inv: inv, trigger: trigger, events: events, threadName: "Plans", primer: "be kind",
			profile: agentbridge.Profile{Client: "claude"}, session: adapters.SessionInfo{ID: "S", Turns: 2}, exe: "/bin/ab"}
		cfg := &config.Config{BridgeURL: "http://127.0.0.1:1", ContextWindowSize: 2, HumanIDs: []string{"bob"},
			Agents: map[string]config.Agent{"a": {Command: []string{config.SelfCommand, "adapter", "echo"}, Cwd: "/tmp",
				Env: map[string]string{"Z": "1", "A": "2"}}}}
		return f, cfg
	}
	ids := func(evs []agentbridge.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.ID)
		}
		return out
	}
	cases := []struct {
		name  string
		setup func(f *invokeFacts, cfg *config.Config)
		check func(t *testing.T, p prepared)
	}{
		{"window, since_last_turn, session, primer", nil, func(t *testing.T, p prepared) {
			if got := ids(p.p.ContextWindow); !slices.Equal(got, []string{"E3", "E4"}) {
				t.Errorf("context window %v, want the last 2", got)
			}
			if got := ids(p.p.SinceLastTurn); !slices.Equal(got, []string{"E3", "E4"}) {
				t.Errorf("since_last_turn %v, want after alice's message", got)
			}
			if p.p.Session.ID != "S" || p.p.Primer != "be kind" || p.p.Thread.Name != "Plans" || p.trigger.ID != "E4" {
				t.Errorf("payload %+v", p.p)
			}
		}},
		{"command and environment", nil, func(t *testing.T, p prepared) {
			if !slices.Equal(p.spec.Command, []string{"/bin/ab", "adapter", "echo"}) || p.spec.Dir != "/tmp" {
				t.Errorf("spec %+v", p.spec)
			}
			if len(p.spec.Env) < 3 || p.spec.Env[0] != "A=2" || p.spec.Env[1] != "Z=1" || p.spec.Env[len(p.spec.Env)-1] != adapters.EnvAgentBridgeBin+"=/bin/ab" {
				t.Errorf("env %v: want the agent's keys in order, then the bridge's, then this binary", p.spec.Env)
			}
			var decoded adapters.Payload
			if err := json.Unmarshal(p.payload, &decoded); err != nil || decoded.EventID != "E4" {
				t.Errorf("body %s: %v", p.payload, err)
			}
		}},
		{"an agent gone from the config", func(f *invokeFacts, cfg *config.Config) { delete(cfg.Agents, "a") }, func(t *testing.T, p prepared) {
			if p.startErr == nil || !strings.Contains(p.startErr.Error(), `"a" is no longer`) {
				t.Errorf("startErr %v", p.startErr)
			}
		}},
		{"an ACP turn renders its own prompt", func(f *invokeFacts, cfg *config.Config) {
			cfg.Agents["a"] = config.Agent{ACP: []string{"agent"}}
		}, func(t *testing.T, p prepared) {
			if p.payload != nil || p.p.EventID != "E4" {
				t.Errorf("body %s, payload %+v: want no body and the payload kept", p.payload, p.p)
			}
		}},
		{"party round 2", func(f *invokeFacts, cfg *config.Config) {
			f.inv.Round = 2
			f.party = &adapters.PartyInfo{Round: 2, Selected: []string{"alice", "carol"}}
			f.partyAnswers = []agentbridge.Event{msg(5, "alice", "mine"), msg(6, "carol", "theirs")}
		}, func(t *testing.T, p prepared) {
			if p.p.Party == nil || p.p.Party.Round != 2 || !slices.Equal(p.p.Party.Selected, []string{"alice", "carol"}) {
				t.Errorf("party %+v", p.p.Party)
			}
			if got := ids(p.p.ContextWindow); !slices.Equal(got, []string{"E3", "E4", "E5", "E6"}) {
				t.Errorf("context window %v, want the answers appended", got)
			}
			if got := ids(p.p.SinceLastTurn); !slices.Equal(got, []string{"E4", "E6"}) {
				t.Errorf("since_last_turn %v, want the trigger and the others' answers", got)
			}
		}},
		{"roster with presence", func(f *invokeFacts, cfg *config.Config) {
			f.after.Participants.Invited = []agentbridge.Invite{{ID: "alice", Profile: agentbridge.Profile{Client: "claude"}}}
			f.presence = map[string]string{"alice": agentbridge.PresenceThinking}
		}, func(t *testing.T, p prepared) {
			if len(p.p.Participants) == 0 {
				t.Fatalf("roster empty")
			}
			for _, e := range p.p.Participants {
				if e.ID == "alice" && e.Presence != agentbridge.PresenceThinking {
					t.Errorf("alice's presence %q", e.Presence)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, cfg := base()
			if tc.setup != nil {
				tc.setup(&f, cfg)
			}
			p, err := buildPayload(f, cfg)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, p)
		})
	}
}

// TestOutcomeOf checks the one mapping from an agent run's result to an
// invocation's status and error text.
func TestOutcomeOf(t *testing.T) {
	cases := []struct {
		name       string
		run        agentRun
		status     string
		errContain string
	}{
		{"ok", agentRun{res: adapters.Result{PID: 3}}, ledger.StatusSucceeded, ""},
		{"cancelled", agentRun{res: adapters.Result{Cancelled: true}}, ledger.StatusCancelled, "cancelled"},
		{"interrupted", agentRun{res: adapters.Result{Interrupted: true}}, ledger.StatusInterrupted, ""},
		{"timeout", agentRun{res: adapters.Result{PID: 3, ExitCode: -1, TimedOut: true}}, ledger.StatusTimeout, ""},
		{"failed with a reason", agentRun{res: adapters.Result{PID: 3, ExitCode: 2}, why: "it broke"}, ledger.StatusFailed, "it broke"},
	}
	for _, tc := range cases {
		o := outcomeOf(tc.run, 0)
		if o.Status != tc.status || !strings.Contains(o.Error, tc.errContain) {
			t.Errorf("%s: %q %q, want %q containing %q", tc.name, o.Status, o.Error, tc.status, tc.errContain)
		}
		if tc.run.res.PID != 0 && (o.ExitCode == nil || *o.ExitCode != tc.run.res.ExitCode) {
			t.Errorf("%s: exit code %v", tc.name, o.ExitCode)
		}
	}
}

// TestProfileFor: the profile a run uses is the invite's, or the agent
// entry's own when the invite names no client.
func TestProfileFor(t *testing.T) {
	agent := config.Agent{Profile: &agentbridge.Profile{Client: "codex"}}
	cases := []struct {
		name    string
		invited agentbridge.Profile
		want    string
	}{
		{"the agent's profile when the invite names no client", agentbridge.Profile{}, "codex"},
		{"the invite's profile wins", agentbridge.Profile{Client: "claude"}, "claude"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := profileFor(tc.invited, agent); got.Client != tc.want {
				t.Errorf("profile %+v, want client %q", got, tc.want)
			}
		})
	}
}
