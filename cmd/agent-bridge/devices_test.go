package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestPairAndDevices: `pair` prints a one-time link and its QR code; the
// phone that opens it gets its own login; `devices` lists it; `devices
// revoke` ends its access (401) within a second; the link works once.
func TestPairAndDevices(t *testing.T) {
	t.Parallel()
	b := startTokenBridge(t, "s3cret")
	c := newCLI(t, b)
	c.env["BRIDGE_TOKEN"] = "s3cret"
	out := c.ok("pair", "--name", "phone", "--base", "https://laptop.example.ts.net")
	i := strings.Index(out, "https://laptop.example.ts.net/ui/#pair=")
	if i < 0 || !strings.Contains(out, "▀") {
		t.Fatalf("pair printed %q, want a QR code and the link", out)
	}
	code := strings.TrimSpace(out[i+len("https://laptop.example.ts.net/ui/#pair="):])
	redeem := func() *http.Response {
		resp, err := http.Post(b.URL()+"/auth/pair/redeem", "application/json", strings.NewReader(`{"code":"`+code+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := redeem()
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
		t.Fatalf("opening the link: %s %v", resp.Status, resp.Cookies())
	}
	cookie := resp.Cookies()[0]
	if again := redeem(); again.StatusCode != http.StatusUnauthorized {
		t.Errorf("the link's second use: %s, want 401", again.Status)
	}
	phoneGet := func() int {
		req, _ := http.NewRequest("GET", b.URL()+"/threads", nil)
		req.AddCookie(cookie)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}
	if code := phoneGet(); code != 200 {
		t.Fatalf("the paired phone: %d", code)
	}
	list := c.ok("devices")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "phone") || !strings.Contains(lines[1], "off") {
		t.Fatalf("devices printed %q", list)
	}
	id := strings.Fields(lines[1])[0]
	if out := c.ok("devices", "revoke", id); !strings.Contains(out, "revoked "+id) {
		t.Errorf("devices revoke printed %q", out)
	}
	// The deadline is generous: on a loaded machine one HTTP round trip
	// may take over a second, and this checks that the revocation holds,
	// not how fast a request is.
	testutil.WaitFor(t, 20*time.Second, "the revoked phone refused", func() bool { return phoneGet() == http.StatusUnauthorized })
	if _, errOut, code := c.run("devices", "revoke", "nope"); code == 0 || !strings.Contains(errOut, "No paired device") {
		t.Errorf("revoke an unknown device: exit %d, %q", code, errOut)
	}
}
