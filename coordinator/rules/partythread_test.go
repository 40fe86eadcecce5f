package rules

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// partyEv is a party reply (or, with from "coord", an error notice about
// participant) to trigger T in round.
func partyEv(from, participant string, round int, tags ...string) agentbridge.Event {
	pm, _ := json.Marshal(PartyMeta{Round: round, Trigger: "T"})
	extra := map[string]json.RawMessage{MetaParty: pm}
	if participant != "" {
		extra[MetaParticipant], _ = json.Marshal(participant)
		tags = append(tags, "error")
	}
	return agentbridge.Event{From: from, Type: agentbridge.TypeMessage, Meta: agentbridge.Meta{ReplyTo: "T", Tags: tags, Extra: extra}}
}

func rc(p, state, reason string) agentbridge.Receipt {
	return agentbridge.Receipt{Event: "T", Participant: p, State: state, Reason: reason}
}

// TestPartyFromThread: the round's stage, round 2 and notice follow from
// the thread's replies and receipts alone, whichever coordinator reads
// them (contract 7.1).
func TestPartyFromThread(t *testing.T) {
	sel := []string{"claude", "codex"}
	tests := []struct {
		name      string
		selected  []string
		crossTalk bool
		evs       []agentbridge.Event
		rcs       []agentbridge.Receipt
		stage     int
		reactors  []string
		waiting   []string
		notice    []string
	}{
		{"nothing yet", sel, true, nil, []agentbridge.Receipt{rc("claude", "running", "")}, 1, nil, []string{"claude", "codex"}, nil},
		{"one answered, the other still running", sel, true,
			[]agentbridge.Event{partyEv("codex", "", 1)}, []agentbridge.Receipt{rc("codex", "succeeded", ""), rc("claude", "running", "")},
			1, nil, []string{"claude"}, nil},
		{"both answered: round 2", sel, true,
			[]agentbridge.Event{partyEv("codex", "", 1), partyEv("claude", "", 1)}, nil,
			2, sel, sel, nil},
		{"round 2's receipt still says round 1's succeeded", sel, true,
			[]agentbridge.Event{partyEv("codex", "", 1), partyEv("claude", "", 1), partyEv("claude", "", 2)},
			[]agentbridge.Receipt{rc("codex", "succeeded", ""), rc("claude", "succeeded", "")},
			2, sel, []string{"codex"}, nil},
		{"round 2 done: one reacted, one passed", sel, true,
			[]agentbridge.Event{partyEv("codex", "", 1), partyEv("claude", "", 1), partyEv("claude", "", 2)},
			[]agentbridge.Receipt{rc("codex", "passed", ""), rc("claude", "succeeded", "")},
			3, sel, nil, []string{"First takes — answered: claude, codex.", "Reactions — answered: claude; passed: codex."}},
		{"a failure ends round 1 without reactions", sel, true,
			[]agentbridge.Event{partyEv("claude", "", 1), partyEv("coord", "codex", 1)},
			[]agentbridge.Receipt{rc("codex", "timeout", "")},
			3, nil, nil, []string{"answered: claude; failed: codex (timeout)", "fewer than two answered"}},
		{"skipped and waiting participants do not take part", []string{"claude", "codex", "gem"}, false,
			[]agentbridge.Event{partyEv("claude", "", 1)},
			[]agentbridge.Receipt{rc("codex", "skipped", "no adapter"), rc("gem", "queued", "waiting for a coordinator serving gem")},
			3, nil, nil, []string{"answered: claude.", "cross_talk is off"}},
		{"nobody selected", nil, true, nil, nil, 3, nil, nil, []string{"Nobody could take part"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PartyFromThread("T", tt.selected, tt.crossTalk, tt.evs, tt.rcs)
			if p.Stage != tt.stage || !slices.Equal(p.Reactors, tt.reactors) || !slices.Equal(p.Waiting, tt.waiting) {
				t.Errorf("stage %d reactors %q waiting %q, want %d %q %q", p.Stage, p.Reactors, p.Waiting, tt.stage, tt.reactors, tt.waiting)
			}
			if (p.Notice == "") != (tt.notice == nil) {
				t.Fatalf("notice = %q", p.Notice)
			}
			for _, want := range tt.notice {
				if !strings.Contains(p.Notice, want) {
					t.Errorf("notice %q does not say %q", p.Notice, want)
				}
			}
		})
	}
}

// TestPartyTurns counts each participant's round-1 turns once per trigger,
// error notices included, and no round-2 reply.
func TestPartyTurns(t *testing.T) {
	evs := []agentbridge.Event{partyEv("claude", "", 1), partyEv("claude", "", 2), partyEv("coord", "codex", 1), partyEv("codex", "", 0)}
	got := PartyTurns(evs)
	if len(got) != 2 || got["claude"] != 1 || got["codex"] != 1 {
		t.Errorf("turns = %v, want claude 1 and codex 1", got)
	}
}
