package bridge

import (
	"fmt"
	"testing"
)

// TestPartyControl checks that a party control naming an agent who is not
// invited is refused with the id named and nothing stored, and that an
// accepted one shows in the state, now and as of its revision.
func TestPartyControl(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t")
	ts.must(200, "POST", "/threads/t/events", `{"type":"control","from":"user","content":{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m","expertise":["go","databases"]}}}}`)
	head := ts.head()
	a := ts.must(400, "POST", "/threads/t/events", `{"type":"control","from":"user","content":{"party":{"on":true,"agents":["codex","ghost"]}}}`)
	if a.errCode() != "invalid_control" || a.errField("participant") != "ghost" || a.errField("field") != "content.party.agents" {
		t.Fatalf("unknown agent: %s", a.body)
	}
	a = ts.must(400, "POST", "/threads/t/events", `{"type":"control","from":"user","content":{"party":{"on":true,"max_agents":"two"}}}`)
	if a.errCode() != "invalid_control" || a.errField("field") != "content.party.max_agents" {
		t.Fatalf("bad max_agents: %s", a.body)
	}
	if ts.head() != head {
		t.Fatalf("a refused party control was stored")
	}
	ts.must(200, "POST", "/threads/t/events", `{"type":"control","from":"user","content":{"party":{"on":true,"agents":["codex"],"max_agents":1}}}`)
	st := ts.must(200, "GET", "/threads/t/state", "").obj()["state"].(map[string]any)
	if got := fmt.Sprint(st["party"]); got != "map[agents:[codex] cross_talk:true max_agents:1 on:true]" {
		t.Fatalf("party = %s", got)
	}
	inv := st["participants"].(map[string]any)["invited"].([]any)[0].(map[string]any)
	if got := fmt.Sprint(inv["profile"].(map[string]any)["expertise"]); got != "[go databases]" {
		t.Fatalf("expertise = %s", got)
	}
	ts.post("t", "user", "thanks all, goodbye")
	st = ts.must(200, "GET", "/threads/t/state", "").obj()["state"].(map[string]any)
	if on := st["party"].(map[string]any)["on"]; on != false {
		t.Fatalf("party still on after goodbye: %v", st["party"])
	}
	at := ts.must(200, "GET", "/threads/t/state?at=3", "").obj()["state"].(map[string]any)
	if on := at["party"].(map[string]any)["on"]; on != true {
		t.Fatalf("party at 3 = %v", at["party"])
	}
}
