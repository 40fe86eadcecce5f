package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// testSceneState: a scene's turn counts live in the stored state, so
// State(at) answers them for any revision; a scene with an uninvited actor,
// or a second one while one runs, is refused with nothing stored.
func testSceneState(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	th := NewThread(t, s, "t").ID
	MustAppend(t, s, th, Control("user", `{"invite":{"participant_id":"maria","profile":{"client":"c","model":"m","character":"sheet"}}}`))
	_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: Control("user", `{"scene":{"on":true,"actors":["maria","sam"]}}`)})
	WantCode(t, err, agentbridge.ECodeInvalidControl)
	MustAppend(t, s, th, Control("user", `{"invite":{"participant_id":"sam","profile":{"client":"c","model":"m"}}}`))
	MustAppend(t, s, th, Control("user", `{"scene":{"on":true,"actors":["maria","sam"],"soft_cap":1,"hard_cap":2}}`))
	speech := func(from, to string, turn int) agentbridge.Event {
		in := Msg(from, from+" speaks")
		in.To = to
		in.Meta.Extra = map[string]json.RawMessage{agentbridge.MetaScene: json.RawMessage(fmt.Sprintf(`{"turn":%d}`, turn))}
		return MustAppend(t, s, th, in)
	}
	first := speech("maria", "sam", 1)
	MustAppend(t, s, th, Msg("user", "an aside, not a turn"))
	speech("sam", "maria", 2)
	st, _, err := s.State(ctx, th, first.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if st.Scene == nil || st.Scene.Turns["maria"] != 1 || st.Scene.Turns["sam"] != 0 || st.Scene.Next != "sam" {
		t.Fatalf("scene at seq %d: %+v", first.Seq, st.Scene)
	}
	if inv, _ := st.Invited("maria"); inv.Profile.Character != "sheet" {
		t.Errorf("character not kept: %+v", inv.Profile)
	}
	st, _, _ = s.State(ctx, th, 0)
	if st.Scene.Turn != 2 || !st.Scene.Running() {
		t.Fatalf("scene now: %+v", st.Scene)
	}
	_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: Control("user", `{"scene":{"on":true,"actors":["maria","sam"]}}`)})
	WantCode(t, err, agentbridge.ECodeInvalidControl)
	speech("maria", "sam", 3)
	st, _, _ = s.State(ctx, th, 0)
	if st.Scene.Status != agentbridge.SceneClosing || st.Scene.CloseReason != agentbridge.CloseHardCap {
		t.Fatalf("after maria's second turn (hard cap 2): %+v", st.Scene)
	}
}
