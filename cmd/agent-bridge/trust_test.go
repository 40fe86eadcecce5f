package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakepush"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// Trust between machines (contract 8.3, issue 45): the red team's breaks
// 1, 2, 3, 4 and 8, each through real processes — serve and two
// coordinators, each its own process, HOME, state and coordinator token —
// and the attacker's requests sent from outside with one of those tokens.

// trustStack starts serve on a SQLite file of its own for a test that
// runs beside the others: the binaries, serve, and the person's client.
func trustStack(t *testing.T) (bin, fake string, srv *stack.Bridge, db string, person *client.Client) {
	t.Helper()
	stack.Heavy(t)
	bin, fake = buildCoordBinaries(t)
	dir := t.TempDir()
	db = filepath.Join(dir, "bridge.db")
	// The fake push service the notice test subscribes listens on
	// 127.0.0.1, which Web Push reaches only when the file allows it.
	cfg := filepath.Join(dir, "bridge.json")
	if err := os.WriteFile(cfg, []byte(`{"notify":{"allow_private_endpoints":true}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv = startServe(t, bin, db, "--bridge-config", cfg)
	return bin, fake, srv, db, client.New(srv.URL, client.WithToken(srv.Token))
}

// twoMachines starts coordinators laptop (serving alice) and server
// (serving bob) against srv, each its own process, and makes a thread
// with both invited.
func twoMachines(t *testing.T, bin, fake string, srv *stack.Bridge, person *client.Client) (laptop, server *stack.Machine, th *claimsThread) {
	t.Helper()
	laptop = stack.NewMachine(t, person, srv.URL, bin, fake, "laptop", "alice")
	server = stack.NewMachine(t, person, srv.URL, bin, fake, "server", "bob")
	laptop.Start()
	server.Start()
	return laptop, server, newClaimsThread(t, person, "alice", "bob")
}

// instanceOf is the instance coordinator id registered with, as the bridge
// lists it to anyone holding a coordinator token.
func instanceOf(t *testing.T, cl *client.Client, id string) string {
	t.Helper()
	list, err := cl.Coordinators(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Coordinators {
		if c.ID == id {
			return c.Instance
		}
	}
	t.Fatalf("coordinator %s is not registered", id)
	return ""
}

// refusedWith fails t unless err is the bridge's refusal with code.
func refusedWith(t *testing.T, what string, err error, code string) {
	t.Helper()
	var ae *agentbridge.Error
	if !errors.As(err, &ae) || ae.Code != code {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

// text is s as a JSON string.
func text(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// openBridgeDB opens the bridge's SQLite file beside the running serve, as
// an older release would have left it.
func openBridgeDB(t *testing.T, path string) func(q string, args ...any) {
	t.Helper()
	db, err := sqlitex.Open(path, sqlitex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// claimOf is the claim of (event, participant) in the thread's list.
func claimOf(t *testing.T, cl *client.Client, thread, event, participant string) (agentbridge.Claim, bool) {
	t.Helper()
	list, err := cl.Claims(context.Background(), thread)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.Event == event && c.Participant == participant {
			return c, true
		}
	}
	return agentbridge.Claim{}, false
}

// TestTrustClaimsOnlyForRealTriggers (break 1): laptop's coordinator token
// posts a message nobody addressed and files a waiting claim for bob, whom
// only server serves: 400 not_a_trigger, nothing stored; so are a round 1
// outside party mode, claims for a human and a made-up participant, and a
// run claim for an agent laptop does not serve (403). A claim such a
// database already holds is decided again by server, which takes it over:
// it ends not_a_trigger and bob never runs on that text. On main the
// waiting claim was taken and bob ran the text within seconds.
func TestTrustClaimsOnlyForRealTriggers(t *testing.T) {
	bin, fake, srv, db, cl := trustStack(t)
	laptop, server, th := twoMachines(t, bin, fake, srv, cl)
	ctx := context.Background()
	mallory := client.New(srv.URL, client.WithToken(laptop.Token))
	instance := instanceOf(t, mallory, "laptop")

	bait, err := mallory.Append(ctx, th.id, agentbridge.EventInput{From: "laptop", Content: text("fake:say=ran_on_server")}, "")
	if err != nil {
		t.Fatal(err)
	}
	claim := func(event, participant string, round int, wait bool) error {
		_, err := mallory.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: agentbridge.ClaimKey{Thread: th.id, Event: event, Participant: participant, Round: round},
			Coordinator: "laptop", Instance: instance, Wait: wait})
		return err
	}
	refusedWith(t, "a waiting claim for bob on a message nobody addressed", claim(bait.ID, "bob", 0, true), agentbridge.ECodeNotATrigger)
	toBob := th.say("bob", "hi bob")
	refusedWith(t, "a round 1 outside party mode", claim(toBob.ID, "bob", 1, true), agentbridge.ECodeNotATrigger)
	refusedWith(t, "a waiting claim for a human", claim(toBob.ID, "user", 0, true), agentbridge.ECodeNotATrigger)
	refusedWith(t, "a waiting claim for a made-up participant", claim(toBob.ID, "nobody-here", 0, true), agentbridge.ECodeNotATrigger)
	refusedWith(t, "a run claim for an agent laptop does not serve", claim(toBob.ID, "bob", 0, false), agentbridge.ECodeForbiddenSender)
	for _, p := range []string{"bob", "user", "nobody-here"} {
		if c, ok := claimOf(t, cl, th.id, bait.ID, p); ok {
			t.Errorf("a refused claim was stored: %+v", c)
		}
	}

	// A database written before the bridge checked claims may hold one:
	// server takes it over, decides it with its own rules and ends it.
	sqlExec := openBridgeDB(t, db)
	sqlExec(`INSERT INTO claims (thread, event, participant, client, state, created_ms, expires_ms) VALUES (?, ?, 'bob', 'fake-bob', 'waiting', ?, ?)`,
		th.id, bait.ID, time.Now().UnixMilli(), time.Now().Add(time.Hour).UnixMilli())
	testutil.WaitFor(t, time.Minute, "server to end the stored claim as no trigger", func() bool {
		c, _ := claimOf(t, cl, th.id, bait.ID, "bob")
		return c.State == agentbridge.ClaimNotATrigger
	})
	rc, err := cl.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: th.id, Event: bait.ID})
	if err != nil || len(rc) != 1 || rc[0].State != agentbridge.ReceiptSkipped || !strings.HasPrefix(rc[0].Reason, "not a trigger") {
		t.Errorf("receipt of the stored claim: %+v %v, want skipped, not a trigger", rc, err)
	}
	testutil.WaitFor(t, time.Minute, "bob's reply to the message to him", func() bool { return th.replies("bob")[toBob.ID] == 1 })
	if n := server.RunsOf()[bait.ID]; n != 0 || th.replies("bob")[bait.ID] != 0 {
		t.Errorf("bob ran %d times on the text nobody addressed to him", n)
	}
}

// TestTrustUnservedNoticeOnce (break 2): twenty messages to gemini, whom no
// coordinator serves, wait at the bridge and expire: one notice in the
// thread, naming the twenty, and one push to the subscribed phone; a
// coordinator token's waiting claims for a human or a participant not
// invited are refused (on main each claim got its notice and its push).
func TestTrustUnservedNoticeOnce(t *testing.T) {
	bin, fake, srv, _, cl := trustStack(t)
	fp := fakepush.Start()
	t.Cleanup(fp.Close)
	laptop := stack.NewMachine(t, cl, srv.URL, bin, fake, "laptop", "alice")
	laptop.Set("pending_ttl_s", 15)
	laptop.Start()
	sub, err := fp.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	body := `{"endpoint":"` + sub.Endpoint + `","keys":{"p256dh":"` + sub.P256dh + `","auth":"` + sub.Auth + `"},"device":"phone","categories":{"failed":true}}`
	if st, b := rawRequest(t, srv.URL, srv.Token, http.MethodPost, "/push/subscriptions", body); st != 200 {
		t.Fatalf("subscribe: %d %s", st, b)
	}
	th := newClaimsThread(t, cl, "alice", "gemini")
	ctx := context.Background()
	const n = 20
	var first agentbridge.Event
	for i := range n {
		e := th.say("gemini", fmt.Sprintf("message %d", i))
		if i == 0 {
			first = e
		}
	}
	mallory := client.New(srv.URL, client.WithToken(laptop.Token))
	instance := instanceOf(t, mallory, "laptop")
	for _, p := range []string{"user", "nobody-here"} {
		_, err := mallory.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: agentbridge.ClaimKey{Thread: th.id, Event: first.ID, Participant: p},
			Coordinator: "laptop", Instance: instance, Wait: true})
		refusedWith(t, "a waiting claim for "+p, err, agentbridge.ECodeNotATrigger)
	}
	testutil.WaitFor(t, 2*time.Minute, "the twenty waiting claims to expire", func() bool {
		list, err := cl.Claims(ctx, th.id)
		expired := 0
		for _, c := range list {
			if c.State == agentbridge.ClaimExpired {
				expired++
			}
		}
		return err == nil && expired == n
	})
	evs, err := cl.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: th.id, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	var notices []agentbridge.Event
	for _, e := range evs {
		if e.From == agentbridge.ClaimSender && e.Meta.HasTag("error") {
			notices = append(notices, e)
		}
	}
	if len(notices) != 1 || !strings.Contains(notices[0].Text(), "20 messages to gemini") {
		t.Fatalf("notices: %+v, want one naming the 20 messages to gemini", notices)
	}
	testutil.WaitFor(t, time.Minute, "the notice's push", func() bool { return len(fp.Messages()) > 0 })
	if got := len(fp.Messages()); got != 1 {
		t.Errorf("%d pushes, want 1", got)
	}
}

// rawRequest sends body as it is (no client encoding) and returns the
// status and the answer.
func rawRequest(t *testing.T, base, token, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// TestTrustPoisonedRunsGiveUp (break 3): a body nested 9,997 deep is 400
// too_deep. A database written before that check holds such an event, and
// a claim of a party round 1 whose holder is gone: laptop, started after
// the round's trigger (so its ledger holds no round), takes the claim
// over, cannot read the round, and after its retry budget posts one error
// notice; the next message to alice in that thread is answered, and so is
// one in the thread with the deep event, which `agent-bridge tail` prints;
// after a restart nothing of it comes back.
// On main the run retried every 10 s for ever, the queue behind it stayed
// queued, and every read of the deep event's thread failed.
func TestTrustPoisonedRunsGiveUp(t *testing.T) {
	bin, fake, srv, db, cl := trustStack(t)
	ctx := context.Background()

	deep := strings.Repeat(`{"a":`, 9997) + "1" + strings.Repeat("}", 9997)
	party := newClaimsThread(t, cl, "alice")
	if st, b := rawRequest(t, srv.URL, srv.Token, http.MethodPost, "/threads/"+party.id+"/events", `{"from":"user","content":"hi","meta":{"x":`+deep+`}}`); st != 400 || !strings.Contains(b, agentbridge.ECodeTooDeep) {
		t.Errorf("a meta nested 9,997 deep: %d %s, want 400 too_deep", st, agentbridge.Clip(b, 200))
	}
	if _, err := cl.Append(ctx, party.id, agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user", Content: json.RawMessage(`{"party":{"on":true}}`)}, ""); err != nil {
		t.Fatal(err)
	}
	round := party.say(agentbridge.ToAll, "ideas, anyone?")
	poisoned := newClaimsThread(t, cl, "alice")
	old := poisoned.say("user-note", "placeholder")
	// What an older release left: the deep meta, and the round's claim of a
	// coordinator long gone.
	sqlExec := openBridgeDB(t, db)
	sqlExec(`UPDATE events SET meta = ? WHERE id = ?`, `{"x":`+deep+`}`, old.ID)
	sqlExec(`INSERT INTO claims (thread, event, participant, round, client, state, coordinator, instance, host, fence, created_ms, claimed_ms)
		VALUES (?, ?, 'alice', 1, 'fake-alice', 'running', 'old', 'gone', 'old-host', 1, ?, ?)`,
		party.id, round.ID, time.Now().UnixMilli(), time.Now().UnixMilli())

	laptop := stack.NewMachine(t, cl, srv.URL, bin, fake, "laptop", "alice")
	laptop.Set("startup_mode", "end")
	laptop.Start()
	testutil.WaitFor(t, 2*time.Minute, "one error notice for the round whose facts are missing", func() bool {
		return party.tagged("error") == 1
	})
	next := party.say("alice", "and now?")
	deepNext := poisoned.say("alice", "after the deep one")
	testutil.WaitFor(t, 2*time.Minute, "alice's replies after the poisoned runs", func() bool {
		return party.replies("alice")[next.ID] == 1 && poisoned.replies("alice")[deepNext.ID] == 1
	})
	// A restart neither runs the poisoned run again nor blocks the queue.
	laptop.Stop()
	laptop.Start()
	after := party.say("alice", "after a restart?")
	testutil.WaitFor(t, 2*time.Minute, "alice's reply after the restart", func() bool { return party.replies("alice")[after.ID] == 1 })
	if n := party.tagged("error"); n != 1 {
		t.Errorf("%d error notices, want 1", n)
	}
	if st, b := rawRequest(t, srv.URL, srv.Token, http.MethodGet, "/threads/"+poisoned.id+"/events", ""); st != 200 || !strings.Contains(b, "nested deeper than 64") {
		t.Errorf("the deep event's thread: %d, want it served with the deep value noted: %s", st, agentbridge.Clip(b, 300))
	}
	tail := runCLIProc(t, bin, srv, "tail", poisoned.id, "--last", "50")
	testutil.WaitFor(t, time.Minute, "tail to print the thread", func() bool { return strings.Contains(tail.out.String(), "after the deep one") })
	if tail.exited() {
		t.Errorf("tail exited: %s", tail.err.String())
	}
}

// cliProc is a running `agent-bridge` command and its output.
type cliProc struct {
	cmd      *exec.Cmd
	out, err *testutil.Buffer
	done     chan struct{}
}

// runCLIProc runs `agent-bridge args…` against srv with its person token,
// until the test ends.
func runCLIProc(t *testing.T, bin string, srv *stack.Bridge, args ...string) *cliProc {
	t.Helper()
	p := &cliProc{cmd: exec.Command(bin, args...), out: &testutil.Buffer{}, err: &testutil.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "BRIDGE_URL="+srv.URL, "BRIDGE_TOKEN="+srv.Token, "HOME="+t.TempDir())
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

// exited reports whether the command has ended.
func (p *cliProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// registerAs sends PUT /coordinators/{id} with token, the agents named
// names (client client), and returns the status and the error code.
func registerAs(t *testing.T, base, token, id, client string, names ...string) (int, string) {
	t.Helper()
	agents := make([]agentbridge.CoordinatorAgent, len(names))
	for i, n := range names {
		agents[i] = agentbridge.CoordinatorAgent{Name: n, Client: client, Kind: agentbridge.AgentKindAdapter}
	}
	b, _ := json.Marshal(agentbridge.Registration{Instance: "i-" + id, Host: id, Agents: agents})
	st, body := rawRequest(t, base, token, http.MethodPut, "/coordinators/"+id, string(b))
	var e struct{ Error agentbridge.Error }
	_ = json.Unmarshal([]byte(body), &e)
	return st, e.Error.Code
}

// names are n agent names of the given length, distinct by prefix.
func names(prefix string, n, length int) []string {
	out := make([]string, n)
	for i := range out {
		s := fmt.Sprintf("%s%03d", prefix, i)
		out[i] = s + strings.Repeat("x", max(length-len(s), 0))
	}
	return out
}

// TestTrustRegistrations (break 4): laptop's coordinator token may not
// register as its agent another coordinator's id, a human or a reserved
// name (403, the registration unchanged), so it cannot post as server; a
// token made with `tokens add --agents` registers only those agents; a
// registration lists at most 64 agents and a coordinator id registers at
// most 256 names ever (429); ten coordinators at those caps keep GET
// /coordinators under 64 KiB; and both real coordinators still answer.
// On main the registration naming server was taken, and laptop's token
// then posted as server.
func TestTrustRegistrations(t *testing.T) {
	bin, fake, srv, _, cl := trustStack(t)
	laptop, _, th := twoMachines(t, bin, fake, srv, cl)
	ctx := context.Background()
	mallory := laptop.Token

	for _, bad := range []string{"server", "user", "all", "All", "bridge", "coordinator"} {
		if st, code := registerAs(t, srv.URL, mallory, "laptop", "", "alice", bad); st != 403 || code != agentbridge.ECodeForbiddenSender {
			t.Errorf("laptop registers %q as its agent: %d %s, want 403 forbidden_sender", bad, st, code)
		}
	}
	list, err := cl.Coordinators(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := list.Agents["server"]; len(got) != 0 {
		t.Errorf("coordinators serving \"server\": %v, want none", got)
	}
	_, err = client.New(srv.URL, client.WithToken(mallory)).Append(ctx, th.id, agentbridge.EventInput{From: "server", Content: text("server is down"),
		Meta: agentbridge.Meta{Tags: []string{"coordinator", "error"}}}, "")
	refusedWith(t, "laptop posts as server", err, agentbridge.ECodeForbiddenSender)

	// An allow-list, made with the CLI as a person does.
	out, errOut, code := runCLI(t, bin, srv.URL, srv.Token, "tokens", "add", "--scope", "coordinator", "--name", "desk", "--agents", "carol,fake-carol")
	if code != 0 {
		t.Fatalf("tokens add --agents: %d %s", code, errOut)
	}
	desk := strings.TrimSpace(out)
	if st, code := registerAs(t, srv.URL, desk, "desk", "fake-carol", "carol"); st != 200 {
		t.Errorf("desk registers carol: %d %s", st, code)
	}
	if st, code := registerAs(t, srv.URL, desk, "desk", "", "carol", "dave"); st != 403 || code != agentbridge.ECodeForbiddenSender {
		t.Errorf("desk registers dave, not in its list: %d %s, want 403", st, code)
	}
	if st, code := registerAs(t, srv.URL, desk, "desk", "claude", "carol"); st != 403 || code != agentbridge.ECodeForbiddenSender {
		t.Errorf("desk registers carol of client claude: %d %s, want 403", st, code)
	}

	// The caps, and the size of the list every coordinator polls.
	tok := func(name string) string {
		nt, err := cl.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return nt.Secret
	}
	grow := tok("grow")
	if st, code := registerAs(t, srv.URL, grow, "grow", "", names("a", 65, 4)...); st != 400 || code != agentbridge.ECodeInvalidField {
		t.Errorf("65 agents: %d %s, want 400 invalid_field", st, code)
	}
	for batch := range 4 {
		if st, code := registerAs(t, srv.URL, grow, "grow", "", names(fmt.Sprintf("b%d-", batch), 64, 8)...); st != 200 {
			t.Fatalf("batch %d of 64 new names: %d %s", batch, st, code)
		}
	}
	if st, code := registerAs(t, srv.URL, grow, "grow", "", names("b4-", 1, 8)...); st != 429 || code != agentbridge.ECodeTooMany {
		t.Errorf("the 257th name: %d %s, want 429 too_many", st, code)
	}
	if st, code := registerAs(t, srv.URL, grow, "grow", "", names("b0-", 64, 8)...); st != 200 {
		t.Errorf("names it registered before: %d %s", st, code)
	}
	for i := range 10 - 4 { // laptop, server, desk and grow are four
		id := fmt.Sprintf("big-%d", i)
		longest := 0
		for n := 40; n > 0 && longest == 0; n-- {
			if st, _ := registerAs(t, srv.URL, tok(fmt.Sprintf("%s-%d", id, n)), fmt.Sprintf("%s-%d", id, n), "", names("n", 64, n)...); st == 200 {
				longest = n
			}
		}
		if longest == 0 {
			t.Fatalf("%s registers no 64 agents", id)
		}
	}
	st, body := rawRequest(t, srv.URL, srv.Token, http.MethodGet, "/coordinators", "")
	if st != 200 || len(body) >= 64<<10 {
		t.Errorf("GET /coordinators: %d, %d bytes, want under 64 KiB", st, len(body))
	}
	t.Logf("GET /coordinators with %d bytes", len(body))

	a, b := th.say("alice", "still there?"), th.say("bob", "and you?")
	testutil.WaitFor(t, time.Minute, "alice and bob to answer", func() bool {
		return th.replies("alice")[a.ID] == 1 && th.replies("bob")[b.ID] == 1
	})
}

// TestTrustMintedTokensCapped (break 8): laptop's coordinator token (its
// coordinator registered capacity 2) mints agent tokens until 429
// too_many, at most 4 × 2 + 16 live; a revocation makes room for one more.
// GET /auth/tokens answers pages, and `tokens list` follows them to the
// last. On main 29,860 tokens were minted in 20 s.
func TestTrustMintedTokensCapped(t *testing.T) {
	bin, fake, srv, _, cl := trustStack(t)
	laptop := stack.NewMachine(t, cl, srv.URL, bin, fake, "laptop", "alice")
	laptop.Set("max_concurrency", 2)
	laptop.Start()
	th := newClaimsThread(t, cl, "alice")
	ctx := context.Background()
	mallory := client.New(srv.URL, client.WithToken(laptop.Token))
	limit := agentbridge.AgentTokenCap(2)
	var minted []string
	var err error
	for len(minted) <= limit && err == nil {
		var nt client.NewToken
		if nt, err = mallory.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeAgent, Name: "run-alice", Thread: th.id, Participant: "alice"}); err == nil {
			minted = append(minted, nt.ID)
		}
	}
	refusedWith(t, fmt.Sprintf("the agent token after %d", len(minted)), err, agentbridge.ECodeTooMany)
	if len(minted) == 0 || len(minted) > limit {
		t.Fatalf("%d agent tokens minted before the refusal, want 1 to %d", len(minted), limit)
	}
	if _, err := mallory.RevokeToken(ctx, minted[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := mallory.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeAgent, Name: "run-alice", Thread: th.id, Participant: "alice"}); err != nil {
		t.Errorf("a token after a revocation: %v", err)
	}

	for i := range 600 {
		if _, err := cl.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeRead, Name: fmt.Sprintf("r%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	st, body := rawRequest(t, srv.URL, srv.Token, http.MethodGet, "/auth/tokens", "")
	var page agentbridge.TokensPage
	if err := json.Unmarshal([]byte(body), &page); st != 200 || err != nil || len(page.Tokens) != agentbridge.DefaultTokensPage || page.Next == 0 {
		t.Errorf("GET /auth/tokens: %d, %d tokens, next %d, want a page of %d and a next", st, len(page.Tokens), page.Next, agentbridge.DefaultTokensPage)
	}
	all, err := cl.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, bin, srv.URL, srv.Token, "tokens", "list", "--all", "--json")
	var listed []agentbridge.Token
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed) != len(all) || len(all) < 600 {
		t.Errorf("tokens list --all: %d %v, %d tokens of %d: %s", code, err, len(listed), len(all), errOut)
	}
}
