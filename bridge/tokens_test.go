package bridge

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// closedServer is a server that needs a credential, with a person token
// made in its store as serve makes the first one; ts.token is that token.
func closedServer(t *testing.T, opts ...Options) *testServer {
	t.Helper()
	o := Options{}
	if len(opts) > 0 {
		o = opts[0]
	}
	o.RequireCredential = true
	ts := newTestServer(t, o)
	secret, err := agentbridge.NewTokenSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.store.CreateToken(context.Background(), agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: "owner", CreatedBy: "serve"}, agentbridge.HashToken(secret)); err != nil {
		t.Fatal(err)
	}
	ts.token = secret
	return ts
}

// mint creates a token through the API with the credential of ts.token
// and returns its id and secret.
func (ts *testServer) mint(body string) (id, secret string) {
	ts.t.Helper()
	a := ts.must(http.StatusOK, "POST", "/auth/tokens", body)
	var out struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(a.body, &out); err != nil || out.ID == "" || out.Token == "" {
		ts.t.Fatalf("token answer %s: %v", a.body, err)
	}
	return out.ID, out.Token
}

// as returns a client of the same server with another token ("" for none).
func (ts *testServer) as(token string) *testServer {
	c := *ts
	c.token = token
	return &c
}

// register registers coordinator id serving agents (adapters) with the
// credential of ts.token.
func (ts *testServer) register(id string, agents ...string) {
	ts.t.Helper()
	list := make([]map[string]string, 0, len(agents))
	for _, a := range agents {
		list = append(list, map[string]string{"name": a, "kind": agentbridge.AgentKindAdapter})
	}
	b, _ := json.Marshal(map[string]any{"instance": "i-" + id, "host": "h", "agents": list})
	ts.must(http.StatusOK, "PUT", "/coordinators/"+id, string(b))
}

// eventCount is how many events the store holds in thread.
func (ts *testServer) eventCount(thread string) int {
	ts.t.Helper()
	evs, err := ts.store.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		ts.t.Fatal(err)
	}
	return len(evs)
}

// TestTokensAPI: a person token creates, lists and revokes tokens; the
// list never holds a secret; whoami answers each credential's scope and
// binding; a revoked token is refused at once; without a token, or with a
// wrong one, everything but the open routes is 401.
func TestTokensAPI(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	ts.newThread("t1")
	for _, path := range []string{"/threads", "/auth/whoami", "/auth/tokens"} {
		if a := ts.as("").do("GET", path, ""); a.status != 401 {
			t.Errorf("GET %s without a token: %d, want 401", path, a.status)
		}
		if a := ts.as("abt_wrong").do("GET", path, ""); a.status != 401 {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, a.status)
		}
	}
	ts.as("").must(200, "GET", "/ping", "")

	readID, read := ts.mint(`{"scope":"read","name":"dashboard"}`)
	_, agent := ts.mint(`{"scope":"agent","name":"run-1","thread":"t1","participant":"claude","ttl_s":60}`)
	who := ts.as(agent).must(200, "GET", "/auth/whoami", "").obj()
	if who["scope"] != "agent" || who["thread"] != "t1" || who["participant"] != "claude" || who["open"] != false || who["sender"] != "claude" {
		t.Errorf("whoami(agent) = %v", who)
	}
	// A person token writes as the bridge's human (the web UI posts as
	// sender), a read token as nobody.
	if who := ts.must(200, "GET", "/auth/whoami", "").obj(); who["scope"] != "person" || who["name"] != "owner" || who["sender"] != "user" {
		t.Errorf("whoami(person) = %v", who)
	}
	if who := ts.as(read).must(200, "GET", "/auth/whoami", "").obj(); who["sender"] != nil {
		t.Errorf("whoami(read) = %v, want no sender", who)
	}

	list := ts.must(200, "GET", "/auth/tokens", "")
	var out struct{ Tokens []map[string]any }
	if err := json.Unmarshal(list.body, &out); err != nil || len(out.Tokens) != 3 {
		t.Fatalf("list = %s (%v)", list.body, err)
	}
	for _, tok := range out.Tokens {
		if _, ok := tok["token"]; ok {
			t.Errorf("the list shows a secret: %v", tok)
		}
	}
	if a := ts.as(read).do("GET", "/auth/tokens", ""); a.status != 403 || a.errCode() != agentbridge.ECodeForbiddenScope {
		t.Errorf("list with a read token: %d %s, want 403 forbidden_scope", a.status, a.body)
	}

	for _, bad := range []struct{ body, code string }{
		{`{"scope":"root","name":"x"}`, agentbridge.ECodeInvalidField},
		{`{"scope":"agent","name":"x","thread":"t1"}`, agentbridge.ECodeMissingField},
		{`{"scope":"agent","name":"x","thread":"t1","participant":"claude","ttl_s":999999}`, agentbridge.ECodeInvalidField},
		{`{"scope":"agent","name":"x","thread":"nope","participant":"claude"}`, agentbridge.ECodeThreadNotFound},
		{`{"scope":"read","name":"x","thread":"t1"}`, agentbridge.ECodeFieldNotAllowed},
		{`{"scope":"read"}`, agentbridge.ECodeMissingField},
	} {
		if a := ts.do("POST", "/auth/tokens", bad.body); a.errCode() != bad.code {
			t.Errorf("POST /auth/tokens %s: %d %s, want %s", bad.body, a.status, a.body, bad.code)
		}
	}

	ts.as(read).must(200, "GET", "/threads", "")
	revoked := ts.must(200, "DELETE", "/auth/tokens/"+readID, "").obj()
	if revoked["revoked_at"] == "" || revoked["revoked_at"] == nil {
		t.Errorf("revoke answer = %v", revoked)
	}
	// A refused token is named as the field, and the sentence says why:
	// a signed-out device can say so.
	if a := ts.as(read).do("GET", "/threads", ""); a.status != 401 || !strings.Contains(string(a.body), `"field":"token"`) ||
		!strings.Contains(string(a.body), `This token (\"dashboard\") was revoked at `) {
		t.Errorf("a revoked token: %d %s, want 401 saying it was revoked", a.status, a.body)
	}
	if a := ts.as("abt_wrong").do("GET", "/threads", ""); a.status != 401 || !strings.Contains(string(a.body), "This token is not known here") {
		t.Errorf("an unknown token: %d %s, want 401 saying it is not known", a.status, a.body)
	}
	if a := ts.do("DELETE", "/auth/tokens/01ZZZZZZZZZZZZZZZZZZZZZZZZ", ""); a.status != 404 || a.errCode() != agentbridge.ECodeTokenNotFound {
		t.Errorf("revoke an unknown id: %d %s", a.status, a.body)
	}
}

// TestRevokedWithinASecond: a token revoked in the store directly (as a
// second bridge on the same database would) is trusted from the cache
// until its entry is credentialTTL old, and refused from then on; the
// cache's clock is the server's, moved by the test. credentialTTL is at
// most half the contract's second, the status API's whoami cache the
// other half (coordinator's TestStatusCredentialTTL).
func TestRevokedWithinASecond(t *testing.T) {
	t.Parallel()
	if credentialTTL > 500*time.Millisecond {
		t.Fatalf("credentialTTL = %s, want at most 500ms", credentialTTL)
	}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	move := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	ts := closedServer(t, Options{Now: clock})
	id, read := ts.mint(`{"scope":"read","name":"r"}`)
	ts.as(read).must(200, "GET", "/threads", "") // cached now
	if _, err := ts.store.RevokeToken(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	move(credentialTTL - time.Millisecond)
	if a := ts.as(read).do("GET", "/threads", ""); a.status != 200 {
		t.Fatalf("within the cache's life: %d %s, want 200 from the cache", a.status, a.body)
	}
	move(time.Millisecond)
	if a := ts.as(read).do("GET", "/threads", ""); a.status != 401 {
		t.Errorf("%s after the lookup: %d %s, want 401", credentialTTL, a.status, a.body)
	}
}

// TestCredentialBindsTheSender: a coordinator token may not post as a
// human, pause or answer a permission request; an agent token may not
// post as another participant or in another thread, nor set a control
// only a person may; a read token writes nothing. Each refusal is 403 and
// stores nothing; the allowed writes pass.
func TestCredentialBindsTheSender(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	ts.newThread("t1")
	ts.newThread("t2")
	_, coord := ts.mint(`{"scope":"coordinator","name":"coord","participant":"coordinator"}`)
	_, agent := ts.mint(`{"scope":"agent","name":"run","thread":"t1","participant":"claude"}`)
	_, read := ts.mint(`{"scope":"read","name":"r"}`)
	ts.as(coord).register("coordinator", "codex")
	var req agentbridge.Event
	{
		a := ts.must(200, "POST", "/threads/t1/events", `{"from":"coordinator","content":"codex asks: may I run rm?","meta":{"permission":{"invocation":"inv1","tool_call":"tc1","options":[{"id":"allow","name":"Allow","kind":"allow_once"}]}}}`)
		var out struct{ Event agentbridge.Event }
		if err := json.Unmarshal(a.body, &out); err != nil {
			t.Fatal(err)
		}
		req = out.Event
	}

	refusals := []struct {
		who, token, thread, body, code string
	}{
		{"coordinator as user", coord, "t1", `{"from":"user","content":"hi"}`, agentbridge.ECodeForbiddenSender},
		{"coordinator pauses", coord, "t1", `{"type":"control","from":"coordinator","content":{"pause":{"on":true}}}`, agentbridge.ECodeForbiddenSender},
		{"coordinator answers", coord, "t1", `{"type":"control","from":"coordinator","content":{"permission":{"event":"` + req.ID + `","option":"allow"}}}`, agentbridge.ECodeForbiddenSender},
		{"agent as another", agent, "t1", `{"from":"codex","content":"hi"}`, agentbridge.ECodeForbiddenSender},
		{"agent in another thread", agent, "t2", `{"from":"claude","content":"hi"}`, agentbridge.ECodeForbiddenSender},
		{"agent as user", agent, "t1", `{"from":"user","content":"hi"}`, agentbridge.ECodeForbiddenSender},
		{"agent unmutes", agent, "t1", `{"type":"control","from":"claude","content":{"unmute":{"targets":["claude"]}}}`, agentbridge.ECodeForbiddenSender},
		{"agent invites", agent, "t1", `{"type":"control","from":"claude","content":{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m"}}}}`, agentbridge.ECodeForbiddenSender},
		{"read writes", read, "t1", `{"from":"claude","content":"hi"}`, agentbridge.ECodeForbiddenScope},
	}
	for _, c := range refusals {
		before := ts.eventCount(c.thread)
		a := ts.as(c.token).do("POST", "/threads/"+c.thread+"/events", c.body)
		if a.status != 403 || a.errCode() != c.code {
			t.Errorf("%s: %d %s, want 403 %s", c.who, a.status, a.body, c.code)
		}
		if after := ts.eventCount(c.thread); after != before {
			t.Errorf("%s: %d events stored", c.who, after-before)
		}
	}
	if a := ts.as(agent).do("POST", "/threads/t1/presence", `{"from":"codex","state":"typing"}`); a.status != 403 {
		t.Errorf("agent presence as another: %d %s", a.status, a.body)
	}
	for _, path := range []string{"/threads/t2/events", "/threads", "/events", "/events/stream", "/suggestions"} {
		if a := ts.as(agent).do("GET", path, ""); a.status != 403 {
			t.Errorf("agent reads %s: %d %s", path, a.status, a.body)
		}
	}
	if a := ts.as(coord).do("POST", "/auth/tokens", `{"scope":"person","name":"p"}`); a.status != 403 {
		t.Errorf("coordinator mints a person token: %d %s", a.status, a.body)
	}
	if a := ts.as(coord).do("POST", "/auth/tokens", `{"scope":"agent","name":"p","thread":"t1","participant":"user"}`); a.status != 403 {
		t.Errorf("coordinator mints an agent token for a human: %d %s", a.status, a.body)
	}

	ts.as(coord).must(200, "POST", "/threads/t1/events", `{"from":"codex","content":"a reply"}`)
	ts.as(coord).must(200, "POST", "/threads/t1/events", `{"from":"coordinator","content":"a notice"}`)
	ts.as(agent).must(200, "POST", "/threads/t1/events", `{"from":"claude","content":"mine"}`)
	ts.as(agent).must(200, "POST", "/threads/t1/presence", `{"from":"claude","state":"typing"}`)
	ts.as(agent).must(200, "GET", "/threads/t1/events", "")
	ts.must(200, "POST", "/threads/t1/events", `{"type":"control","from":"user","content":{"permission":{"event":"`+req.ID+`","option":"allow"}}}`)

	// The coordinator mints and revokes its per-run tokens.
	run := ts.as(coord)
	id, runTok := run.mint(`{"scope":"agent","name":"run-2","thread":"t1","participant":"codex"}`)
	ts.as(runTok).must(200, "POST", "/threads/t1/events", `{"from":"codex","content":"from the run"}`)
	run.must(200, "DELETE", "/auth/tokens/"+id, "")
	if a := ts.as(runTok).do("GET", "/threads/t1/events", ""); a.status != 401 {
		t.Errorf("revoked run token: %d", a.status)
	}
}

// TestIdempotencyKeyPerCredential: the same Idempotency-Key from two
// credentials is two keys, so an agent cannot pre-empt the coordinator's
// key; from one credential it replays.
func TestIdempotencyKeyPerCredential(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	ts.newThread("t1")
	_, coord := ts.mint(`{"scope":"coordinator","name":"coord"}`)
	_, agent := ts.mint(`{"scope":"agent","name":"run","thread":"t1","participant":"claude"}`)
	ts.as(coord).register("coord", "claude")
	forged := ts.as(agent).must(200, "POST", "/threads/t1/events", `{"from":"claude","content":"forged"}`, "Idempotency-Key: trig-1:claude").obj()
	real := ts.as(coord).must(200, "POST", "/threads/t1/events", `{"from":"claude","content":"real"}`, "Idempotency-Key: trig-1:claude").obj()
	if real["replayed"] == true || real["event"].(map[string]any)["id"] == forged["event"].(map[string]any)["id"] {
		t.Fatalf("the coordinator's append was answered with the forged event: %v", real)
	}
	again := ts.as(coord).must(200, "POST", "/threads/t1/events", `{"from":"claude","content":"real"}`, "Idempotency-Key: trig-1:claude").obj()
	if again["replayed"] != true || again["event"].(map[string]any)["id"] != real["event"].(map[string]any)["id"] {
		t.Errorf("the coordinator's retry = %v, want its own event replayed", again)
	}

	// A restarted up gives its coordinator a new token of the same
	// coordinator id: its retry replays the first token's event.
	_, first := ts.mint(`{"scope":"coordinator","name":"up-1","participant":"bridge-coordinator"}`)
	_, second := ts.mint(`{"scope":"coordinator","name":"up-2","participant":"bridge-coordinator"}`)
	ts.as(first).register("bridge-coordinator", "claude")
	a := ts.as(first).must(200, "POST", "/threads/t1/events", `{"from":"claude","content":"before the restart"}`, "Idempotency-Key: trig-2:claude").obj()
	b := ts.as(second).must(200, "POST", "/threads/t1/events", `{"from":"claude","content":"before the restart"}`, "Idempotency-Key: trig-2:claude").obj()
	if b["replayed"] != true || b["event"].(map[string]any)["id"] != a["event"].(map[string]any)["id"] {
		t.Errorf("the retry under the restarted coordinator's token = %v, want the first event replayed", b)
	}
}

// TestLoginCode: a login link's code is exchanged once for the cookie of
// a new person token, which then opens the API; a second use is 401.
func TestLoginCode(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	code, err := ts.srv.NewLoginCode()
	if err != nil {
		t.Fatal(err)
	}
	anon := ts.as("")
	a := anon.must(200, "POST", "/auth/login", `{"code":"`+code+`"}`)
	var cookie string
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == TokenCookie {
			cookie = c.Value
		}
	}
	if cookie == "" {
		t.Fatalf("no login cookie in %v", a.header)
	}
	who := anon.must(200, "GET", "/auth/whoami", "", "Cookie: "+TokenCookie+"="+cookie).obj()
	if who["scope"] != "person" || who["id"] == "" {
		t.Errorf("whoami with the login cookie = %v", who)
	}
	if a := anon.do("POST", "/auth/login", `{"code":"`+code+`"}`); a.status != 401 {
		t.Errorf("second use of the code: %d %s", a.status, a.body)
	}
	if a := anon.do("POST", "/auth/login", `{"token":"`+ts.token+`"}`); a.status != 200 {
		t.Errorf("login with a pasted token: %d %s", a.status, a.body)
	}
}

// TestStreamsPerCredential: one token holds at most its cap of streams;
// the slots kept for coordinator tokens are refused to every other token,
// so that clients holding all other slots still leave the coordinator its
// stream; a closed stream gives its slot back.
func TestStreamsPerCredential(t *testing.T) {
	t.Parallel()
	ts := closedServer(t, Options{MaxStreams: 8, MaxStreamsPerCredential: 3, CoordinatorStreams: 2})
	_, r1 := ts.mint(`{"scope":"read","name":"r1"}`)
	_, r2 := ts.mint(`{"scope":"read","name":"r2"}`)
	_, r3 := ts.mint(`{"scope":"read","name":"r3"}`)
	_, coord := ts.mint(`{"scope":"coordinator","name":"c"}`)
	open := func(token string) (int, func()) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.url+"/events/stream", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		return resp.StatusCode, func() { cancel(); resp.Body.Close() }
	}
	var closers []func()
	t.Cleanup(func() {
		for _, c := range closers {
			c()
		}
	})
	for i, tok := range []string{r1, r1, r1, r2, r2, r2} {
		st, c := open(tok)
		closers = append(closers, c)
		if st != 200 {
			t.Fatalf("stream %d: %d", i+1, st)
		}
	}
	if st, c := open(r1); st != 503 {
		c()
		t.Errorf("a 4th stream of one token: %d, want 503", st)
	}
	if st, c := open(r3); st != 503 {
		c()
		t.Errorf("a stream of another token into the coordinator's pool: %d, want 503", st)
	}
	for i := range 2 {
		st, c := open(coord)
		closers = append(closers, c)
		if st != 200 {
			t.Fatalf("coordinator stream %d with every other slot held: %d", i+1, st)
		}
	}
	if st, c := open(coord); st != 503 {
		c()
		t.Errorf("a stream over the server's cap: %d, want 503", st)
	}
	closers[0]()
	testutil.WaitFor(t, 5*time.Second, "the closed stream's slot", func() bool {
		st, c := open(r1)
		closers = append(closers, c)
		return st == 200
	})
}

// TestOldTokensPruned: a coordinator revokes the agent tokens it made (found
// by id) and no other (token_not_found); revoked tokens stay listed until
// they are agentbridge.TokenRetention old on the server's clock, then the
// server's pruner deletes them, keeping the valid ones.
func TestOldTokensPruned(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ahead time.Duration
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Add(ahead)
	}
	ts := closedServer(t, Options{Now: clock, TokenPruneInterval: 20 * time.Millisecond})
	ts.newThread("t1")
	coordID, coord := ts.mint(`{"scope":"coordinator","name":"coord"}`)
	ts.as(coord).register("coord", "claude")
	runID, _ := ts.as(coord).mint(`{"scope":"agent","name":"run-1","thread":"t1","participant":"claude"}`)
	otherID, _ := ts.mint(`{"scope":"agent","name":"by-person","thread":"t1","participant":"claude"}`)
	if a := ts.as(coord).do("DELETE", "/auth/tokens/"+otherID, ""); a.status != 404 || a.errCode() != agentbridge.ECodeTokenNotFound {
		t.Errorf("a coordinator revokes a token it did not make: %d %s, want 404 token_not_found", a.status, a.body)
	}
	if a := ts.as(coord).do("DELETE", "/auth/tokens/"+coordID, ""); a.status != 404 || a.errCode() != agentbridge.ECodeTokenNotFound {
		t.Errorf("a coordinator revokes itself: %d %s, want 404 token_not_found", a.status, a.body)
	}
	ts.as(coord).must(200, "DELETE", "/auth/tokens/"+runID, "")
	names := func() map[string]bool {
		var out struct {
			Tokens []agentbridge.Token `json:"tokens"`
		}
		if err := json.Unmarshal(ts.must(200, "GET", "/auth/tokens", "").body, &out); err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, tok := range out.Tokens {
			m[tok.Name] = true
		}
		return m
	}
	if got := names(); !got["run-1"] || !got["by-person"] || !got["coord"] || !got["owner"] {
		t.Fatalf("tokens right after the revocation: %v, want the revoked run-1 still listed", got)
	}
	mu.Lock()
	ahead = agentbridge.TokenRetention + time.Hour
	mu.Unlock()
	testutil.WaitFor(t, 10*time.Second, "the revoked token pruned", func() bool { return !names()["run-1"] })
	if got := names(); !got["by-person"] || !got["coord"] || !got["owner"] {
		t.Errorf("tokens after pruning: %v, want the valid ones kept", got)
	}
}
