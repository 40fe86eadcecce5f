package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// claimAnswer decodes a POST /claims answer.
func claimAnswer(t testing.TB, a answer) agentbridge.ClaimResult {
	t.Helper()
	var res agentbridge.ClaimResult
	if err := json.Unmarshal(a.body, &res); err != nil {
		t.Fatalf("decode claim answer %s: %v", a.body, err)
	}
	return res
}

// registerTTL registers coordinator id on host serving agents with ttl.
func (ts *testServer) registerTTL(id, host string, ttl time.Duration, agents ...string) {
	ts.t.Helper()
	list := make([]map[string]string, 0, len(agents))
	for _, a := range agents {
		list = append(list, map[string]string{"name": a, "client": a, "kind": agentbridge.AgentKindAdapter})
	}
	b, _ := json.Marshal(map[string]any{"instance": "i-" + id, "host": host, "agents": list, "ttl_ms": ttl.Milliseconds()})
	ts.must(200, "PUT", "/coordinators/"+id, string(b))
}

// invite invites participants (client: their id) into thread.
func (ts *testServer) invite(thread string, participants ...string) {
	ts.t.Helper()
	for _, p := range participants {
		ts.must(200, "POST", "/threads/"+thread+"/events", `{"type":"control","from":"user","content":{"invite":{"participant_id":"`+p+`","profile":{"client":"`+p+`","model":"m"}}}}`)
	}
}

// claimBody is a POST /claims body for coordinator id (instance i-<id>).
func claimBody(id, event, participant string, extra ...string) string {
	s := fmt.Sprintf(`{"thread":"t1","event":%q,"participant":%q,"coordinator":%q,"instance":"i-%s"`, event, participant, id, id)
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

// TestClaimsOverHTTP: the first claimant wins at fence 1, a second live
// coordinator is told the holder; the holder's fenced writes pass, stale
// ones (reply, receipt, presence) get 409 fenced and store nothing; when
// the holder's heartbeat lapses the bridge marks the receipt interrupted
// and another coordinator takes the run over at fence 2, naming the old
// host; finishing is the holder's, and idempotent. Tokens claim as their
// own coordinator id only; agent tokens may not claim or list claims.
func TestClaimsOverHTTP(t *testing.T) {
	ts := closedServer(t, Options{ClaimSweep: 20 * time.Millisecond})
	ts.newThread("t1")
	ts.invite("t1", "claude")
	_, laptop := ts.mint(`{"scope":"coordinator","name":"laptop"}`)
	_, server := ts.mint(`{"scope":"coordinator","name":"server"}`)
	_, agent := ts.mint(`{"scope":"agent","name":"a","thread":"t1","participant":"claude"}`)
	trigger := ts.post("t1", "user", "@claude hello")

	if a := ts.as(laptop).do("POST", "/claims", claimBody("laptop", trigger.ID, "claude")); a.status != 409 || a.errCode() != agentbridge.ECodeNotRegistered {
		t.Fatalf("a claim before registering: %d %s, want 409 not_registered", a.status, a.body)
	}
	ts.as(laptop).registerTTL("laptop", "laptop.local", time.Minute, "claude")
	ts.as(server).registerTTL("server", "server.lan", time.Minute, "claude", "codex")
	if a := ts.as(laptop).do("POST", "/claims", claimBody("server", trigger.ID, "claude")); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenSender {
		t.Fatalf("laptop claims as server: %d %s, want 403", a.status, a.body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/claims", claimBody("laptop", trigger.ID, "claude")},
		{"GET", "/claims?thread=t1", ""},
	} {
		if a := ts.as(agent).do(c.method, c.path, c.body); a.status != 403 {
			t.Errorf("an agent token %s %s: %d %s, want 403", c.method, c.path, a.status, a.body)
		}
	}

	first := claimAnswer(t, ts.as(laptop).must(200, "POST", "/claims", claimBody("laptop", trigger.ID, "claude", `"client":"claude"`)))
	if !first.Granted || first.Claim.Fence != 1 || first.Claim.Host != "laptop.local" {
		t.Fatalf("first claim: %+v", first)
	}
	id := first.Claim.ID
	if again := claimAnswer(t, ts.as(laptop).must(200, "POST", "/claims", claimBody("laptop", trigger.ID, "claude"))); !again.Granted || again.Claim.Fence != 1 {
		t.Fatalf("the same claim again: %+v", again)
	}
	if other := claimAnswer(t, ts.as(server).must(200, "POST", "/claims", claimBody("server", trigger.ID, "claude"))); other.Granted || other.Claim.Coordinator != "laptop" || other.Claim.Host != "laptop.local" {
		t.Fatalf("the second claimant: %+v, want refused naming laptop", other)
	}

	fence := func(n int64) string { return agentbridge.ClaimHeader + ": " + agentbridge.FormatClaimHeader(id, n) }
	receipt := "/threads/t1/receipts/" + trigger.ID + "/claude"
	ts.as(laptop).must(200, "PUT", receipt, `{"from":"laptop","state":"running"}`, fence(1))
	ts.as(laptop).must(200, "POST", "/threads/t1/presence", `{"from":"claude","state":"typing"}`, fence(1))
	before := ts.eventCount("t1")
	for _, c := range []struct{ what, token, method, path, body, header string }{
		{"a reply with a stale fence", laptop, "POST", "/threads/t1/events", `{"from":"claude","content":"stale"}`, fence(2)},
		{"a reply by a coordinator that does not hold it", server, "POST", "/threads/t1/events", `{"from":"claude","content":"stale"}`, fence(1)},
		{"a receipt with a stale fence", laptop, "PUT", receipt, `{"from":"laptop","state":"failed"}`, fence(2)},
		{"presence with a stale fence", laptop, "POST", "/threads/t1/presence", `{"from":"claude","state":"idle"}`, fence(2)},
	} {
		if a := ts.as(c.token).do(c.method, c.path, c.body, c.header); a.status != 409 || a.errCode() != agentbridge.ECodeFenced {
			t.Errorf("%s: %d %s, want 409 fenced", c.what, a.status, a.body)
		}
	}
	if a := ts.as(laptop).do("POST", "/threads/t1/events", `{"from":"claude","content":"x"}`, agentbridge.ClaimHeader+": 1"); a.status != 400 || a.errCode() != agentbridge.ECodeInvalidField {
		t.Errorf("a malformed %s header: %d %s, want 400 invalid_field", agentbridge.ClaimHeader, a.status, a.body)
	}
	if got := ts.eventCount("t1"); got != before {
		t.Fatalf("refused writes stored events: %d, want %d", got, before)
	}
	if list := ts.receiptsOf("/threads/t1/receipts?event=" + trigger.ID); len(list) != 1 || list[0].State != agentbridge.ReceiptRunning {
		t.Fatalf("receipts after a refused one: %+v", list)
	}

	// The laptop goes quiet: the bridge interrupts its run's receipt and
	// the server takes the run over.
	ts.as(laptop).registerTTL("laptop", "laptop.local", 200*time.Millisecond, "claude")
	waitFor(t, 10*time.Second, "the interrupted receipt", func() bool {
		list := ts.receiptsOf("/threads/t1/receipts?event=" + trigger.ID)
		return len(list) == 1 && list[0].State == agentbridge.ReceiptInterrupted && list[0].Reason == "laptop.local offline"
	})
	var claimable agentbridge.ClaimsResponse
	if err := json.Unmarshal(ts.as(server).must(200, "GET", "/claims?claimable=server", "").body, &claimable); err != nil || len(claimable.Claims) != 1 || claimable.Claims[0].ID != id {
		t.Fatalf("claimable by server: %+v %v", claimable, err)
	}
	took := claimAnswer(t, ts.as(server).must(200, "POST", "/claims", claimBody("server", trigger.ID, "claude")))
	if !took.Granted || took.Claim.Fence != 2 || took.PreviousHost != "laptop.local" || took.Claim.Host != "server.lan" {
		t.Fatalf("the takeover: %+v", took)
	}
	a := ts.as(laptop).do("POST", "/threads/t1/events", `{"from":"claude","content":"back from a partition"}`, fence(1))
	if a.status != 409 || a.errCode() != agentbridge.ECodeFenced || !strings.Contains(string(a.body), "claimed again by server on server.lan (fence 2)") {
		t.Fatalf("the old holder's reply: %d %s, want 409 fenced naming the new holder", a.status, a.body)
	}
	ts.as(server).must(200, "POST", "/threads/t1/events", `{"from":"claude","content":"the answer"}`, fence(2))

	done := fmt.Sprintf("/claims/%d/done", id)
	if a := ts.as(laptop).do("POST", done, `{"coordinator":"laptop","instance":"i-laptop","fence":1}`); a.status != 409 || a.errCode() != agentbridge.ECodeFenced {
		t.Fatalf("the old holder finishes: %d %s", a.status, a.body)
	}
	for range 2 {
		if a := ts.as(server).must(200, "POST", done, `{"coordinator":"server","instance":"i-server","fence":2}`); !strings.Contains(string(a.body), `"state":"done"`) {
			t.Fatalf("finish: %s", a.body)
		}
	}
	var list agentbridge.ClaimsResponse
	if err := json.Unmarshal(ts.must(200, "GET", "/claims?thread=t1", "").body, &list); err != nil || len(list.Claims) != 1 || list.Claims[0].State != agentbridge.ClaimDone {
		t.Fatalf("a person lists the thread's claims: %+v %v", list, err)
	}
	_, read := ts.mint(`{"scope":"read","name":"viewer"}`)
	ts.as(read).must(200, "GET", "/claims?thread=t1", "")
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/claims?claimable=server", ""},
		{"POST", "/claims", claimBody("server", trigger.ID, "claude")},
	} {
		if a := ts.as(read).do(c.method, c.path, c.body); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenScope {
			t.Errorf("a read token %s %s: %d %s, want 403 forbidden_scope", c.method, c.path, a.status, a.body)
		}
	}
	var coords agentbridge.CoordinatorsResponse
	if err := json.Unmarshal(ts.must(200, "GET", "/coordinators", "").body, &coords); err != nil || coords.ServedEver != nil {
		t.Fatalf("served_ever without asking: %+v %v, want none", coords.ServedEver, err)
	}
	if err := json.Unmarshal(ts.must(200, "GET", "/coordinators?served_ever=claude&client=codex", "").body, &coords); err != nil ||
		len(coords.ServedEver) != 2 || coords.ServedEver["claude"] != "claude" || coords.ServedEver["codex"] != "codex" {
		t.Fatalf("served_ever of claude or client codex: %+v %v", coords.ServedEver, err)
	}
}

// TestWaitingClaimExpiresOnce: a claim for a participant nobody serves
// waits with a queued receipt; past its ttl it expires with exactly one
// error message from the bridge and a failed receipt, although two
// bridges sweep the same store.
func TestWaitingClaimExpiresOnce(t *testing.T) {
	ts := newTestServer(t, Options{ClaimSweep: 10 * time.Millisecond})
	serve(t, ts.store, Options{ClaimSweep: 10 * time.Millisecond}) // a second bridge on the same store
	ts.newThread("t1")
	ts.invite("t1", "ghost")
	trigger := ts.post("t1", "user", "@ghost hello")
	ts.registerTTL("server", "server.lan", time.Minute, "codex")
	res := claimAnswer(t, ts.must(200, "POST", "/claims", claimBody("server", trigger.ID, "ghost", `"wait":true`, `"pending_ttl_ms":300`)))
	if res.Granted || res.Claim.State != agentbridge.ClaimWaiting || res.Claim.ExpiresAt == "" {
		t.Fatalf("a waiting claim: %+v", res)
	}
	waitFor(t, 10*time.Second, "the failed receipt", func() bool {
		list := ts.receiptsOf("/threads/t1/receipts?event=" + trigger.ID)
		return len(list) == 1 && list[0].State == agentbridge.ReceiptFailed
	})
	waitFor(t, 10*time.Second, "nothing left to sweep", func() bool {
		due, err := ts.store.DueClaims(context.Background())
		return err == nil && len(due) == 0
	})
	evs, err := ts.store.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: "t1", After: -1})
	if err != nil {
		t.Fatal(err)
	}
	var notices []agentbridge.Event
	for _, e := range evs {
		if e.From == agentbridge.ClaimSender {
			notices = append(notices, e)
		}
	}
	if len(notices) != 1 || notices[0].Text() != agentbridge.ExpiredNotice("ghost", 300*time.Millisecond, 1) ||
		notices[0].Meta.ReplyTo != trigger.ID || !notices[0].Meta.HasTag("error") {
		t.Fatalf("the bridge's notices: %+v, want exactly one", notices)
	}
}
