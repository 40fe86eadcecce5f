package rules

import (
	"fmt"
	"slices"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// Rules a Decision can record: the trigger rule that matched, "none" when a
// message matched no rule, or "skip" when the event was not considered (see
// Decision.Reason).
const (
	RuleTo          = "to"
	RuleMention     = "mention"
	RuleInvitedAuto = "invited_auto"
	RuleBroadcast   = "broadcast"
	RuleProd        = "prod"
	RuleNone        = "none"
	RuleSkip        = "skip"
)

// Reasons for skipping a whole event (Decision.Reason).
const (
	SkipNotMessage      = "not a message"
	SkipToHuman         = "to a human"
	SkipFromCoordinator = "from the coordinator"
	SkipPaused          = "paused"
	SkipProdNotHuman    = "prod from a non-human"
)

// Reasons for not invoking one candidate (Skip.Reason). They answer "why
// didn't X answer?" and are shown by `agent-bridge why`.
const (
	ReasonNotInvited = "not invited"
	ReasonNoAdapter  = "no adapter"
	// ReasonNoWorkspace: the thread picks a workspace for the participant
	// that this coordinator lacks (contract 8.1); one that has it serves
	// the participant there.
	ReasonNoWorkspace        = "no workspace"
	ReasonMuted              = "muted"
	ReasonPaused             = "paused"
	ReasonSelfMention        = "self-mention"
	ReasonAmbiguous          = "ambiguous"
	ReasonLoopGuard          = "loop guard"
	ReasonMentionsNotAllowed = "mentions not allowed from this sender"
)

// Decision is the routing decision for one event: what the coordinator will
// do and why. It is recorded for every message so that "why did (or didn't)
// X answer?" has an answer.
type Decision struct {
	EventID string `json:"event_id"`
	Thread  string `json:"thread"`
	// Rule is the trigger rule that matched (one of the Rule constants).
	Rule string `json:"rule"`
	// Reason says why the event was skipped when Rule is "skip".
	Reason string `json:"reason,omitempty"`
	// Hop is the event's meta.hop, which the bridge assigns (contract 5.1;
	// agentbridge.Hop); replies to it get Hop+1 from the bridge.
	Hop int `json:"hop"`
	// Invoke lists the participants to invoke, in order.
	Invoke []Target `json:"invoke"`
	// Skipped lists every candidate that is not invoked, with its reason.
	Skipped []Skip `json:"skipped"`
	// Clarify, when non-empty, is the text of one clarification message to
	// post to the sender (ambiguous nickname, @all).
	Clarify string `json:"clarify,omitempty"`
	// LoopGuard asks for one loop-guard notice: the trigger had targets but
	// its hop count reached max_agent_hops, so nobody is invoked.
	LoopGuard bool `json:"loop_guard,omitempty"`
	// SceneClose, when set, is the reason of the scene this event closed:
	// the coordinator posts one scene.closed event with it.
	SceneClose string `json:"scene_close,omitempty"`
	// Party is the selection of a party round (rule "party"): who runs in
	// round 1 and why, and who does not.
	Party *PartySelection `json:"party,omitempty"`
}

// Target is one participant to invoke and the agent entry that speaks for
// it.
type Target struct {
	Participant string `json:"participant"`
	// Agent is the name of the config's agent entry (see ResolveAgent).
	Agent string `json:"agent"`
	// Profile is the participant's invited profile in the thread.
	Profile agentbridge.Profile `json:"profile"`
}

// Skip is a candidate that is not invoked, and why.
type Skip struct {
	Participant string `json:"participant"`
	Reason      string `json:"reason"`
	// Agent is the config's agent entry that serves the participant here
	// (ResolveAgent), empty when this coordinator does not serve it;
	// Client is the participant's invited client then, by which another
	// coordinator may serve it. Only a coordinator serving a participant
	// reports its receipt (contract 7.1; coordinator/receipts.go).
	Agent  string `json:"agent,omitempty"`
	Client string `json:"client,omitempty"`
	// Workspace is, when the thread picks a workspace for the participant
	// that this coordinator lacks, its name: only a coordinator that has
	// it serves the participant there.
	Workspace string `json:"workspace,omitempty"`
}

// Decide applies the trigger rules to event e of a thread whose derived
// state before e is state (the caller folds e afterwards, so a control only
// affects later events). ctl is e's control as the caller parsed it, once
// on its path (agentbridge.ControlOf), nil when e is not one. party holds the facts a party round's selection
// reads besides the state (turns, who other coordinators serve; see
// SelectParty); nil outside party mode. It is pure: it
// does no I/O, reads no clock and does not modify its arguments. Rate
// limiting is not its business: the scheduler queues what is over the
// rate.
func Decide(state agentbridge.ThreadState, e agentbridge.Event, ctl *agentbridge.Control, cfg *config.Config, party *PartyFacts) Decision {
	r := &router{
		state: state,
		e:     e,
		ctl:   ctl,
		cfg:   cfg,
		facts: party,
		d: Decision{
			EventID: e.ID,
			Thread:  e.Thread,
			Hop:     agentbridge.Hop(state, e, cfg.HumanIDs),
			Invoke:  []Target{},
			Skipped: []Skip{},
		},
	}
	switch {
	case r.decideScene():
	case e.Type == agentbridge.TypeControl:
		r.control()
	case e.Type != agentbridge.TypeMessage:
		r.d.Rule, r.d.Reason = RuleSkip, SkipNotMessage
	case cfg.HumanIDs.Has(e.To):
		r.d.Rule, r.d.Reason = RuleSkip, SkipToHuman
	case e.From == cfg.CoordinatorID:
		r.d.Rule, r.d.Reason = RuleSkip, SkipFromCoordinator
	case e.To != agentbridge.ToAll:
		r.d.Rule = RuleTo
		r.want = []string{e.To}
	default:
		r.toAll()
	}
	if r.d.Rule != RuleSkip {
		r.finish()
	}
	r.serving()
	return r.d
}

// serving names, on each skipped candidate, the agent entry that serves
// it here, or its invited client when none does.
func (r *router) serving() {
	for i := range r.d.Skipped {
		s := &r.d.Skipped[i]
		if agent, ok := r.cfg.ResolveAgent(s.Participant, r.state); ok {
			s.Agent = agent
		} else if inv, invited := r.state.Invited(s.Participant); invited {
			s.Client = inv.Profile.Client
			s.Workspace = r.cfg.MissingWorkspace(s.Participant, r.state)
		}
	}
}

// router accumulates one decision.
type router struct {
	state agentbridge.ThreadState
	e     agentbridge.Event
	// ctl is e's control as the caller parsed it (nil when e is not one).
	ctl *agentbridge.Control
	cfg *config.Config
	d   Decision
	// want lists the participants proposed for invocation, in order; they
	// may still be dropped (self, not invited, no adapter, muted).
	want []string
	// pre lists candidates already ruled out while resolving (ambiguous,
	// unknown name, mentions not allowed).
	pre []Skip
	// ambiguous and reserved collect what the clarification must say.
	ambiguous []ambiguity
	reserved  []string
	// facts are the party facts (see Decide).
	facts *PartyFacts
}

type ambiguity struct {
	name       string
	candidates []agentbridge.Invite
}

// control handles control events: only a prod from a human invokes anyone.
func (r *router) control() {
	switch {
	case r.ctl == nil || r.ctl.Prod == nil:
		r.d.Rule, r.d.Reason = RuleSkip, SkipNotMessage
	case r.e.From == r.cfg.CoordinatorID:
		r.d.Rule, r.d.Reason = RuleSkip, SkipFromCoordinator
	case !r.cfg.HumanIDs.Has(r.e.From):
		r.d.Rule, r.d.Reason = RuleSkip, SkipProdNotHuman
	default:
		r.d.Rule = RuleProd
		r.want = r.ctl.Prod
	}
}

// toAll handles a message to everyone: mentions first, then invited_auto,
// then broadcast.
func (r *router) toAll() {
	if r.state.Party.On && r.cfg.HumanIDs.Has(r.e.From) && !agentbridge.IsPartyExit(r.e.Text()) {
		r.party()
		return
	}
	if r.mentions() {
		return
	}
	human := r.cfg.HumanIDs.Has(r.e.From)
	switch {
	case r.state.InvitedAuto.On && human:
		r.d.Rule = RuleInvitedAuto
		for _, inv := range r.state.Participants.Invited {
			r.want = append(r.want, inv.ID)
		}
	case r.cfg.EnableBroadcast && slices.Contains(r.cfg.BroadcastSenders, r.e.From):
		r.d.Rule = RuleBroadcast
		r.want = append(r.want, r.cfg.BroadcastAgents...)
	default:
		r.d.Rule = RuleNone
	}
}

// mentions applies the mention rule to a message to everyone; it reports
// whether the mentions decided. Mentions from a sender who may not mention
// leave a message without mentions, and record whom they would have woken.
func (r *router) mentions() bool {
	var names []string
	if r.cfg.EnableMentions {
		names = ParseMentions(r.e.Text(), r.cfg.MentionPrefix)
	}
	if len(names) == 0 {
		return false
	}
	r.resolve(names)
	if slices.Contains(r.cfg.MentionSenders, r.e.From) || (r.state.Discussion.On && r.state.Discussion.AllowAgentMentions) {
		r.d.Rule = RuleMention
		r.d.Clarify = r.clarification()
		return true
	}
	for _, p := range r.want {
		r.pre = append(r.pre, Skip{Participant: p})
	}
	for i := range r.pre {
		r.pre[i].Reason = ReasonMentionsNotAllowed
	}
	r.want, r.ambiguous, r.reserved = nil, nil, nil
	return false
}

// party starts a party round: the selection decides who runs, and every
// other candidate is recorded with its reason.
func (r *router) party() {
	sel := SelectParty(r.state, r.e, r.cfg, r.facts)
	r.d.Rule = RuleParty
	r.d.Party = &sel
	r.want = sel.IDs()
	for _, p := range sel.NotSelected {
		r.pre = append(r.pre, Skip{Participant: p.Participant, Reason: p.Reason})
	}
}

// resolve turns mentioned names into candidates: an invited participant's
// id, else a unique nickname (several → ambiguous), else every invited
// participant with that role, client or model. @all, @everyone and @here
// resolve to nobody and are collected for the clarification.
func (r *router) resolve(names []string) {
	invited := r.state.Participants.Invited
	for _, name := range names {
		if IsReservedMention(name) {
			r.reserved = append(r.reserved, name)
			continue
		}
		if i := slices.IndexFunc(invited, func(inv agentbridge.Invite) bool { return strings.EqualFold(inv.ID, name) }); i >= 0 {
			r.want = append(r.want, invited[i].ID)
			continue
		}
		var nick []agentbridge.Invite
		for _, inv := range invited {
			if inv.Profile.Nickname != "" && strings.EqualFold(inv.Profile.Nickname, name) {
				nick = append(nick, inv)
			}
		}
		switch {
		case len(nick) == 1:
			r.want = append(r.want, nick[0].ID)
			continue
		case len(nick) > 1:
			r.ambiguous = append(r.ambiguous, ambiguity{name: name, candidates: nick})
			for _, inv := range nick {
				r.pre = append(r.pre, Skip{Participant: inv.ID, Reason: ReasonAmbiguous})
			}
			continue
		}
		found := false
		for _, inv := range invited {
			if profileMatches(inv.Profile, name) {
				r.want = append(r.want, inv.ID)
				found = true
			}
		}
		if !found {
			r.pre = append(r.pre, Skip{Participant: name, Reason: ReasonNotInvited})
		}
	}
}

// profileMatches reports whether name is one of the profile's roles, its
// client or its model.
func profileMatches(p agentbridge.Profile, name string) bool {
	if strings.EqualFold(p.Client, name) || strings.EqualFold(p.Model, name) {
		return true
	}
	return slices.ContainsFunc(p.Roles, func(role string) bool { return strings.EqualFold(role, name) })
}

// finish drops the candidates that cannot be invoked, then applies pause and
// the loop guard.
func (r *router) finish() {
	done := make(map[string]bool)
	for _, p := range r.want {
		if done[p] {
			continue
		}
		done[p] = true
		inv, invited := r.state.Invited(p)
		agent, hasAdapter := r.cfg.ResolveAgent(p, r.state)
		switch {
		case p == r.e.From:
			r.skip(p, ReasonSelfMention)
		case !invited:
			r.skip(p, ReasonNotInvited)
		case !hasAdapter:
			r.skip(p, r.unservedReason(p))
		case r.state.IsMuted(p):
			r.skip(p, ReasonMuted)
		default:
			r.d.Invoke = append(r.d.Invoke, Target{Participant: p, Agent: agent, Profile: inv.Profile})
		}
	}
	for _, s := range r.pre {
		if !done[s.Participant] {
			done[s.Participant] = true
			r.d.Skipped = append(r.d.Skipped, s)
		}
	}
	if r.state.Paused {
		r.d.Rule, r.d.Reason = RuleSkip, SkipPaused
		r.d.Clarify = ""
		r.dropAll(ReasonPaused)
		return
	}
	r.dropActors()
	inScene := r.d.Rule == RuleScene || r.d.Rule == RuleSceneJournal
	if !inScene && r.cfg.MaxAgentHops > 0 && r.d.Hop >= r.cfg.MaxAgentHops && len(r.d.Invoke) > 0 {
		r.d.LoopGuard = true
		r.dropAll(ReasonLoopGuard)
	}
}

func (r *router) skip(participant, reason string) {
	r.d.Skipped = append(r.d.Skipped, Skip{Participant: participant, Reason: reason})
}

// unservedReason says why this coordinator does not serve p: no agent
// entry for it, or the thread picks a workspace for it that this config
// lacks.
func (r *router) unservedReason(p string) string {
	if r.cfg.MissingWorkspace(p, r.state) != "" {
		return ReasonNoWorkspace
	}
	return ReasonNoAdapter
}

// dropAll moves every target to Skipped with reason.
func (r *router) dropAll(reason string) {
	for _, t := range r.d.Invoke {
		r.skip(t.Participant, reason)
	}
	r.d.Invoke = []Target{}
}

// clarification returns the text of the one clarification message a
// mention needs, or "".
func (r *router) clarification() string {
	var parts []string
	if len(r.reserved) > 0 {
		parts = append(parts, ReservedMentionNotice(r.cfg.MentionPrefix, r.reserved))
	}
	for _, a := range r.ambiguous {
		parts = append(parts, AmbiguousMentionNotice(r.cfg.MentionPrefix, a.name, a.candidates))
	}
	return strings.Join(parts, "\n\n")
}

// ReservedMentionNotice is the clarification for group mentions such as
// @all: the coordinator never fans out on them, so it tells the sender what
// to do instead.
func ReservedMentionNotice(prefix string, names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = prefix + n
	}
	verb := "is"
	if len(names) > 1 {
		verb = "are"
	}
	return fmt.Sprintf("%s %s not supported here: nobody was woken by it. Mention participants by id, nickname, role, client or model (such as %scodex), or post with to=<participant id>.",
		strings.Join(quoted, ", "), verb, prefix)
}

// AmbiguousMentionNotice is the clarification for a nickname that several
// invited participants share: nobody was invoked for it, and the sender
// learns the candidates' ids so that the next message can be exact.
func AmbiguousMentionNotice(prefix, name string, candidates []agentbridge.Invite) string {
	list := make([]string, len(candidates))
	for i, inv := range candidates {
		list[i] = fmt.Sprintf("%s%s (%s/%s)", prefix, inv.ID, inv.Profile.Client, inv.Profile.Model)
	}
	return fmt.Sprintf("%s%s is ambiguous: it is the nickname of %s, so nobody was woken by it. Mention one of them by id, or post with to=<participant id>.",
		prefix, name, strings.Join(list, ", "))
}

// LoopGuardNotice is the text of the notice posted when a trigger's hop
// count reaches max_agent_hops: it says that the agents stopped and how a
// person can let them go on.
func LoopGuardNotice(hop, maxHops int) string {
	return fmt.Sprintf("The agents stopped here: this message is %d agent hops away from the last human message, and max_agent_hops is %d. To go on, reply yourself (a human message resets the count), post to a participant directly, or prod one with {\"prod\": [\"<participant id>\"]}.",
		hop, maxHops)
}

// PartyRound is the party round of d's invocations: 1 for a party trigger
// (round 2 is queued later, by the round's progress), 0 otherwise.
func (d Decision) PartyRound() int {
	if d.Rule == RuleParty {
		return 1
	}
	return 0
}
