package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestTokensCommands runs tokens add, list and revoke against the real
// serve binary with the person token it made: a read token reads and may
// not post (403, nothing stored), shows in the list without its secret,
// and is refused (401) once revoked by name.
func TestTokensCommands(t *testing.T) {
	stack.Heavy(t)
	bin := buildServeBinary(t)
	p := startServe(t, bin, filepath.Join(t.TempDir(), "data", "bridge.db"))
	person := cli{t: t, env: map[string]string{"BRIDGE_URL": p.URL, "BRIDGE_TOKEN": p.Token}}
	th := strings.TrimSpace(person.ok("thread", "new", "tokens"))

	secret := strings.TrimSpace(person.ok("tokens", "add", "--scope", "read", "--name", "dashboard"))
	if !strings.HasPrefix(secret, agentbridge.TokenPrefix) {
		t.Fatalf("tokens add printed %q, want the secret", secret)
	}
	list := person.ok("tokens", "list")
	if !strings.Contains(list, "dashboard") || !strings.Contains(list, "owner") || strings.Contains(list, secret) || strings.Contains(list, p.Token) {
		t.Errorf("tokens list:\n%s", list)
	}
	reader := cli{t: t, env: map[string]string{"BRIDGE_URL": p.URL, "BRIDGE_TOKEN": secret}}
	reader.ok("thread", "list")
	// whoami says who each token is: the person writes as user, the read
	// token as nobody.
	if out := person.ok("whoami"); !strings.HasPrefix(out, `user: a person token named "owner"`) {
		t.Errorf("whoami with the person token: %q", out)
	}
	if out := reader.ok("whoami"); !strings.HasPrefix(out, `nobody (this token may not write): a read token named "dashboard"`) {
		t.Errorf("whoami with the read token: %q", out)
	}
	if _, errOut, code := reader.run("post", th, "hello", "--from", "user"); code == 0 || !strings.Contains(errOut, "read token may not") {
		t.Errorf("post with a read token: exit %d, %q", code, errOut)
	}
	if _, errOut, code := reader.run("tokens", "list"); code == 0 || !strings.Contains(errOut, "Only a person token") {
		t.Errorf("tokens list with a read token: exit %d, %q", code, errOut)
	}
	evs, err := client.New(p.URL, client.WithToken(p.Token)).ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: th, After: -1})
	if err != nil || len(evs) != 1 {
		t.Errorf("the thread after the read token's post: %d events, %v; want its thread.created only", len(evs), err)
	}

	out := person.ok("tokens", "revoke", "dashboard")
	if !strings.HasPrefix(out, "revoked ") {
		t.Errorf("tokens revoke: %q", out)
	}
	testutil.WaitFor(t, 5*time.Second, "the revoked token refused", func() bool {
		_, errOut, code := reader.run("thread", "list")
		return code != 0 && strings.Contains(errOut, "was revoked at")
	})
	if all := person.ok("tokens", "list", "--all"); !strings.Contains(all, "dashboard") {
		t.Errorf("tokens list --all lacks the revoked token:\n%s", all)
	}
	if list := person.ok("tokens", "list"); strings.Contains(list, "dashboard") {
		t.Errorf("tokens list shows the revoked token:\n%s", list)
	}
	if _, _, code := person.run("tokens", "revoke", "nope"); code != 2 {
		t.Errorf("tokens revoke nope: exit %d, want 2", code)
	}

	// login-link: the link up prints, for a bridge started with serve.
	link := strings.TrimSpace(person.ok("login-link"))
	base, code, ok := strings.Cut(link, "/ui/login#code=")
	if !ok || base != p.URL {
		t.Fatalf("login-link printed %q", link)
	}
	checkLoginLink(t, nil, base, code)
}

// TestServeOpen: serve --open takes a v0 client's token-less requests (a
// thread, a message as user, a pause), makes no token file, and says who
// it takes them as.
func TestServeOpen(t *testing.T) {
	stack.Heavy(t)
	bin := buildServeBinary(t)
	dir := t.TempDir()
	p := startServe(t, bin, filepath.Join(dir, "bridge.db"), "--open")
	for _, req := range []struct{ path, body string }{
		{"/threads", `{"id":"v0"}`},
		{"/threads/v0/events", `{"from":"user","content":"hello"}`},
		{"/threads/v0/events", `{"type":"control","from":"user","content":{"pause":{"on":true}}}`},
	} {
		resp, err := http.Post(p.URL+req.path, "application/json", strings.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("POST %s without a token: %d", req.path, resp.StatusCode)
		}
	}
	resp, err := http.Get(p.URL + "/auth/whoami")
	if err != nil {
		t.Fatal(err)
	}
	var who agentbridge.Whoami
	err = json.NewDecoder(resp.Body).Decode(&who)
	resp.Body.Close()
	if err != nil || !who.Open || who.Scope != agentbridge.ScopePerson {
		t.Errorf("whoami on an open bridge = %+v, %v", who, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "token")); err == nil {
		t.Error("serve --open made a token file")
	}
}
