package bridge

import (
	"encoding/json"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestCoordinatorRegistersAsItself: a coordinator token registers,
// heartbeats and removes only the registration of its own coordinator id
// (its participant, else its name); a person token any.
func TestCoordinatorRegistersAsItself(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	_, bound := ts.mint(`{"scope":"coordinator","name":"laptop-token","participant":"laptop"}`)
	_, named := ts.mint(`{"scope":"coordinator","name":"server"}`)
	body := `{"instance":"i1","host":"h","agents":[{"name":"claude","kind":"adapter"}]}`
	for _, c := range []struct{ who, token, id string }{
		{"bound token as another", bound, "server"},
		{"bound token under its name", bound, "laptop-token"},
		{"named token as another", named, "laptop"},
	} {
		if a := ts.as(c.token).do("PUT", "/coordinators/"+c.id, body); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenSender {
			t.Errorf("%s registers %s: %d %s, want 403 forbidden_sender", c.who, c.id, a.status, a.body)
		}
	}
	ts.as(bound).must(200, "PUT", "/coordinators/laptop", body)
	ts.as(named).must(200, "PUT", "/coordinators/server", `{"instance":"i2","host":"h","agents":[]}`)
	if a := ts.as(named).do("DELETE", "/coordinators/laptop?instance=i1", ""); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenSender {
		t.Errorf("another coordinator removes laptop: %d %s", a.status, a.body)
	}
	list := ts.must(200, "GET", "/coordinators", "").obj()["coordinators"].([]any)
	if len(list) != 2 {
		t.Fatalf("registrations = %v, want laptop and server", list)
	}
	ts.as(bound).must(204, "DELETE", "/coordinators/laptop?instance=i1", "")
	ts.must(200, "PUT", "/coordinators/anyone", `{"instance":"i3","host":"h","agents":[]}`)
	ts.must(204, "DELETE", "/coordinators/server?instance=i2", "")
}

// TestCoordinatorWritesAsItsAgents: a coordinator token writes (posts,
// presence, agent tokens) as its coordinator id and the agents its latest
// registration lists, by name or by the invited profile's client, also
// once its heartbeat lapsed; not as another coordinator's agent, nor
// before it registers. Its receipts are from its id, for those, or for a
// participant no live coordinator serves.
func TestCoordinatorWritesAsItsAgents(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	ts.newThread("t1")
	ts.must(200, "POST", "/threads/t1/events", `{"type":"control","from":"user","content":{"invite":{"participant_id":"claude-2","profile":{"client":"claude","model":"m"}}}}`)
	_, laptop := ts.mint(`{"scope":"coordinator","name":"laptop"}`)
	_, server := ts.mint(`{"scope":"coordinator","name":"server"}`)
	trigger := ts.post("t1", "user", "hello")

	// Before registering, only as itself.
	if a := ts.as(laptop).do("POST", "/threads/t1/events", `{"from":"claude","content":"early"}`); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenSender {
		t.Errorf("unregistered coordinator as claude: %d %s", a.status, a.body)
	}
	ts.as(laptop).must(200, "POST", "/threads/t1/events", `{"from":"laptop","content":"a notice"}`)

	lc := map[string]any{"instance": "l", "host": "laptop", "ttl_ms": 1,
		"agents": []map[string]string{{"name": "claude", "client": "claude", "kind": "adapter"}}}
	b, _ := json.Marshal(lc)
	ts.as(laptop).must(200, "PUT", "/coordinators/laptop", string(b))
	ts.as(server).register("server", "codex")

	before := ts.eventCount("t1")
	refusals := []struct{ who, token, method, path, body string }{
		{"laptop as codex", laptop, "POST", "/threads/t1/events", `{"from":"codex","content":"x"}`},
		{"laptop as server", laptop, "POST", "/threads/t1/events", `{"from":"server","content":"x"}`},
		{"laptop presence as codex", laptop, "POST", "/threads/t1/presence", `{"from":"codex","state":"typing"}`},
		{"laptop mints for codex", laptop, "POST", "/auth/tokens", `{"scope":"agent","name":"r","thread":"t1","participant":"codex"}`},
		{"server as claude", server, "POST", "/threads/t1/events", `{"from":"claude","content":"x"}`},
		{"laptop receipt from server", laptop, "PUT", "/threads/t1/receipts/" + trigger.ID + "/claude", `{"from":"server","state":"running"}`},
		{"laptop receipt for codex", laptop, "PUT", "/threads/t1/receipts/" + trigger.ID + "/codex", `{"from":"laptop","state":"skipped","reason":"no adapter"}`},
	}
	for _, c := range refusals {
		if a := ts.as(c.token).do(c.method, c.path, c.body); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenSender {
			t.Errorf("%s: %d %s, want 403 forbidden_sender", c.who, a.status, a.body)
		}
	}
	if n := ts.eventCount("t1"); n != before {
		t.Errorf("%d events stored by the refusals", n-before)
	}
	if a := ts.must(200, "GET", "/threads/t1/receipts", "").obj()["receipts"].([]any); len(a) != 0 {
		t.Errorf("receipts stored by the refusals: %v", a)
	}

	// Its ttl of 1 ms has lapsed: the latest registration still counts.
	ts.as(laptop).must(200, "POST", "/threads/t1/events", `{"from":"claude","content":"reply"}`)
	ts.as(laptop).must(200, "POST", "/threads/t1/events", `{"from":"claude-2","content":"by client"}`)
	ts.as(laptop).must(200, "POST", "/threads/t1/presence", `{"from":"claude","state":"typing"}`)
	ts.as(laptop).mint(`{"scope":"agent","name":"r","thread":"t1","participant":"claude"}`)
	ts.as(server).must(200, "POST", "/threads/t1/events", `{"from":"codex","content":"reply"}`)
	ts.as(laptop).must(200, "PUT", "/threads/t1/receipts/"+trigger.ID+"/claude", `{"from":"laptop","state":"running"}`)
	// gemini: no live coordinator serves it, so any may say so.
	ts.as(laptop).must(200, "PUT", "/threads/t1/receipts/"+trigger.ID+"/gemini", `{"from":"laptop","state":"skipped","reason":"no adapter"}`)
}

// TestAgentTokenLimits: an agent token writes no receipt, may not put the
// coordinator's marks (meta.permission, meta.participant, the tags
// coordinator, permission, question, error) on a message, reads no
// /metrics, devices or push subscriptions; a coordinator token posts the
// marks, and a read token reads /metrics but no devices.
func TestAgentTokenLimits(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	ts.newThread("t1")
	trigger := ts.post("t1", "user", "hello")
	_, agent := ts.mint(`{"scope":"agent","name":"run","thread":"t1","participant":"claude"}`)
	_, coord := ts.mint(`{"scope":"coordinator","name":"c"}`)
	_, read := ts.mint(`{"scope":"read","name":"r"}`)
	ts.as(coord).register("c", "claude")

	if a := ts.as(agent).do("PUT", "/threads/t1/receipts/"+trigger.ID+"/claude", `{"from":"claude","state":"replied"}`); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenScope {
		t.Errorf("agent writes a receipt: %d %s, want 403 forbidden_scope", a.status, a.body)
	}
	marked := []string{
		`{"from":"claude","content":"may I?","meta":{"permission":{"invocation":"1","tool_call":"t","options":[{"id":"a","name":"A","kind":"allow_once"}]}}}`,
		`{"from":"claude","content":"x","meta":{"participant":"codex"}}`,
		`{"from":"claude","content":"x","meta":{"tags":["coordinator"]}}`,
		`{"from":"claude","content":"x","meta":{"tags":["fyi","permission"]}}`,
		`{"from":"claude","content":"x","meta":{"tags":["question"]}}`,
		`{"from":"claude","content":"x","meta":{"tags":["error"]}}`,
	}
	before := ts.eventCount("t1")
	for _, body := range marked {
		if a := ts.as(agent).do("POST", "/threads/t1/events", body); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenSender {
			t.Errorf("agent posts %s: %d %s, want 403 forbidden_sender", body, a.status, a.body)
		}
	}
	if n := ts.eventCount("t1"); n != before {
		t.Errorf("%d marked events stored", n-before)
	}
	ts.as(agent).must(200, "POST", "/threads/t1/events", `{"from":"claude","content":"x","meta":{"tags":["fyi"]}}`)
	ts.as(coord).must(200, "POST", "/threads/t1/events", `{"from":"claude","content":"a question","meta":{"tags":["coordinator","question"],"participant":"claude"}}`)

	for _, path := range []string{"/metrics", "/devices", "/push/subscriptions"} {
		if a := ts.as(agent).do("GET", path, ""); a.status != 403 {
			t.Errorf("agent reads %s: %d %s", path, a.status, a.body)
		}
	}
	for _, path := range []string{"/devices", "/push/subscriptions"} {
		for _, tok := range []string{coord, read} {
			if a := ts.as(tok).do("GET", path, ""); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenScope {
				t.Errorf("a limited token reads %s: %d %s", path, a.status, a.body)
			}
		}
		ts.must(200, "GET", path, "")
	}
	ts.as(read).must(200, "GET", "/metrics", "")
	ts.as(coord).must(200, "GET", "/metrics", "")
}

// TestLimitedCookieLogsIn: a browser whose cookie is a limited token's
// still logs in with a login code and pairs with a pairing code.
func TestLimitedCookieLogsIn(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	_, read := ts.mint(`{"scope":"read","name":"r"}`)
	code, err := ts.srv.NewLoginCode()
	if err != nil {
		t.Fatal(err)
	}
	browser := ts.as("")
	cookie := "Cookie: " + TokenCookie + "=" + read
	browser.must(200, "POST", "/auth/login", `{"code":"`+code+`"}`, cookie)
	pair := ts.must(200, "POST", "/auth/pair", `{"name":"phone"}`).obj()
	browser.must(200, "POST", "/auth/pair/redeem", `{"code":"`+pair["code"].(string)+`"}`, cookie)
}
