package coordinator

import (
	"encoding/json"
	"strconv"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
)

func TestSinceLastTurn(t *testing.T) {
	ev := func(seq int, from, typ string, private bool) agentbridge.Event {
		e := agentbridge.Event{ID: "e" + strconv.Itoa(seq), Seq: int64(seq), From: from, Type: typ, To: "all"}
		if private {
			e.Meta.Extra = map[string]json.RawMessage{"private": json.RawMessage("true")}
		}
		return e
	}
	seqs := func(evs []agentbridge.Event) []int64 {
		out := []int64{}
		for _, e := range evs {
			out = append(out, e.Seq)
		}
		return out
	}
	msg := agentbridge.TypeMessage
	tests := []struct {
		name   string
		events []agentbridge.Event
		want   []int64
	}{
		{"never replied: everything", []agentbridge.Event{ev(1, "user", "thread.created", false), ev(2, "user", msg, false)}, []int64{1, 2}},
		{"after the previous reply", []agentbridge.Event{ev(1, "user", msg, false), ev(2, "alice", msg, false), ev(3, "bob", msg, false), ev(4, "user", msg, false)}, []int64{3, 4}},
		{"the latest reply counts", []agentbridge.Event{ev(1, "alice", msg, false), ev(2, "user", msg, false), ev(3, "alice", msg, false), ev(4, "user", msg, false)}, []int64{4}},
		{"own private thinking is not a reply but is seen", []agentbridge.Event{ev(1, "alice", msg, false), ev(2, "alice", "thinking", true), ev(3, "user", msg, false)}, []int64{2, 3}},
		{"others' private events are left out", []agentbridge.Event{ev(1, "alice", msg, false), ev(2, "bob", "thinking", true), ev(3, "bob", msg, false)}, []int64{3}},
		{"a trigger from the participant itself is kept", []agentbridge.Event{ev(1, "user", msg, false), ev(2, "alice", msg, false)}, []int64{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := seqs(sinceLastTurn(tt.events, "alice"))
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}

	var long []agentbridge.Event
	for i := 1; i <= 300; i++ {
		long = append(long, ev(i, "user", msg, false))
	}
	got := sinceLastTurn(long, "alice")
	if len(got) != adapters.MaxSinceLastTurn || got[0].Seq != 101 || got[len(got)-1].Seq != 300 {
		t.Errorf("capped since_last_turn has %d events from %d to %d, want the last %d ending at the trigger", len(got), got[0].Seq, got[len(got)-1].Seq, adapters.MaxSinceLastTurn)
	}
}
