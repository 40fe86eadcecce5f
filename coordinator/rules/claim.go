package rules

import (
	"fmt"
	"slices"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
)

// A claim taken over (contract 8.3): the coordinator that takes another's
// claim decides its trigger again with its own rules (Decide) and runs it
// only when they make the claim's event a trigger of the claim's round for
// the participant the claim answers for. The bridge checked what it could
// without a config; this settles the rest (mentions allowed from the
// sender, broadcasts, the loop guard, the party's selection).

// ClaimDisagreement says why decision d, this coordinator's decision of a
// claim's event made from st (the thread's state before it), does not make
// the event a trigger of round for participant, or "" when it does.
// servedHere is whether this coordinator serves participant: a fallback
// claim answers for a participant another coordinator may serve, which
// this decision then skips as "no adapter" while the rules did address
// it. A party claim agrees for a candidate the selection left out only
// for max_agents, which another coordinator's facts may have ranked
// differently.
func ClaimDisagreement(d Decision, st agentbridge.ThreadState, cfg *config.Config, participant string, round int, servedHere bool) string {
	want := d.PartyRound()
	if round != want && !(want == 1 && round == 2) {
		return fmt.Sprintf("the claim is for round %d, and the rules decide round %d", round, want)
	}
	if addresses(d, participant) {
		return ""
	}
	return whyNotAddressed(d, st, cfg, participant, servedHere)
}

// addresses reports whether d runs participant, or leaves it out of a
// party round only for max_agents.
func addresses(d Decision, participant string) bool {
	if slices.ContainsFunc(d.Invoke, func(t Target) bool { return t.Participant == participant }) {
		return true
	}
	return d.Party != nil && slices.ContainsFunc(d.Party.NotSelected, func(p PartyPick) bool {
		return p.Participant == participant && p.Reason == PartyOverMax
	})
}

// whyNotAddressed is ClaimDisagreement's answer for a participant d does
// not address: "" when d skips it only because another coordinator serves
// it, else why d skips it or wakes nobody for it.
func whyNotAddressed(d Decision, st agentbridge.ThreadState, cfg *config.Config, participant string, servedHere bool) string {
	i := slices.IndexFunc(d.Skipped, func(s Skip) bool { return s.Participant == participant })
	switch {
	case i >= 0 && d.Skipped[i].Reason == ReasonNoAdapter && !servedHere && d.Rule != RuleSkip && !st.IsMuted(participant):
		// The loop guard drops only the targets this coordinator serves.
		if inScene := d.Rule == RuleScene || d.Rule == RuleSceneJournal; !inScene && cfg.MaxAgentHops > 0 && d.Hop >= cfg.MaxAgentHops {
			return fmt.Sprintf("%s is skipped: %s", participant, ReasonLoopGuard)
		}
		return ""
	case i >= 0 && d.Rule == RuleSkip:
		return fmt.Sprintf("%s is skipped: %s", participant, d.Reason)
	case i >= 0:
		return fmt.Sprintf("%s is skipped: %s", participant, d.Skipped[i].Reason)
	case d.Rule == RuleSkip:
		return "the event is skipped: " + d.Reason
	}
	return fmt.Sprintf("no rule (%s) wakes %s", d.Rule, participant)
}
