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
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakepush"
)

// stepClock is a clock a test moves by hand.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// pairLink asks for a pairing link and returns its code.
func (ts *testServer) pairLink(name string) string {
	ts.t.Helper()
	var out agentbridge.PairLink
	if err := json.Unmarshal(ts.must(200, "POST", "/auth/pair", `{"name":"`+name+`"}`).body, &out); err != nil {
		ts.t.Fatal(err)
	}
	code, ok := strings.CutPrefix(out.URL, ts.url+"/ui/#pair=")
	if !ok || code != out.Code || out.Name != name || out.ExpiresAt == "" {
		ts.t.Fatalf("pairing answer %+v", out)
	}
	return code
}

// redeem opens a pairing link as the phone's page does and returns the
// answer and the login cookie it set.
func (ts *testServer) redeem(code string) (answer, string) {
	ts.t.Helper()
	a := ts.as("").do("POST", "/auth/pair/redeem", `{"code":"`+code+`"}`, "Origin: "+ts.url)
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == TokenCookie {
			return a, c.Value
		}
	}
	return a, ""
}

// TestPairing: a pairing link gives the device its own named person
// token as its login cookie, once; a second use, and a use after 10
// minutes, are refused; the devices list shows it with its notifications
// and last push; revoking it ends its access at once (401) and drops its
// subscription.
func TestPairing(t *testing.T) {
	t.Parallel()
	clock := &stepClock{t: time.Now()}
	ts := newTestServer(t, Options{RequireCredential: true, Now: clock.now, Notify: privatePush.Notify})
	secret, err := agentbridge.NewTokenSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.store.CreateToken(context.Background(), agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: "owner", CreatedBy: "serve"}, agentbridge.HashToken(secret)); err != nil {
		t.Fatal(err)
	}
	ts.token = secret
	if a := ts.as("").do("POST", "/auth/pair", `{"name":"phone"}`); a.status != http.StatusUnauthorized {
		t.Fatalf("pair without a credential: %d", a.status)
	}
	code := ts.pairLink("phone")
	a, cookie := ts.redeem(code)
	if a.status != 200 || cookie == "" {
		t.Fatalf("redeem: %d %s, cookie %q", a.status, a.body, cookie)
	}
	phone := ts.as(cookie)
	var who struct{ Name, Scope string }
	_ = json.Unmarshal(phone.must(200, "GET", "/auth/whoami", "").body, &who)
	if who.Name != "phone" || who.Scope != "person" {
		t.Errorf("the phone's credential = %+v, want a person token named phone", who)
	}
	if a, c := ts.redeem(code); a.status != http.StatusUnauthorized || a.errCode() != "unauthorized" || c != "" {
		t.Errorf("second use: %d %s", a.status, a.body)
	}
	late := ts.pairLink("tablet")
	clock.add(PairTTL)
	if a, _ := ts.redeem(late); a.status != http.StatusUnauthorized || !strings.Contains(string(a.body), "older than 10m0s") {
		t.Errorf("use after 10 minutes: %d %s", a.status, a.body)
	}

	// The phone turns notifications on; the devices list shows it.
	fp := fakepush.Start()
	defer fp.Close()
	phone.subscribe(fp, "phone", `{"permission":true}`)
	var list struct{ Devices []agentbridge.Device }
	_ = json.Unmarshal(ts.must(200, "GET", "/devices", "").body, &list)
	if len(list.Devices) != 1 || list.Devices[0].Name != "phone" || !list.Devices[0].Notifications || list.Devices[0].LastSeen == "" {
		t.Fatalf("devices = %+v", list.Devices)
	}
	id := list.Devices[0].ID
	ts.must(200, "DELETE", "/devices/"+id, "")
	if a := phone.do("GET", "/threads", ""); a.status != http.StatusUnauthorized {
		t.Errorf("the revoked phone: %d, want 401", a.status)
	}
	_ = json.Unmarshal(ts.must(200, "GET", "/devices", "").body, &list)
	if len(list.Devices) != 1 || list.Devices[0].RevokedAt == "" || list.Devices[0].Notifications {
		t.Errorf("after revoke: %+v", list.Devices)
	}
	if a := ts.do("DELETE", "/devices/nope", ""); a.status != http.StatusNotFound {
		t.Errorf("revoke an unknown device: %d %s", a.status, a.body)
	}
}
