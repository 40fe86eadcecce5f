package bridge

import (
	"fmt"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestControlParsedOnce counts the parses of one control event on its way
// through the bridge (the handler, the credential check, Validate, Admit,
// the ignored check, the fold): 1, from a person and from a coordinator
// token, whose human-only keys Validate refuses from that same parse.
//
// It is not parallel: agentbridge.ControlParses counts the whole process,
// and Go runs no parallel test beside a sequential one.
func TestControlParsedOnce(t *testing.T) {
	ts := closedServer(t)
	ts.newThread("t1")
	_, coord := ts.mint(`{"scope":"coordinator","name":"c"}`)
	ts.as(coord).register("c", "claude")

	appends := []struct {
		who  string
		ts   *testServer
		body string
		want int
	}{
		{"person pauses", ts, `{"type":"control","from":"user","content":{"pause":{"on":true}}}`, 200},
		{"person uninvites someone not invited (ignored)", ts, `{"type":"control","from":"user","content":{"uninvite":{"participant_id":"nobody"}}}`, 200},
		{"coordinator invites", ts.as(coord), `{"type":"control","from":"c","content":{"invite":{"participant_id":"claude","profile":{"client":"claude","model":"m"}}}}`, 200},
		{"coordinator pauses (refused)", ts.as(coord), `{"type":"control","from":"c","content":{"pause":{"on":false}}}`, 403},
	}
	for _, a := range appends {
		before := agentbridge.ControlParses()
		got := a.ts.do("POST", "/threads/t1/events", a.body)
		if got.status != a.want {
			t.Fatalf("%s: %d %s, want %d", a.who, got.status, got.body, a.want)
		}
		if n := agentbridge.ControlParses() - before; n != 1 {
			t.Errorf("%s: the control was parsed %d times, want 1", a.who, n)
		}
		if strings.Contains(a.who, "ignored") && got.obj()["ignored"] == nil {
			t.Errorf("%s: %s, want an ignored note", a.who, got.body)
		}
		if a.want == 403 && (got.errCode() != agentbridge.ECodeForbiddenSender || !strings.Contains(string(got.body), "may not set pause")) {
			t.Errorf("%s: %s, want forbidden_sender naming pause", a.who, got.body)
		}
	}
	if st := ts.must(200, "GET", "/threads/t1/state", "").obj()["state"].(map[string]any); st["paused"] != true {
		t.Errorf("state after the appends: %v, want paused (the coordinator's pause refused)", st)
	}
	// /metrics exports the same count: nothing else parses meanwhile.
	want := fmt.Sprintf("agent_bridge_control_parses_total %d\n", agentbridge.ControlParses())
	if body := string(ts.must(200, "GET", "/metrics", "").body); !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q", want)
	}
}
