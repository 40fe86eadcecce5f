package storetest

import (
	"context"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// testAppendIgnored: the store decides an append's "ignored" note
// (agentbridge.IgnoredEffect) from the thread's state before the event,
// read under the write, so the bridge needs no state read of its own; a
// replay carries none (its state before is not at hand).
func testAppendIgnored(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	NewThread(t, s, "t")
	ctx := context.Background()
	to := func(participant string) agentbridge.EventInput {
		in := Msg("user", "hi")
		in.To = participant
		return in
	}
	steps := []struct {
		name string
		in   agentbridge.EventInput
		want string
	}{
		{"message to a stranger", to("codex"), agentbridge.IgnoredNotInvited},
		{"invite", Control("user", `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m"}}}`), ""},
		{"message to the invited", to("codex"), ""},
		{"message to all", Msg("user", "hi"), ""},
		{"pause from an agent", Control("codex", `{"pause":{"on":true}}`), agentbridge.IgnoredNotHuman},
		{"pause", Control("user", `{"pause":{"on":true}}`), ""},
		{"message while paused", to("codex"), agentbridge.IgnoredPaused},
		{"uninvite of a stranger", Control("user", `{"uninvite":{"participant_id":"gemini"}}`), agentbridge.IgnoredNotInvited},
		{"scene off without one", Control("user", `{"scene":{"on":false}}`), agentbridge.IgnoredNoScene},
	}
	for i, st := range steps {
		res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: st.in, IdempotencyKey: string(rune('a' + i))})
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		code := ""
		if res.Ignored != nil {
			code = res.Ignored.Code
		}
		if code != st.want {
			t.Errorf("%s: ignored %+v, want code %q", st.name, res.Ignored, st.want)
		}
	}
	res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: to("codex"), IdempotencyKey: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Replayed || res.Ignored != nil {
		t.Errorf("replay: replayed %v, ignored %+v; want a replay without a note", res.Replayed, res.Ignored)
	}
}
