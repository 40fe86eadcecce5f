package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakepush"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// pushServe starts serve with a bridge config whose "notify" is notify,
// and a thread t1.
func pushServe(t *testing.T, notify map[string]any) *stack.Bridge {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bridge.json")
	b, _ := json.Marshal(map[string]any{"notify": notify})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, buildServeBinary(t), filepath.Join(dir, "data", "bridge.db"), "--bridge-config", cfg)
	if _, err := client.New(p.URL, client.WithToken(p.Token)).CreateThread(t.Context(), agentbridge.CreateThreadRequest{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	return p
}

// pushCall sends a JSON request with token and returns the status and
// body.
func pushCall(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// pairPhone pairs a device named name as its page does and returns the
// device's own token (its login cookie).
func pairPhone(t *testing.T, p *stack.Bridge, name string) string {
	t.Helper()
	link, err := client.New(p.URL, client.WithToken(p.Token)).Pair(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(p.URL+"/auth/pair/redeem", "application/json", strings.NewReader(`{"code":"`+link.Code+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		return c.Value
	}
	t.Fatalf("pairing %s set no cookie: %s", name, resp.Status)
	return ""
}

// subscribeBody is a browser's POST /push/subscriptions.
func subscribeBody(endpoint, p256dh, auth, device string) string {
	b, _ := json.Marshal(map[string]any{"endpoint": endpoint, "keys": map[string]string{"p256dh": p256dh, "auth": auth},
		"device": device, "categories": map[string]bool{"permission": true}})
	return string(b)
}

// askPermission posts a coordinator's permission request in t1, which
// every device that chose "permission" is pushed.
func askPermission(t *testing.T, p *stack.Bridge) {
	t.Helper()
	const request = `{"from":"coordinator","to":"user","content":"fake-acp asks permission to run Write file (edit).","meta":{"via":"coordinator","tags":["coordinator","permission"],"participant":"fake-acp","permission":{"invocation":7,"tool_call":{"title":"Write file","kind":"edit"},"options":[{"id":"allow","name":"Allow","kind":"allow_once"}]}}}`
	if st, body := pushCall(t, "POST", p.URL+"/threads/t1/events", p.Token, request); st != 200 {
		t.Fatalf("post a permission request: %d %s", st, body)
	}
}

// TestPushOutcomesShown (contract 8.4, issue 41 item 4): a real serve
// pushes a permission request to two paired phones through the fake push
// service, which answers the first 410 and the second 500; `agent-bridge
// devices` then shows "expired" and "failed: 500" as their last push,
// `devices --deliveries` lists each push, and /metrics counts the outcomes
// and the latency.
func TestPushOutcomesShown(t *testing.T) {
	stack.Heavy(t)
	fp := fakepush.Start()
	defer fp.Close()
	p := pushServe(t, map[string]any{"allow_private_endpoints": true})
	for _, phone := range []struct {
		name   string
		status int
	}{{"old-phone", http.StatusGone}, {"tablet", http.StatusInternalServerError}} {
		tok := pairPhone(t, p, phone.name)
		sub, err := fp.Subscribe()
		if err != nil {
			t.Fatal(err)
		}
		fp.SetStatus(sub.Endpoint, phone.status)
		if st, body := pushCall(t, "POST", p.URL+"/push/subscriptions", tok, subscribeBody(sub.Endpoint, sub.P256dh, sub.Auth, phone.name)); st != 200 {
			t.Fatalf("subscribe %s: %d %s", phone.name, st, body)
		}
	}
	askPermission(t, p)
	c := cli{t: t, env: map[string]string{"BRIDGE_URL": p.URL, "BRIDGE_TOKEN": p.Token}}
	var out string
	testutil.WaitFor(t, 30*time.Second, "both pushes' outcomes in devices", func() bool {
		out = c.ok("devices")
		return strings.Contains(out, "expired") && strings.Contains(out, "failed: 500")
	})
	for _, want := range []string{`(?m)^\S+\s+old-phone\s+.*\s+off\s+expired \d{4}-`, `(?m)^\S+\s+tablet\s+.*\s+permission\s+failed: 500 \d{4}-`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("devices printed\n%s\nwant a line matching %s", out, want)
		}
	}
	long := c.ok("devices", "--deliveries")
	for _, want := range []string{`(?m)^old-phone: the last 1 pushes$`, `(?m)^  \S+\s+expired\s+permission\s+t1\s+\S+\s+\d+ ms$`, `(?m)^  \S+\s+failed: 500\s+permission\s+t1\s+\S+\s+\d+ ms$`} {
		if !regexp.MustCompile(want).MatchString(long) {
			t.Errorf("devices --deliveries printed\n%s\nwant a line matching %s", long, want)
		}
	}
	_, metrics := pushCall(t, "GET", p.URL+"/metrics", p.Token, "")
	for _, want := range []string{`agent_bridge_push_deliveries_total{outcome="expired"} 1`, `agent_bridge_push_deliveries_total{outcome="failed"} 1`,
		`agent_bridge_push_deliveries_total{outcome="sent"} 0`, `agent_bridge_push_latency_seconds_count 2`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestPushStaysOutsideTheNetwork (contract 8.3, issue 45 break 5): with
// private endpoints disallowed (the default), a real serve refuses
// subscriptions to http, and to the loopback, private, link-local and
// CGNAT addresses written in an endpoint (the instance metadata address
// among them); an endpoint whose name resolves to loopback (localhost,
// where a real HTTPS endpoint answers 307 towards a private service) is
// taken, but the push is refused when dialed: neither the redirecting
// endpoint nor the service behind it gets a byte, and the device's
// outcome says why.
func TestPushStaysOutsideTheNetwork(t *testing.T) {
	stack.Heavy(t)
	var reached atomic.Int64
	inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer inside.Close()
	redirect := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		http.Redirect(w, r, inside.URL+"/admin", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	fp := fakepush.Start()
	defer fp.Close()
	keys, err := fp.Subscribe() // a browser's keys, for the endpoints below
	if err != nil {
		t.Fatal(err)
	}
	p := pushServe(t, map[string]any{})
	phone := pairPhone(t, p, "phone")
	port := strings.TrimPrefix(redirect.URL, "https://127.0.0.1:")
	for _, ep := range []string{
		"http://127.0.0.1:" + port + "/push", redirect.URL + "/push", "https://169.254.169.254/latest/meta-data/",
		"https://10.0.0.1/push", "https://100.64.0.1/push", "https://[::1]:" + port + "/push",
	} {
		st, body := pushCall(t, "POST", p.URL+"/push/subscriptions", phone, subscribeBody(ep, keys.P256dh, keys.Auth, "phone"))
		if st != http.StatusBadRequest || !strings.Contains(body, `"field":"endpoint"`) {
			t.Errorf("subscribe %s: %d %s, want 400 on endpoint", ep, st, body)
		}
	}
	if st, body := pushCall(t, "POST", p.URL+"/push/subscriptions", phone, subscribeBody("https://localhost:"+port+"/push", keys.P256dh, keys.Auth, "phone")); st != 200 {
		t.Fatalf("subscribe a name: %d %s", st, body)
	}
	askPermission(t, p)
	c := cli{t: t, env: map[string]string{"BRIDGE_URL": p.URL, "BRIDGE_TOKEN": p.Token}}
	testutil.WaitFor(t, 30*time.Second, "the refused push's outcome", func() bool {
		return strings.Contains(c.ok("devices"), "failed: not a public address")
	})
	if n := reached.Load(); n != 0 {
		t.Errorf("the endpoint or the service behind it got %d requests, want none", n)
	}
}

// TestSlowPushEndpointsDelayNobody (contract 8.3, issue 45 break 6): a
// real serve holds 2,000 subscriptions to an endpoint that holds every
// request until the test lets it go, made before one fast phone's; a
// permission request reaches the fast phone while the slow endpoints hold
// theirs. Every endpoint has a queue of its own; nothing waits for a slot
// behind the slow ones (before, 16 deliveries at a time went out, in
// subscription order: the fast phone waited behind all 2,000, each ended
// only by the bridge's 10 s send timeout, and no more than 16 slow
// requests were ever held at once). The test asserts the order and the
// concurrency, not the time: how soon the fast phone gets its push,
// against the contract's 2 s, is logged and recorded in
// docs/performance.md (0.85–1.66 s on the shared 2-core machine at loads
// of 27–40). With the cap of 200 subscriptions, the test raises
// notify.max_subscriptions to 2,001, and makes them from 200 devices of 10
// each (the cap per device).
func TestSlowPushEndpointsDelayNobody(t *testing.T) {
	stack.Heavy(t)
	const nSlow, perDevice, oldCap = 2000, agentbridge.MaxPushPerDevice, 16
	var slowGot, held, mostHeld atomic.Int64
	release, done := make(chan struct{}), make(chan struct{})
	slow := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowGot.Add(1)
		n := held.Add(1)
		defer held.Add(-1)
		for m := mostHeld.Load(); n > m && !mostHeld.CompareAndSwap(m, n); m = mostHeld.Load() {
		}
		select {
		case <-release:
			w.WriteHeader(http.StatusCreated)
		case <-done:
		case <-r.Context().Done():
		}
	}))
	slow.Config.SetKeepAlivesEnabled(false)
	slow.Start()
	defer slow.Close()
	defer close(done)
	fp := fakepush.Start()
	defer fp.Close()
	keys, err := fp.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	p := pushServe(t, map[string]any{"allow_private_endpoints": true, "max_subscriptions": nSlow + 1})
	person := client.New(p.URL, client.WithToken(p.Token))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for d := range nSlow / perDevice {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			tok, err := person.CreateToken(context.Background(), agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: fmt.Sprintf("slow-%d", d)})
			if err != nil {
				t.Error(err)
				return
			}
			for i := range perDevice {
				ep := fmt.Sprintf("%s/push/%d-%d", slow.URL, d, i)
				if st, body := pushCall(t, "POST", p.URL+"/push/subscriptions", tok.Secret, subscribeBody(ep, keys.P256dh, keys.Auth, "slow")); st != 200 {
					t.Errorf("slow subscription %d-%d: %d %s", d, i, st, body)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	fast, err := fp.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	if st, body := pushCall(t, "POST", p.URL+"/push/subscriptions", pairPhone(t, p, "phone"), subscribeBody(fast.Endpoint, fast.P256dh, fast.Auth, "phone")); st != 200 {
		t.Fatalf("the fast phone's subscription: %d %s", st, body)
	}
	cpu0 := procCPU(t, p.Cmd.Process.Pid)
	asked := time.Now()
	askPermission(t, p)
	// Behind the slow endpoints, 16 at a time, the fast phone would wait
	// 125 rounds of the 10 s send timeout: this deadline is only there so
	// that such a queue fails instead of hanging.
	var fastAt time.Time
	testutil.WaitFor(t, 2*time.Minute, "the fast phone's push, with the slow endpoints' requests held", func() bool {
		for _, m := range fp.Messages() {
			if m.Endpoint == fast.Endpoint && m.Err == nil {
				fastAt = m.At
				return true
			}
		}
		return false
	})
	took := fastAt.Sub(asked)
	// Every slow endpoint is pushed in a queue of its own, all at once: far
	// more than the old 16 requests are held together. The wait follows
	// the requests as they arrive, however busy the machine.
	testutil.WaitProgress(t, 30*time.Second, "every slow endpoint's request", func() (int, bool) {
		n := slowGot.Load()
		return int(n), n >= nSlow
	})
	if m := mostHeld.Load(); m <= oldCap {
		t.Errorf("at most %d slow requests were held at once, want more than %d (each endpoint its own queue)", m, oldCap)
	}
	close(release)
	t.Logf("the fast phone's push arrived %s after the permission request was posted; %d slow requests held at once at most; serve's CPU for the %d pushes: %s",
		took.Round(time.Millisecond), mostHeld.Load(), nSlow+1, procCPU(t, p.Cmd.Process.Pid)-cpu0)
}

// procCPU is the user and system time process pid has used, from
// /proc/<pid>/stat (in the kernel's clock ticks, 10 ms on Linux).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
