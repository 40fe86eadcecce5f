package rules

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// The helpers below build thread states by folding real control events, so
// the rules are tested against the states the coordinator really sees.

func msg(from, to, text string) agentbridge.Event {
	content, _ := json.Marshal(text)
	return agentbridge.Event{ID: "E1", Thread: "T1", Type: agentbridge.TypeMessage, From: from, To: to, Content: content}
}

func reply(from, text string, hop int) agentbridge.Event {
	e := msg(from, agentbridge.ToAll, text)
	e.Meta = agentbridge.Meta{ReplyTo: "E0", Via: "bridge-coordinator", Tags: []string{"coordinator"}, Hop: &hop}
	return e
}

func ctl(from, content string) agentbridge.Event {
	return agentbridge.Event{ID: "C1", Thread: "T1", Type: agentbridge.TypeControl, From: from, To: agentbridge.ToAll, Content: json.RawMessage(content)}
}

func invite(id, client, model, nickname string, roles ...string) agentbridge.Event {
	p := agentbridge.Profile{Client: client, Model: model, Nickname: nickname, Roles: roles}
	b, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": id, "profile": p}})
	return ctl("user", string(b))
}

func fold(events ...agentbridge.Event) agentbridge.ThreadState {
	var s agentbridge.ThreadState
	for _, e := range events {
		s = agentbridge.Fold(s, e, agentbridge.Humans{"user"})
	}
	return s
}

// testConfig has adapters for codex (client "codex"), claude-code (client
// "claude") and echo (client "echo").
func testConfig() *config.Config {
	cfg := config.Default()
	cfg.Agents = map[string]config.Agent{
		"codex":       {Command: []string{"/bin/codex.sh"}, Client: "codex"},
		"claude-code": {Command: []string{"/bin/claude.sh"}, Client: "claude"},
		"echo":        {Command: []string{"/bin/echo.sh"}, Client: "echo"},
	}
	return &cfg
}

// team is a thread with codex, two claude participants sharing the nickname
// "sage", an echo bot and a gemini participant nobody has an adapter for.
func team(extra ...agentbridge.Event) agentbridge.ThreadState {
	events := []agentbridge.Event{
		invite("codex", "codex", "gpt-5.2-codex", "cody", "coder"),
		invite("claude-1", "claude", "opus", "sage", "reviewer"),
		invite("claude-2", "claude", "sonnet", "sage", "reviewer", "coder"),
		invite("echo", "echo", "echo", "parrot"),
		invite("gemini", "gemini", "pro", "gem"),
	}
	return fold(append(events, extra...)...)
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name      string
		state     agentbridge.ThreadState
		event     agentbridge.Event
		cfg       func(*config.Config)
		rule      string
		reason    string
		invoke    []string // "participant=agent"
		skipped   []Skip
		clarify   []string // substrings of Clarify; nil means Clarify is empty
		loopGuard bool
		hop       int
	}{
		// Rule 1: what is not considered at all.
		{name: "thread.created is not a message", state: team(),
			event: agentbridge.Event{ID: "E1", Type: agentbridge.TypeThreadCreated, From: "user", To: "all", Content: json.RawMessage(`"x"`)},
			rule:  RuleSkip, reason: SkipNotMessage},
		{name: "custom type is not a message", state: team(),
			event: agentbridge.Event{ID: "E1", Type: "note", From: "codex", To: "codex", Content: json.RawMessage(`"@codex"`)},
			rule:  RuleSkip, reason: SkipNotMessage, hop: 1},
		{name: "control other than prod is not a message", state: team(), event: ctl("user", `{"pause":{"on":true}}`),
			rule: RuleSkip, reason: SkipNotMessage},
		{name: "malformed control is not a message", state: team(), event: ctl("user", `[1,2]`),
			rule: RuleSkip, reason: SkipNotMessage},
		{name: "to the human", state: team(), event: msg("codex", "user", "done @claude-1"),
			rule: RuleSkip, reason: SkipToHuman, hop: 1},
		{name: "to another human id", state: team(), event: msg("user", "alice", "hi @codex"),
			cfg:  func(c *config.Config) { c.HumanIDs = agentbridge.Humans{"user", "alice"} },
			rule: RuleSkip, reason: SkipToHuman},
		{name: "from the coordinator", state: team(), event: msg("bridge-coordinator", "all", "@codex is ambiguous"),
			rule: RuleSkip, reason: SkipFromCoordinator, hop: 1},
		{name: "from a renamed coordinator", state: team(), event: msg("coord", "codex", "hi"),
			cfg:  func(c *config.Config) { c.CoordinatorID = "coord" },
			rule: RuleSkip, reason: SkipFromCoordinator, hop: 1},
		{name: "paused: to a participant", state: team(ctl("user", `{"pause":{"on":true}}`)), event: msg("user", "codex", "hi"),
			rule: RuleSkip, reason: SkipPaused, skipped: []Skip{{Participant: "codex", Reason: ReasonPaused}}},
		{name: "paused: mention, no clarification", state: team(ctl("user", `{"pause":{"on":true}}`)), event: msg("user", "all", "@codex @sage @all"),
			rule: RuleSkip, reason: SkipPaused,
			skipped: []Skip{{Participant: "claude-1", Reason: ReasonAmbiguous}, {Participant: "claude-2", Reason: ReasonAmbiguous}, {Participant: "codex", Reason: ReasonPaused}}},
		{name: "pause from an agent does not count", state: team(ctl("codex", `{"pause":{"on":true}}`)), event: msg("user", "codex", "hi"),
			rule: RuleTo, invoke: []string{"codex=codex"}},
		{name: "unpaused again", state: team(ctl("user", `{"pause":{"on":true}}`), ctl("user", `{"pause":{"on":false}}`)), event: msg("user", "codex", "hi"),
			rule: RuleTo, invoke: []string{"codex=codex"}},

		// Rule 2: to=<participant>.
		{name: "to an invited participant with an adapter", state: team(), event: msg("user", "codex", "hi"),
			rule: RuleTo, invoke: []string{"codex=codex"}},
		{name: "to a participant served by client", state: team(), event: msg("user", "claude-2", "hi"),
			rule: RuleTo, invoke: []string{"claude-2=claude-code"}},
		{name: "to a participant that is not invited", state: team(), event: msg("user", "claude-code", "hi"),
			rule: RuleTo, skipped: []Skip{{Participant: "claude-code", Reason: ReasonNotInvited}}},
		{name: "to an uninvited participant", state: team(ctl("codex", `{"uninvite":{"participant_id":"codex"}}`)), event: msg("user", "codex", "hi"),
			rule: RuleTo, skipped: []Skip{{Participant: "codex", Reason: ReasonNotInvited}}},
		{name: "to an invited participant without adapter", state: team(), event: msg("user", "gemini", "hi"),
			rule: RuleTo, skipped: []Skip{{Participant: "gemini", Reason: ReasonNoAdapter}}},
		{name: "to a hard-muted participant", state: team(ctl("user", `{"mute":{"targets":["codex"]}}`)), event: msg("user", "codex", "hi"),
			rule: RuleTo, skipped: []Skip{{Participant: "codex", Reason: ReasonMuted}}},
		{name: "to a soft-muted participant", state: team(ctl("user", `{"mute":{"targets":["codex"],"mode":"soft"}}`)), event: msg("user", "codex", "hi"),
			rule: RuleTo, skipped: []Skip{{Participant: "codex", Reason: ReasonMuted}}},
		{name: "mute from an agent does not count", state: team(ctl("echo", `{"mute":{"targets":["codex"]}}`)), event: msg("user", "codex", "hi"),
			rule: RuleTo, invoke: []string{"codex=codex"}},
		{name: "unmuted again", state: team(ctl("user", `{"mute":{"targets":["codex"]}}`), ctl("user", `{"unmute":{"targets":["codex"]}}`)), event: msg("user", "codex", "hi"),
			rule: RuleTo, invoke: []string{"codex=codex"}},
		{name: "to itself", state: team(), event: msg("codex", "codex", "note to self"),
			rule: RuleTo, skipped: []Skip{{Participant: "codex", Reason: ReasonSelfMention}}, hop: 1},
		{name: "to ignores mentions", state: team(), event: msg("user", "codex", "ask @echo"),
			rule: RuleTo, invoke: []string{"codex=codex"}},

		// Rule 3: mentions.
		{name: "mention by id", state: team(), event: msg("user", "all", "hi @codex"),
			rule: RuleMention, invoke: []string{"codex=codex"}},
		{name: "mention by id, case-insensitive", state: team(), event: msg("user", "all", "hi @CLAUDE-1."),
			rule: RuleMention, invoke: []string{"claude-1=claude-code"}},
		{name: "mention by unique nickname", state: team(), event: msg("user", "all", "@cody look"),
			rule: RuleMention, invoke: []string{"codex=codex"}},
		{name: "ambiguous nickname invokes nobody and clarifies", state: team(), event: msg("user", "all", "@sage thoughts?"),
			rule: RuleMention, skipped: []Skip{{Participant: "claude-1", Reason: ReasonAmbiguous}, {Participant: "claude-2", Reason: ReasonAmbiguous}},
			clarify: []string{"@sage is ambiguous", "@claude-1 (claude/opus)", "@claude-2 (claude/sonnet)"}},
		{name: "ambiguous nickname plus one by id", state: team(), event: msg("user", "all", "@sage @claude-2"),
			rule: RuleMention, invoke: []string{"claude-2=claude-code"}, skipped: []Skip{{Participant: "claude-1", Reason: ReasonAmbiguous}},
			clarify: []string{"@sage is ambiguous"}},
		{name: "mention by role matches all", state: team(), event: msg("user", "all", "@reviewer please"),
			rule: RuleMention, invoke: []string{"claude-1=claude-code", "claude-2=claude-code"}},
		{name: "mention by client matches all", state: team(), event: msg("user", "all", "@claude please"),
			rule: RuleMention, invoke: []string{"claude-1=claude-code", "claude-2=claude-code"}},
		{name: "mention by model", state: team(), event: msg("user", "all", "@sonnet please"),
			rule: RuleMention, invoke: []string{"claude-2=claude-code"}},
		{name: "mention by role across clients", state: team(), event: msg("user", "all", "@coder"),
			rule: RuleMention, invoke: []string{"codex=codex", "claude-2=claude-code"}},
		{name: "id wins over nickname", state: team(invite("sage", "echo", "e", "")), event: msg("user", "all", "@sage"),
			rule: RuleMention, invoke: []string{"sage=echo"}},
		{name: "nickname wins over client", state: team(invite("x1", "echo", "e", "claude")), event: msg("user", "all", "@claude"),
			rule: RuleMention, invoke: []string{"x1=echo"}},
		{name: "several mentions, deduplicated", state: team(), event: msg("user", "all", "@codex @cody @coder"),
			rule: RuleMention, invoke: []string{"codex=codex", "claude-2=claude-code"}},
		{name: "mention of a participant without adapter", state: team(), event: msg("user", "all", "@gem"),
			rule: RuleMention, skipped: []Skip{{Participant: "gemini", Reason: ReasonNoAdapter}}},
		{name: "mention of someone not invited", state: team(), event: msg("user", "all", "@claude-code @nobody"),
			rule: RuleMention, skipped: []Skip{{Participant: "claude-code", Reason: ReasonNotInvited}, {Participant: "nobody", Reason: ReasonNotInvited}}},
		{name: "mention of a muted participant", state: team(ctl("user", `{"mute":{"targets":["echo"],"mode":"soft"}}`)), event: msg("user", "all", "@parrot @codex"),
			rule: RuleMention, invoke: []string{"codex=codex"}, skipped: []Skip{{Participant: "echo", Reason: ReasonMuted}}},
		{name: "@all clarifies and invokes nobody", state: team(), event: msg("user", "all", "@all hello"),
			rule: RuleMention, clarify: []string{"@all is not supported"}},
		{name: "@everyone and @here in one clarification", state: team(), event: msg("user", "all", "@everyone @here hi"),
			rule: RuleMention, clarify: []string{"@everyone, @here are not supported"}},
		{name: "@all with invited_auto on still clarifies", state: team(ctl("user", `{"invited_auto":{"on":true}}`)), event: msg("user", "all", "@all hi"),
			rule: RuleMention, clarify: []string{"@all is not supported"}},
		{name: "@all and @sage make one clarification", state: team(), event: msg("user", "all", "@all @sage @codex"),
			rule: RuleMention, invoke: []string{"codex=codex"}, skipped: []Skip{{Participant: "claude-1", Reason: ReasonAmbiguous}, {Participant: "claude-2", Reason: ReasonAmbiguous}},
			clarify: []string{"@all is not supported", "@sage is ambiguous"}},
		{name: "mentions in code do not count", state: team(), event: msg("user", "all", "run `@codex` and\n```\n@echo\n```"),
			rule: RuleNone},
		{name: "custom prefix", state: team(), event: msg("user", "all", "+codex but not @echo"),
			cfg:  func(c *config.Config) { c.MentionPrefix = "+" },
			rule: RuleMention, invoke: []string{"codex=codex"}},
		{name: "mentions disabled", state: team(), event: msg("user", "all", "@codex"),
			cfg:  func(c *config.Config) { c.EnableMentions = false },
			rule: RuleNone},
		{name: "agent mention without discussion is not allowed", state: team(), event: reply("codex", "over to @echo", 1),
			rule: RuleNone, skipped: []Skip{{Participant: "echo", Reason: ReasonMentionsNotAllowed}}, hop: 1},
		{name: "agent mention of a nickname without discussion", state: team(), event: reply("codex", "@sage?", 1),
			rule: RuleNone, skipped: []Skip{{Participant: "claude-1", Reason: ReasonMentionsNotAllowed}, {Participant: "claude-2", Reason: ReasonMentionsNotAllowed}}, hop: 1},
		{name: "agent mention with discussion on", state: team(ctl("user", `{"discussion":{"on":true}}`)), event: reply("codex", "over to @echo", 1),
			rule: RuleMention, invoke: []string{"echo=echo"}, hop: 1},
		{name: "agent mention with discussion on but agent mentions off", state: team(ctl("user", `{"discussion":{"on":true,"allow_agent_mentions":false}}`)), event: reply("codex", "@echo", 1),
			rule: RuleNone, skipped: []Skip{{Participant: "echo", Reason: ReasonMentionsNotAllowed}}, hop: 1},
		{name: "discussion from an agent does not count", state: team(ctl("codex", `{"discussion":{"on":true}}`)), event: reply("codex", "@echo", 1),
			rule: RuleNone, skipped: []Skip{{Participant: "echo", Reason: ReasonMentionsNotAllowed}}, hop: 1},
		{name: "agent in mention_senders", state: team(), event: msg("codex", "all", "@echo"),
			cfg:  func(c *config.Config) { c.MentionSenders = []string{"user", "codex"} },
			rule: RuleMention, invoke: []string{"echo=echo"}, hop: 1},
		{name: "human not in mention_senders", state: team(), event: msg("user", "all", "@echo"),
			cfg:  func(c *config.Config) { c.MentionSenders = []string{} },
			rule: RuleNone, skipped: []Skip{{Participant: "echo", Reason: ReasonMentionsNotAllowed}}},
		{name: "self-mention never wakes itself", state: team(ctl("user", `{"discussion":{"on":true}}`)), event: reply("codex", "I, @codex, and @echo", 2),
			rule: RuleMention, invoke: []string{"echo=echo"}, skipped: []Skip{{Participant: "codex", Reason: ReasonSelfMention}}, hop: 2},
		{name: "self-mention by role", state: team(ctl("user", `{"discussion":{"on":true}}`)), event: reply("codex", "@coder", 1),
			rule: RuleMention, invoke: []string{"claude-2=claude-code"}, skipped: []Skip{{Participant: "codex", Reason: ReasonSelfMention}}, hop: 1},

		// Rule 4: to=all without mentions.
		{name: "no mentions, nothing on", state: team(), event: msg("user", "all", "hello"),
			rule: RuleNone},
		{name: "invited_auto from a human", state: team(ctl("user", `{"invited_auto":{"on":true}}`)), event: msg("user", "all", "hello"),
			rule:    RuleInvitedAuto,
			invoke:  []string{"codex=codex", "claude-1=claude-code", "claude-2=claude-code", "echo=echo"},
			skipped: []Skip{{Participant: "gemini", Reason: ReasonNoAdapter}}},
		{name: "invited_auto skips muted", state: team(ctl("user", `{"invited_auto":{"on":true}}`), ctl("user", `{"mute":{"targets":["claude-1","claude-2"]}}`)), event: msg("user", "all", "hello"),
			rule:    RuleInvitedAuto,
			invoke:  []string{"codex=codex", "echo=echo"},
			skipped: []Skip{{Participant: "claude-1", Reason: ReasonMuted}, {Participant: "claude-2", Reason: ReasonMuted}, {Participant: "gemini", Reason: ReasonNoAdapter}}},
		{name: "invited_auto ignores agents", state: team(ctl("user", `{"invited_auto":{"on":true}}`)), event: reply("codex", "done", 1),
			rule: RuleNone, hop: 1},
		{name: "invited_auto from an agent control does not count", state: team(ctl("codex", `{"invited_auto":{"on":true}}`)), event: msg("user", "all", "hello"),
			rule: RuleNone},
		{name: "invited_auto when mentions do not count", state: team(ctl("user", `{"invited_auto":{"on":true}}`)), event: msg("user", "all", "@echo hello"),
			cfg:     func(c *config.Config) { c.MentionSenders = nil },
			rule:    RuleInvitedAuto,
			invoke:  []string{"codex=codex", "claude-1=claude-code", "claude-2=claude-code", "echo=echo"},
			skipped: []Skip{{Participant: "gemini", Reason: ReasonNoAdapter}}},
		{name: "broadcast", state: team(), event: msg("user", "all", "hello"),
			cfg: func(c *config.Config) {
				c.EnableBroadcast = true
				c.BroadcastAgents = []string{"echo", "claude-code", "gemini"}
			},
			rule: RuleBroadcast, invoke: []string{"echo=echo"},
			skipped: []Skip{{Participant: "claude-code", Reason: ReasonNotInvited}, {Participant: "gemini", Reason: ReasonNoAdapter}}},
		{name: "broadcast from a sender not listed", state: team(), event: reply("codex", "hello", 1),
			cfg: func(c *config.Config) {
				c.EnableBroadcast = true
				c.BroadcastAgents = []string{"echo"}
			},
			rule: RuleNone, hop: 1},
		{name: "broadcast from a listed agent, not to itself", state: team(), event: reply("codex", "hello", 1),
			cfg: func(c *config.Config) {
				c.EnableBroadcast = true
				c.BroadcastSenders = []string{"codex"}
				c.BroadcastAgents = []string{"codex", "echo"}
			},
			rule: RuleBroadcast, invoke: []string{"echo=echo"}, skipped: []Skip{{Participant: "codex", Reason: ReasonSelfMention}}, hop: 1},
		{name: "broadcast disabled", state: team(), event: msg("user", "all", "hello"),
			cfg:  func(c *config.Config) { c.BroadcastAgents = []string{"echo"} },
			rule: RuleNone},
		{name: "invited_auto wins over broadcast", state: team(ctl("user", `{"invited_auto":{"on":true}}`), ctl("user", `{"uninvite":{"participant_id":"gemini"}}`)), event: msg("user", "all", "hello"),
			cfg: func(c *config.Config) {
				c.EnableBroadcast = true
				c.BroadcastAgents = []string{"echo"}
			},
			rule:   RuleInvitedAuto,
			invoke: []string{"codex=codex", "claude-1=claude-code", "claude-2=claude-code", "echo=echo"}},

		// Rule 5: prod.
		{name: "prod from a human", state: team(), event: ctl("user", `{"prod":["codex","echo"]}`),
			rule: RuleProd, invoke: []string{"codex=codex", "echo=echo"}},
		{name: "prod as a JSON string", state: team(), event: ctl("user", `"{\"prod\":[\"codex\"]}"`),
			rule: RuleProd, invoke: []string{"codex=codex"}},
		{name: "prod of someone not invited or without adapter", state: team(), event: ctl("user", `{"prod":["claude-code","gemini"]}`),
			rule: RuleProd, skipped: []Skip{{Participant: "claude-code", Reason: ReasonNotInvited}, {Participant: "gemini", Reason: ReasonNoAdapter}}},
		{name: "prod from an agent", state: team(), event: ctl("codex", `{"prod":["echo"]}`),
			rule: RuleSkip, reason: SkipProdNotHuman, hop: 1},
		{name: "prod while paused", state: team(ctl("user", `{"pause":{"on":true}}`)), event: ctl("user", `{"prod":["codex"]}`),
			rule: RuleSkip, reason: SkipPaused, skipped: []Skip{{Participant: "codex", Reason: ReasonPaused}}},
		{name: "prod of a muted participant", state: team(ctl("user", `{"mute":{"targets":["codex"]}}`)), event: ctl("user", `{"prod":["codex"]}`),
			rule: RuleProd, skipped: []Skip{{Participant: "codex", Reason: ReasonMuted}}},
		{name: "prod resets the hop count", state: team(reply("codex", "a", 9)), event: ctl("user", `{"prod":["codex"]}`),
			rule: RuleProd, invoke: []string{"codex=codex"}},

		// Rule 6: loop guard.
		{name: "reply below the hop limit", state: team(ctl("user", `{"discussion":{"on":true}}`)), event: reply("codex", "@echo", 5),
			rule: RuleMention, invoke: []string{"echo=echo"}, hop: 5},
		{name: "reply at the hop limit", state: team(ctl("user", `{"discussion":{"on":true}}`)), event: reply("codex", "@echo", 6),
			rule: RuleMention, skipped: []Skip{{Participant: "echo", Reason: ReasonLoopGuard}}, loopGuard: true, hop: 6},
		{name: "hop limit from the thread's previous message", state: team(ctl("user", `{"discussion":{"on":true}}`), reply("echo", "x", 5)), event: msg("codex", "all", "@echo"),
			rule: RuleMention, skipped: []Skip{{Participant: "echo", Reason: ReasonLoopGuard}}, loopGuard: true, hop: 6},
		{name: "hop limit with to", state: team(), event: reply("codex", "x", 2),
			cfg:  func(c *config.Config) { c.MaxAgentHops = 2 },
			rule: RuleNone, hop: 2},
		{name: "hop limit applies to direct messages", state: team(reply("echo", "x", 1)), event: msg("codex", "echo", "x"),
			cfg:  func(c *config.Config) { c.MaxAgentHops = 2 },
			rule: RuleTo, skipped: []Skip{{Participant: "echo", Reason: ReasonLoopGuard}}, loopGuard: true, hop: 2},
		{name: "loop guard only with targets", state: team(ctl("user", `{"discussion":{"on":true}}`)), event: reply("codex", "@nobody", 7),
			rule: RuleMention, skipped: []Skip{{Participant: "nobody", Reason: ReasonNotInvited}}, hop: 7},
		{name: "a human message resets the count", state: team(reply("echo", "x", 9)), event: msg("user", "all", "@echo"),
			rule: RuleMention, invoke: []string{"echo=echo"}},
		{name: "a human message at the limit of 1", state: team(), event: msg("user", "echo", "hi"),
			cfg:  func(c *config.Config) { c.MaxAgentHops = 1 },
			rule: RuleTo, invoke: []string{"echo=echo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				tt.cfg(cfg)
			}
			before := fmt.Sprintf("%+v", tt.state)
			d := Decide(tt.state, tt.event, agentbridge.ControlOf(tt.event), cfg, nil)
			if after := fmt.Sprintf("%+v", tt.state); after != before {
				t.Fatalf("Decide modified the state:\n%s\n%s", before, after)
			}
			if d.EventID != tt.event.ID || d.Thread != tt.event.Thread {
				t.Errorf("EventID, Thread = %q, %q; want %q, %q", d.EventID, d.Thread, tt.event.ID, tt.event.Thread)
			}
			if d.Rule != tt.rule || d.Reason != tt.reason {
				t.Errorf("Rule, Reason = %q, %q; want %q, %q", d.Rule, d.Reason, tt.rule, tt.reason)
			}
			var invoked []string
			for _, target := range d.Invoke {
				invoked = append(invoked, target.Participant+"="+target.Agent)
				inv, _ := tt.state.Invited(target.Participant)
				if !slices.Equal(inv.Profile.Roles, target.Profile.Roles) || inv.Profile.Model != target.Profile.Model {
					t.Errorf("target %s has profile %+v, want the invited %+v", target.Participant, target.Profile, inv.Profile)
				}
			}
			if !slices.Equal(invoked, tt.invoke) {
				t.Errorf("Invoke = %q, want %q", invoked, tt.invoke)
			}
			// Who serves each skipped candidate is TestDecideNamesServing's.
			bare := make([]Skip, len(d.Skipped))
			for i, s := range d.Skipped {
				bare[i] = Skip{Participant: s.Participant, Reason: s.Reason}
			}
			if !slices.Equal(bare, tt.skipped) && !(len(d.Skipped) == 0 && len(tt.skipped) == 0) {
				t.Errorf("Skipped = %+v, want %+v", d.Skipped, tt.skipped)
			}
			if tt.clarify == nil && d.Clarify != "" {
				t.Errorf("Clarify = %q, want none", d.Clarify)
			}
			for _, sub := range tt.clarify {
				if !strings.Contains(d.Clarify, sub) {
					t.Errorf("Clarify = %q, want it to contain %q", d.Clarify, sub)
				}
			}
			if d.LoopGuard != tt.loopGuard {
				t.Errorf("LoopGuard = %v, want %v", d.LoopGuard, tt.loopGuard)
			}
			if d.Hop != tt.hop {
				t.Errorf("Hop = %d, want %d", d.Hop, tt.hop)
			}
		})
	}
}

// TestDecideNamesServing: every skipped candidate carries the agent entry
// serving it here, or, when none does, its invited client, which the
// receipt reporter checks against the coordinators the bridge knows.
func TestDecideNamesServing(t *testing.T) {
	tests := []struct {
		name  string
		state agentbridge.ThreadState
		event agentbridge.Event
		want  map[string]Skip
	}{
		{"served, muted", team(ctl("user", `{"mute":{"targets":["codex"]}}`)), msg("user", "codex", "hi"),
			map[string]Skip{"codex": {Participant: "codex", Reason: ReasonMuted, Agent: "codex"}}},
		{"served by client, ambiguous", team(), msg("user", "all", "@sage"),
			map[string]Skip{
				"claude-1": {Participant: "claude-1", Reason: ReasonAmbiguous, Agent: "claude-code"},
				"claude-2": {Participant: "claude-2", Reason: ReasonAmbiguous, Agent: "claude-code"}}},
		{"not served here", team(), msg("user", "gemini", "hi"),
			map[string]Skip{"gemini": {Participant: "gemini", Reason: ReasonNoAdapter, Client: "gemini"}}},
		{"not invited, no entry", team(), msg("user", "nobody", "hi"),
			map[string]Skip{"nobody": {Participant: "nobody", Reason: ReasonNotInvited}}},
		{"paused, served", team(ctl("user", `{"pause":{"on":true}}`)), msg("user", "codex", "hi"),
			map[string]Skip{"codex": {Participant: "codex", Reason: ReasonPaused, Agent: "codex"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.state, tt.event, agentbridge.ControlOf(tt.event), testConfig(), nil)
			if len(d.Skipped) != len(tt.want) {
				t.Fatalf("Skipped = %+v, want %+v", d.Skipped, tt.want)
			}
			for _, s := range d.Skipped {
				if s != tt.want[s.Participant] {
					t.Errorf("skip %+v, want %+v", s, tt.want[s.Participant])
				}
			}
		})
	}
}

func TestDecisionJSON(t *testing.T) {
	d := Decide(team(), msg("user", "all", "@codex @gemini"), nil, testConfig(), nil)
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"event_id":"E1","thread":"T1","rule":"mention","hop":0,` +
		`"invoke":[{"participant":"codex","agent":"codex","profile":{"client":"codex","model":"gpt-5.2-codex","roles":["coder"],"nickname":"cody"}}],` +
		`"skipped":[{"participant":"gemini","reason":"no adapter","client":"gemini"}]}`
	if string(b) != want {
		t.Fatalf("decision JSON:\n got %s\nwant %s", b, want)
	}
	empty, err := json.Marshal(Decide(team(), msg("user", "all", "hi"), nil, testConfig(), nil))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(empty), `"invoke":[],"skipped":[]`) {
		t.Fatalf("empty lists must be arrays, got %s", empty)
	}
}

func TestNotices(t *testing.T) {
	n := LoopGuardNotice(6, 6)
	for _, want := range []string{"stopped", "6", "max_agent_hops", "prod"} {
		if !strings.Contains(n, want) {
			t.Errorf("LoopGuardNotice = %q, want it to mention %q", n, want)
		}
	}
	if got := ReservedMentionNotice("@", []string{"all"}); !strings.HasPrefix(got, "@all is not supported") {
		t.Errorf("ReservedMentionNotice = %q", got)
	}
	got := AmbiguousMentionNotice("@", "sage", []agentbridge.Invite{{ID: "a", Profile: agentbridge.Profile{Client: "c", Model: "m"}}, {ID: "b", Profile: agentbridge.Profile{Client: "d", Model: "n"}}})
	if !strings.Contains(got, "@a (c/m), @b (d/n)") {
		t.Errorf("AmbiguousMentionNotice = %q", got)
	}
}

// FuzzDecide checks the invariants of the rules on arbitrary messages and
// thread settings: the sender is never invoked, nor is anyone uninvited,
// muted or without an adapter; a paused thread or a loop guard invokes
// nobody; every target appears once, and never also as skipped.
func FuzzDecide(f *testing.F) {
	f.Add("hello @codex", "user", "all", uint8(0), 0)
	f.Add("@sage @all", "user", "all", uint8(0), 0)
	f.Add("@coder @reviewer", "codex", "all", uint8(1), 2)
	f.Add("hi", "user", "all", uint8(2), 0)
	f.Add("@echo", "echo", "echo", uint8(1|4), 3)
	f.Add("@claude", "claude-1", "all", uint8(1|8), 9)
	f.Add("`@codex`", "user", "codex", uint8(16), 0)
	f.Add("x", "user", "all", uint8(32|64), 0)
	f.Fuzz(func(t *testing.T, text, from, to string, flags uint8, hop int) {
		if !agentbridge.ParticipantIDPattern.MatchString(from) || !agentbridge.ParticipantIDPattern.MatchString(to) || hop < 0 {
			t.Skip()
		}
		extra := []agentbridge.Event{}
		if flags&1 != 0 {
			extra = append(extra, ctl("user", `{"discussion":{"on":true}}`))
		}
		if flags&2 != 0 {
			extra = append(extra, ctl("user", `{"invited_auto":{"on":true}}`))
		}
		if flags&4 != 0 {
			extra = append(extra, ctl("user", `{"mute":{"targets":["echo","claude-1"],"mode":"soft"}}`))
		}
		if flags&8 != 0 {
			extra = append(extra, ctl("user", `{"mute":{"targets":["codex"]}}`))
		}
		if flags&16 != 0 {
			extra = append(extra, ctl("user", `{"pause":{"on":true}}`))
		}
		st := team(extra...)
		cfg := testConfig()
		if flags&32 != 0 {
			cfg.EnableBroadcast = true
			cfg.BroadcastSenders = []string{"user", "codex", from}
			cfg.BroadcastAgents = []string{"echo", "codex", "claude-code", to}
		}
		if flags&64 != 0 {
			cfg.MentionSenders = append(cfg.MentionSenders, from)
		}
		e := msg(from, to, text)
		if flags&128 != 0 {
			e = ctl("user", fmt.Sprintf(`{"prod":[%q]}`, to))
		}
		if hop > 0 {
			e.Meta.Hop = &hop
		}
		d := Decide(st, e, agentbridge.ControlOf(e), cfg, nil)
		seen := map[string]bool{}
		for _, target := range d.Invoke {
			p := target.Participant
			switch {
			case p == e.From:
				t.Fatalf("invoked the sender %s: %+v", p, d)
			case seen[p]:
				t.Fatalf("invoked %s twice: %+v", p, d)
			case st.IsMuted(p):
				t.Fatalf("invoked muted %s: %+v", p, d)
			case st.Paused:
				t.Fatalf("invoked %s in a paused thread: %+v", p, d)
			}
			if _, ok := st.Invited(p); !ok {
				t.Fatalf("invoked uninvited %s: %+v", p, d)
			}
			if _, ok := cfg.Agents[target.Agent]; !ok {
				t.Fatalf("invoked %s with unknown agent %q", p, target.Agent)
			}
			seen[p] = true
		}
		for _, s := range d.Skipped {
			if seen[s.Participant] {
				t.Fatalf("%s both invoked and skipped: %+v", s.Participant, d)
			}
		}
		if d.LoopGuard && (len(d.Invoke) > 0 || d.Hop < cfg.MaxAgentHops) {
			t.Fatalf("loop guard with targets or below the limit: %+v", d)
		}
		if d.Hop >= cfg.MaxAgentHops && len(d.Invoke) > 0 {
			t.Fatalf("invoked at hop %d: %+v", d.Hop, d)
		}
	})
}

func BenchmarkDecide(b *testing.B) {
	st := team(ctl("user", `{"discussion":{"on":true}}`))
	cfg := testConfig()
	e := reply("codex", "Thanks. @sage and @claude-2, can you check `@codex` output? cc @reviewer @gem", 2)
	b.ReportAllocs()
	for b.Loop() {
		Decide(st, e, nil, cfg, nil)
	}
}

func TestResolveAgent(t *testing.T) {
	cfg := testConfig()
	st := fold(
		invite("codex", "codex", "m", ""),
		invite("claude-7", "Claude", "opus", ""),
		invite("gem", "gemini", "pro", ""),
	)
	tests := []struct {
		participant string
		agent       string
		ok          bool
	}{
		{"codex", "codex", true},
		{"claude-7", "claude-code", true}, // by client, case-insensitive
		{"gem", "", false},                // invited, no entry for its client
		{"echo", "echo", true},            // names an entry, invited or not
		{"stranger", "", false},
	}
	for _, tt := range tests {
		agent, ok := cfg.ResolveAgent(tt.participant, st)
		if agent != tt.agent || ok != tt.ok {
			t.Errorf("ResolveAgent(%q) = %q, %v; want %q, %v", tt.participant, agent, ok, tt.agent, tt.ok)
		}
	}
}

// TestDecideWorkspace: a participant whose thread picks a workspace this
// config lacks is skipped "no workspace", naming it and its client, so
// that a coordinator that has it serves it; with the workspace in the
// config it is invoked.
func TestDecideWorkspace(t *testing.T) {
	t.Parallel()
	wsCtl := agentbridge.Event{Type: agentbridge.TypeControl, From: "user", Content: json.RawMessage(`{"workspace":{"name":"app"}}`)}
	st := team(wsCtl)
	cfg := testConfig()
	d := Decide(st, msg("user", "codex", "hi"), nil, cfg, nil)
	if len(d.Invoke) != 0 || len(d.Skipped) != 1 || d.Skipped[0] != (Skip{Participant: "codex", Reason: ReasonNoWorkspace, Client: "codex", Workspace: "app"}) {
		t.Errorf("without the workspace: invoke %v, skipped %+v", d.Invoke, d.Skipped)
	}
	cfg.Workspaces = map[string]config.Workspace{"app": {Repo: "/r"}}
	if d := Decide(st, msg("user", "codex", "hi"), nil, cfg, nil); len(d.Invoke) != 1 || d.Invoke[0].Agent != "codex" {
		t.Errorf("with the workspace: invoke %v, skipped %+v", d.Invoke, d.Skipped)
	}
}
