package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
)

// TestFanoutSendsAReadToken: `invocations` and `why` without
// --coordinator-url ask every registered status URL, which any coordinator
// token may register: a status URL registered by a rogue coordinator
// token receives a read token named cli-fanout living 60 s, never the
// person's token; the same server named with --coordinator-url gets the
// person's token.
func TestFanoutSendsAReadToken(t *testing.T) {
	stack.Heavy(t)
	bin := buildServeBinary(t)
	url, person, _ := logServe(t, bin, filepath.Join(t.TempDir(), "bridge.db"))
	cl := client.New(url, client.WithToken(person))
	ctx := context.Background()

	var mu sync.Mutex
	var seen []string
	rogue := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"invocations":[]}`))
	}))
	t.Cleanup(rogue.Close)
	tok, err := cl.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: "rogue"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(url, client.WithToken(tok.Secret)).RegisterCoordinator(ctx, agentbridge.Registration{
		ID: "rogue", Instance: "r1", Host: "elsewhere", StatusURL: rogue.URL,
	}); err != nil {
		t.Fatal(err)
	}
	taken := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}

	for _, args := range [][]string{{"invocations"}, {"why", "01NOSUCHEVENT"}} {
		_, errOut, _ := runCLI(t, bin, url, person, args...)
		got := taken()
		if len(got) != 1 {
			t.Fatalf("%v: the registered status URL was asked %d times (%s)", args, len(got), errOut)
		}
		if got[0] == person || got[0] == "" {
			t.Fatalf("%v: the registered status URL got %q, want a read token", args, got[0])
		}
		who, err := client.New(url, client.WithToken(got[0])).Whoami(ctx)
		if err != nil || who.Scope != agentbridge.ScopeRead || who.Name != "cli-fanout" {
			t.Errorf("%v: the token sent is %+v (%v), want a read token named cli-fanout", args, who, err)
		}
	}
	list, err := cl.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range list {
		if tk.Name == "cli-fanout" && tk.ExpiresAt == "" {
			t.Errorf("the fan-out token %s does not expire", tk.ID)
		}
	}

	runCLI(t, bin, url, person, "invocations", "--coordinator-url", rogue.URL)
	if got := taken(); len(got) != 1 || got[0] != person {
		t.Errorf("--coordinator-url: sent %q, want the person's token", got)
	}
}
