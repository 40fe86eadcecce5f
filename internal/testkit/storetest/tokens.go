package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// testTokens checks the token store (contract 7.3): a token is found by
// its secret's hash with its scope and binding, an agent token gets its
// expiry, the list holds every token oldest first and no secret, a
// revocation stamps revoked_at once (a second keeps the first time), the
// revoked token is still found but no longer Valid, and an unknown id is
// token_not_found.
func testTokens(t *testing.T, newStore Factory) {
	ts, ok := newStore(t, nil).(agentbridge.TokenStore)
	if !ok {
		t.Skip("the store keeps no tokens")
	}
	ctx := context.Background()
	secret, err := agentbridge.NewTokenSecret()
	if err != nil {
		t.Fatal(err)
	}
	person, err := ts.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: "owner", CreatedBy: "serve"}, agentbridge.HashToken(secret))
	if err != nil {
		t.Fatalf("CreateToken(person): %v", err)
	}
	in := agentbridge.TokenInput{Scope: agentbridge.ScopeAgent, Name: "run-1", Thread: "t1", Participant: "claude", CreatedBy: "coordinator"}
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	agentSecret, _ := agentbridge.NewTokenSecret()
	agent, err := ts.CreateToken(ctx, in, agentbridge.HashToken(agentSecret))
	if err != nil {
		t.Fatalf("CreateToken(agent): %v", err)
	}
	if person.ID == "" || person.ID == agent.ID || person.Scope != agentbridge.ScopePerson || person.ExpiresAt != "" || person.CreatedAt == "" || person.CreatedBy != "serve" {
		t.Errorf("person token = %+v", person)
	}
	created, err := agentbridge.ParseTime(agent.CreatedAt)
	if err != nil {
		t.Fatalf("agent created_at %q: %v", agent.CreatedAt, err)
	}
	if want := agentbridge.FormatTime(created.Add(agentbridge.MaxAgentTokenTTL)); agent.ExpiresAt != want {
		t.Errorf("agent token expires %q, want %q (the ttl cap)", agent.ExpiresAt, want)
	}
	got, ok, err := ts.TokenByHash(ctx, agentbridge.HashToken(agentSecret))
	if err != nil || !ok || got != agent {
		t.Fatalf("TokenByHash(agent) = %+v, %v, %v; want %+v", got, ok, err, agent)
	}
	if !got.Valid(time.Now()) || got.Valid(created.Add(agentbridge.MaxAgentTokenTTL)) {
		t.Errorf("agent token valid now %v, valid at its expiry %v; want true, false", got.Valid(time.Now()), got.Valid(created.Add(agentbridge.MaxAgentTokenTTL)))
	}
	if _, ok, err := ts.TokenByHash(ctx, agentbridge.HashToken(secret+"x")); err != nil || ok {
		t.Errorf("TokenByHash(unknown) = %v, %v; want not found", ok, err)
	}

	revoked, err := ts.RevokeToken(ctx, agent.ID)
	if err != nil || revoked.RevokedAt == "" || revoked.ID != agent.ID {
		t.Fatalf("RevokeToken = %+v, %v", revoked, err)
	}
	again, err := ts.RevokeToken(ctx, agent.ID)
	if err != nil || again.RevokedAt != revoked.RevokedAt {
		t.Errorf("second RevokeToken = %+v, %v; want revoked_at kept at %s", again, err, revoked.RevokedAt)
	}
	got, ok, err = ts.TokenByHash(ctx, agentbridge.HashToken(agentSecret))
	if err != nil || !ok || got.Valid(time.Now()) {
		t.Errorf("revoked token: %+v, %v, %v; want found and not valid", got, ok, err)
	}
	for _, id := range []string{"01ZZZZZZZZZZZZZZZZZZZZZZZZ", "no/such"} {
		if _, err := ts.RevokeToken(ctx, id); agentbridge.ErrorCode(err) != agentbridge.ECodeTokenNotFound {
			t.Errorf("RevokeToken(%q) = %v, want token_not_found", id, err)
		}
	}
	list, err := ts.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0] != person || list[1] != revoked {
		t.Errorf("Tokens = %+v, want the person token then the revoked agent token", list)
	}
}

// testPruneTokens checks TokenByID and PruneTokens: a token is found by its
// id and an unknown or malformed id is not; pruning deletes the tokens
// revoked or expired before the cutoff and keeps those revoked or expiring
// after it, the valid ones, and serve's state-folder token even revoked
// (its file would register it again).
func testPruneTokens(t *testing.T, newStore Factory) {
	ts, ok := newStore(t, nil).(agentbridge.TokenStore)
	if !ok {
		t.Skip("the store keeps no tokens")
	}
	ctx := context.Background()
	mk := func(in agentbridge.TokenInput) (agentbridge.Token, []byte) {
		t.Helper()
		if err := in.Validate(); err != nil {
			t.Fatal(err)
		}
		secret, err := agentbridge.NewTokenSecret()
		if err != nil {
			t.Fatal(err)
		}
		tok, err := ts.CreateToken(ctx, in, agentbridge.HashToken(secret))
		if err != nil {
			t.Fatalf("CreateToken(%s): %v", in.Name, err)
		}
		return tok, agentbridge.HashToken(secret)
	}
	owner, _ := mk(agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: "owner", CreatedBy: agentbridge.CreatedByServe})
	person, _ := mk(agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: "laptop", CreatedBy: owner.ID})
	ran, ranHash := mk(agentbridge.TokenInput{Scope: agentbridge.ScopeAgent, Name: "run-1", Thread: "t1", Participant: "claude", CreatedBy: "c1"})
	running, _ := mk(agentbridge.TokenInput{Scope: agentbridge.ScopeAgent, Name: "run-2", Thread: "t1", Participant: "codex", CreatedBy: "c1"})

	got, ok, err := ts.TokenByID(ctx, ran.ID)
	if err != nil || !ok || got != ran {
		t.Fatalf("TokenByID(%s) = %+v, %v, %v; want %+v", ran.ID, got, ok, err, ran)
	}
	for _, id := range []string{"01ZZZZZZZZZZZZZZZZZZZZZZZZ", "no/such", ""} {
		if _, ok, err := ts.TokenByID(ctx, id); ok || err != nil {
			t.Errorf("TokenByID(%q) = %v, %v; want not found", id, ok, err)
		}
	}
	owner, err = ts.RevokeToken(ctx, owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	ran, err = ts.RevokeToken(ctx, ran.ID)
	if err != nil {
		t.Fatal(err)
	}
	revokedAt, err := agentbridge.ParseTime(ran.RevokedAt)
	if err != nil {
		t.Fatal(err)
	}
	expires, err := agentbridge.ParseTime(running.ExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	ids := func() []string {
		t.Helper()
		list, err := ts.Tokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tok := range list {
			out = append(out, tok.Name)
		}
		return out
	}
	prune := func(cutoff time.Time, want int64, names ...string) {
		t.Helper()
		n, err := ts.PruneTokens(ctx, cutoff)
		if err != nil || n != want {
			t.Fatalf("PruneTokens(%s) = %d, %v; want %d", agentbridge.FormatTime(cutoff), n, err, want)
		}
		if got := ids(); !slices.Equal(got, names) {
			t.Fatalf("after PruneTokens(%s): %v, want %v", agentbridge.FormatTime(cutoff), got, names)
		}
	}
	// A cutoff before the revocation keeps it: tokens list --all still
	// shows it for the retention period.
	prune(revokedAt.Add(-time.Second), 0, "owner", "laptop", "run-1", "run-2")
	prune(revokedAt.Add(time.Second), 1, "owner", "laptop", "run-2")
	if _, ok, err := ts.TokenByHash(ctx, ranHash); ok || err != nil {
		t.Errorf("the pruned token by its hash: %v, %v; want not found", ok, err)
	}
	if _, ok, err := ts.TokenByID(ctx, ran.ID); ok || err != nil {
		t.Errorf("the pruned token by its id: %v, %v; want not found", ok, err)
	}
	prune(expires.Add(-time.Second), 0, "owner", "laptop", "run-2")
	prune(expires.Add(time.Second), 1, "owner", "laptop")
	prune(expires.Add(100*agentbridge.TokenRetention), 0, "owner", "laptop")
	if got, ok, err := ts.TokenByID(ctx, person.ID); !ok || err != nil || got != person {
		t.Errorf("the valid person token after pruning: %+v, %v, %v", got, ok, err)
	}
}

// testAgentTokensCap: with MaxLive, an agent token is refused (too_many)
// when its creator already holds that many live ones; revoked and expired
// ones do not count, nor do another creator's. TokensAfter pages the list
// in creation order, and CoordinatorTokenIDs names the coordinator tokens
// not revoked by their ids.
func testAgentTokensCap(t *testing.T, newStore Factory) {
	ts, ok := newStore(t, nil).(agentbridge.TokenStore)
	if !ok {
		t.Skip("the store keeps no tokens")
	}
	ctx := context.Background()
	mint := func(in agentbridge.TokenInput) (agentbridge.Token, error) {
		secret, err := agentbridge.NewTokenSecret()
		if err != nil {
			t.Fatal(err)
		}
		return ts.CreateToken(ctx, in, agentbridge.HashToken(secret))
	}
	agent := func(by string, ttl int64) (agentbridge.Token, error) {
		return mint(agentbridge.TokenInput{Scope: agentbridge.ScopeAgent, Name: "run", Thread: "t", Participant: "p", TTLSeconds: ttl, CreatedBy: by, MaxLive: 3})
	}
	first, err := agent("c1", 3600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent("c1", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := agent("c1", 3600); err != nil {
		t.Fatal(err)
	}
	if _, err := agent("c1", 3600); agentbridge.ErrorCode(err) != agentbridge.ECodeTooMany {
		t.Fatalf("a fourth live token: %v, want too_many", err)
	}
	if _, err := agent("c2", 3600); err != nil {
		t.Errorf("another creator's token: %v", err)
	}
	if _, err := ts.RevokeToken(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := agent("c1", 3600); err != nil {
		t.Errorf("after a revocation: %v", err)
	}
	if _, err := agent("c1", 3600); agentbridge.ErrorCode(err) != agentbridge.ECodeTooMany {
		t.Fatalf("a fourth live token again: %v, want too_many", err)
	}
	testutil.WaitFor(t, 10*time.Second, "the one-second token to expire and make room", func() bool {
		_, err := agent("c1", 3600)
		return err == nil
	})

	for _, in := range []agentbridge.TokenInput{
		{Scope: agentbridge.ScopeCoordinator, Name: "laptop"},
		{Scope: agentbridge.ScopeCoordinator, Name: "desk-token", Participant: "desk", Agents: []string{"carol"}},
	} {
		if _, err := mint(in); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := ts.CoordinatorTokenIDs(ctx)
	slices.Sort(ids)
	if err != nil || !slices.Equal(ids, []string{"desk", "laptop"}) {
		t.Errorf("CoordinatorTokenIDs = %v %v", ids, err)
	}
	all, err := ts.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var paged []agentbridge.Token
	for after := int64(0); ; {
		page, pos, err := ts.TokensAfter(ctx, after, 3)
		if err != nil || len(page) != len(pos) {
			t.Fatalf("TokensAfter(%d): %v", after, err)
		}
		if len(page) == 0 {
			break
		}
		paged, after = append(paged, page...), pos[len(pos)-1]
	}
	if !slices.Equal(paged, all) {
		t.Errorf("the pages hold %d tokens, the list %d", len(paged), len(all))
	}
	if all[len(all)-1].Agents != "carol" {
		t.Errorf("the allow-list came back as %q", all[len(all)-1].Agents)
	}
}
