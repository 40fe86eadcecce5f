package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/notify"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakepush"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// privatePush lets the bridge push to the fake push service, on
// loopback.
var privatePush = Options{Notify: notify.Options{AllowPrivateEndpoints: true}}

// subscribe registers a fake push service subscription as a browser would
// and returns it.
func (ts *testServer) subscribe(fp *fakepush.Service, device, categories string) fakepush.Subscription {
	ts.t.Helper()
	sub, err := fp.Subscribe()
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.must(200, "POST", "/push/subscriptions", `{"endpoint":"`+sub.Endpoint+`","expirationTime":null,"keys":{"p256dh":"`+sub.P256dh+`","auth":"`+sub.Auth+`"},"device":"`+device+`","categories":`+categories+`}`)
	return sub
}

// notes decodes the payloads fp accepted for endpoint.
func notes(t *testing.T, fp *fakepush.Service, endpoint string) []notify.Note {
	t.Helper()
	var out []notify.Note
	for _, m := range fp.Messages() {
		if m.Err != nil {
			t.Errorf("the push service refused a push: %v", m.Err)
			continue
		}
		if m.Endpoint != endpoint {
			continue
		}
		var n notify.Note
		if err := json.Unmarshal(m.Payload, &n); err != nil {
			t.Fatalf("payload %q: %v", m.Payload, err)
		}
		out = append(out, n)
	}
	return out
}

// permissionRequest is the coordinator's permission request message, as
// coordinator/acp/permission.go posts it.
const permissionRequest = `{"from":"coordinator","to":"user","content":"fake-acp asks permission to run Write file (edit).","meta":{"via":"coordinator","tags":["coordinator","permission"],"participant":"fake-acp","permission":{"invocation":7,"tool_call":{"title":"Write file","kind":"edit"},"options":[{"id":"allow","name":"Allow","kind":"allow_once"},{"id":"reject","name":"Reject","kind":"reject_once"}]}}}`

// TestWebPush: each category reaches the devices that chose it, signed
// with the bridge's VAPID key and encrypted to the device (the fake push
// service checks both), with a deep link to the event and the category's
// TTL and urgency; a page visible on the thread gets none; a subscription
// answered 410 is removed; every device's last outcome is listed.
func TestWebPush(t *testing.T) {
	t.Parallel()
	fp := fakepush.Start()
	defer fp.Close()
	ts := newTestServer(t, privatePush)
	key := ts.must(200, "GET", "/push/key", "").obj()["public_key"].(string)
	if again := ts.must(200, "GET", "/push/key", "").obj()["public_key"]; again != key {
		t.Fatalf("the VAPID key changed: %v then %v", key, again)
	}
	fp.ExpectKey(key)
	ts.newThread("t1")
	ts.newThread("t2")
	phone := ts.subscribe(fp, "phone", `{"permission":true,"question":true,"failed":true,"threads":["t2"]}`)
	laptop := ts.subscribe(fp, "laptop", `{"permission":true}`)

	res := ts.must(200, "POST", "/threads/t1/events", permissionRequest)
	var ans struct{ Event agentbridge.Event }
	if err := json.Unmarshal(res.body, &ans); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the permission request on both devices", func() bool {
		return len(notes(t, fp, phone.Endpoint)) == 1 && len(notes(t, fp, laptop.Endpoint)) == 1
	})
	n := notes(t, fp, phone.Endpoint)[0]
	if n.Category != agentbridge.PushPermission || n.Title != "fake-acp asks permission: Write file" ||
		n.URL != "/ui/threads/t1#event-"+ans.Event.ID || n.Event != ans.Event.ID || len(n.Options) != 2 || n.Options[0].ID != "allow" {
		t.Errorf("permission note = %+v", n)
	}
	for _, m := range fp.Messages() {
		if m.TTL != "3600" || m.Urgency != "high" {
			t.Errorf("permission push TTL %q urgency %q, want 3600 and high", m.TTL, m.Urgency)
		}
	}

	// A question, a failure and a reply in t2 reach the phone only; a
	// reply in t1 (not opted in) and a person's message reach nobody.
	ts.must(200, "POST", "/threads/t1/events", `{"from":"claude","to":"user","content":"[USER QUESTION]: which file?","meta":{"tags":["coordinator","question"],"via":"coordinator"}}`)
	ts.must(200, "POST", "/threads/t1/events", `{"from":"coordinator","content":"codex could not answer: exit 1","meta":{"tags":["coordinator","error"],"via":"coordinator","participant":"codex"}}`)
	ts.post("t1", "claude", "a reply nobody opted in to")
	ts.post("t2", "user", "a person's own message")
	ts.post("t2", "claude", "a reply in t2")
	waitFor(t, 5*time.Second, "the question, the failure and the t2 reply on the phone", func() bool {
		return len(notes(t, fp, phone.Endpoint)) == 4
	})
	got := notes(t, fp, phone.Endpoint)
	for i, want := range []string{"claude asks you a question", "A run of codex failed", "claude replied"} {
		if got[i+1].Title != want {
			t.Errorf("note %d title %q, want %q", i+1, got[i+1].Title, want)
		}
	}
	if got[3].Thread != "t2" || got[3].Body != "a reply in t2" {
		t.Errorf("reply note = %+v", got[3])
	}

	// The phone's page shows t1: a new request there skips the phone only.
	ts.must(200, "POST", "/push/visible", `{"endpoint":"`+phone.Endpoint+`","thread":"t1","visible":true}`)
	ts.must(200, "POST", "/threads/t1/events", permissionRequest)
	waitFor(t, 5*time.Second, "the second request on the laptop", func() bool { return len(notes(t, fp, laptop.Endpoint)) == 2 })

	// The laptop's subscription expired: 410 removes it.
	fp.SetStatus(laptop.Endpoint, http.StatusGone)
	ts.must(200, "POST", "/push/visible", `{"endpoint":"`+phone.Endpoint+`","visible":false}`)
	_ = json.Unmarshal(ts.must(200, "POST", "/threads/t1/events", permissionRequest).body, &ans)
	third := ans.Event.ID
	waitFor(t, 5*time.Second, "the laptop's subscription removed", func() bool {
		var list struct {
			Subscriptions []struct{ Device, LastOutcome string } `json:"subscriptions"`
		}
		_ = json.Unmarshal(ts.must(200, "GET", "/push/subscriptions", "").body, &list)
		return len(list.Subscriptions) == 1 && list.Subscriptions[0].Device == "phone" && len(notes(t, fp, phone.Endpoint)) >= 5
	})
	// A device's notes go out in order: the phone's fifth is the third
	// request's, so the second, had it gone to the phone too, would be it.
	if got := notes(t, fp, phone.Endpoint); len(got) != 5 || got[4].Event != third {
		t.Errorf("the phone, visible on t1 during the second request, got %d notes, the fifth %+v; want 5, the fifth the third request's", len(got), got[4])
	}
	var list struct {
		Subscriptions []struct {
			LastOutcome string `json:"last_outcome"`
			LastAt      string `json:"last_at"`
		} `json:"subscriptions"`
	}
	_ = json.Unmarshal(ts.must(200, "GET", "/push/subscriptions", "").body, &list)
	if list.Subscriptions[0].LastOutcome != agentbridge.PushSent || list.Subscriptions[0].LastAt == "" {
		t.Errorf("the phone's last outcome = %+v", list.Subscriptions[0])
	}
}

// TestPushStallingEndpoint: a push endpoint that never answers delays
// nobody else: while its deliveries hang, each later note still reaches
// the other device within the contract's 2 s.
func TestPushStallingEndpoint(t *testing.T) {
	t.Parallel()
	fp := fakepush.Start()
	defer fp.Close()
	release := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer stall.Close()
	defer close(release)
	ts := newTestServer(t, privatePush)
	ts.newThread("t1")
	phone := ts.subscribe(fp, "phone", `{"permission":true}`)
	keys, err := fp.Subscribe() // a browser's keys for the dead device
	if err != nil {
		t.Fatal(err)
	}
	ts.must(200, "POST", "/push/subscriptions", `{"endpoint":"`+stall.URL+`/push/dead","keys":{"p256dh":"`+keys.P256dh+`","auth":"`+keys.Auth+`"},"device":"dead","categories":{"permission":true}}`)
	for i := 1; i <= 3; i++ {
		ts.must(200, "POST", "/threads/t1/events", permissionRequest)
		waitFor(t, 2*time.Second, fmt.Sprintf("note %d on the phone while the dead device stalls", i), func() bool {
			return len(notes(t, fp, phone.Endpoint)) == i
		})
	}
}

// p256 is a subscription's P-256 key, as a browser sends it.
const p256 = "BEl62iUYgUivxIkv69yViEuiBIa-Ib9-SkvMeAtA3LFgDzkrxZJjSgSnfckjBJuBkr3qBUYIHBQFLXYp5Nksh8U"

// TestPushSubscriptionRefusals: a subscription that could not be pushed to,
// or whose endpoint is not an https URL on the internet (contract 8.3: no
// loopback, private, link-local, shared or multicast address written in
// it), is refused with the field at fault, and nothing is stored.
func TestPushSubscriptionRefusals(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	for _, c := range []struct{ body, field string }{
		{`{"endpoint":"http://push.example/x","keys":{"p256dh":"` + p256 + `","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`, "endpoint"},
		{`{"endpoint":"http://127.0.0.1:9/x","keys":{"p256dh":"` + p256 + `","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`, "endpoint"},
		{`{"endpoint":"http://localhost:9/x","keys":{"p256dh":"` + p256 + `","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`, "endpoint"},
		{`{"endpoint":"https://127.0.0.1/x","keys":{"p256dh":"` + p256 + `","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`, "endpoint"},
		{`{"endpoint":"https://169.254.169.254/latest/meta-data","keys":{"p256dh":"` + p256 + `","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`, "endpoint"},
		{`{"endpoint":"https://10.0.0.1/x","keys":{"p256dh":"` + p256 + `","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`, "endpoint"},
		{`{"endpoint":"https://100.100.100.100/x","keys":{"p256dh":"` + p256 + `","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`, "endpoint"},
		{`{"endpoint":"https://[::ffff:192.168.1.1]/x","keys":{"p256dh":"` + p256 + `","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`, "endpoint"},
		{`{"endpoint":"https://[fd00::1]:8443/x","keys":{"p256dh":"` + p256 + `","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`, "endpoint"},
		{`{"endpoint":"https://224.0.0.251/x","keys":{"p256dh":"` + p256 + `","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`, "endpoint"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"abc","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`, "p256dh"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"` + p256 + `","auth":"AAAA"}}`, "auth"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"` + p256 + `","auth":"AAAAAAAAAAAAAAAAAAAAAA"},"categories":{"threads":["../x"]}}`, "categories.threads"},
	} {
		a := ts.must(400, "POST", "/push/subscriptions", c.body)
		if a.errField("field") != c.field {
			t.Errorf("%s: field %v, want %s (%s)", c.body, a.errField("field"), c.field, a.body)
		}
	}
	if b := string(ts.must(200, "GET", "/push/subscriptions", "").body); !strings.Contains(b, `"subscriptions":[]`) {
		t.Errorf("after refusals: %s", b)
	}
	// A public address, and a name (checked when it is dialed), are taken.
	for _, ep := range []string{"https://203.0.114.7/x", "https://fcm.googleapis.com/fcm/send/abc"} {
		ts.must(200, "POST", "/push/subscriptions", `{"endpoint":"`+ep+`","keys":{"p256dh":"`+p256+`","auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`)
	}
}

// TestPushSubscriptionCaps: a device (its credential) keeps at most 10
// subscriptions and the bridge 200 in all (contract 8.3); one more is 429
// too_many with a sentence saying which cap, nothing stored, while
// replacing a subscription (the same endpoint) is always taken.
// notify.max_subscriptions raises the cap in all.
func TestPushSubscriptionCaps(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		max, want int
	}{{0, agentbridge.DefaultMaxPushSubscriptions}, {250, 250}} {
		ts := newTestServer(t, Options{RequireCredential: true, Notify: notify.Options{MaxSubscriptions: c.max}})
		owner, err := agentbridge.NewTokenSecret()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.store.CreateToken(context.Background(), agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: "owner", CreatedBy: "serve"}, agentbridge.HashToken(owner)); err != nil {
			t.Fatal(err)
		}
		ts.token = owner
		subscribe := func(as *testServer, ep string) answer {
			return as.do("POST", "/push/subscriptions", `{"endpoint":"https://push.example/`+ep+`","keys":{"p256dh":"`+p256+`","auth":"AAAAAAAAAAAAAAAAAAAAAA"},"device":"d"}`)
		}
		var devices []*testServer
		for d := range c.want/agentbridge.MaxPushPerDevice + 1 {
			_, secret := ts.mint(`{"scope":"person","name":"device-` + strconv.Itoa(d) + `"}`)
			devices = append(devices, ts.as(secret))
		}
		for i := range agentbridge.MaxPushPerDevice {
			if a := subscribe(devices[0], fmt.Sprintf("0-%d", i)); a.status != 200 {
				t.Fatalf("subscription %d of a device: %d %s", i+1, a.status, a.body)
			}
		}
		a := subscribe(devices[0], "0-extra")
		if a.status != http.StatusTooManyRequests || a.errCode() != agentbridge.ECodeTooMany || !strings.Contains(a.errField("message").(string), "This device has 10 push subscriptions already") {
			t.Errorf("an 11th subscription of one device: %d %s", a.status, a.body)
		}
		if a := subscribe(devices[0], "0-3"); a.status != 200 {
			t.Errorf("a subscription replaced at the device's cap: %d %s", a.status, a.body)
		}
		for n := agentbridge.MaxPushPerDevice; n < c.want; n++ {
			if a := subscribe(devices[n/agentbridge.MaxPushPerDevice], fmt.Sprintf("%d-%d", n/agentbridge.MaxPushPerDevice, n)); a.status != 200 {
				t.Fatalf("subscription %d in all: %d %s", n+1, a.status, a.body)
			}
		}
		a = subscribe(devices[len(devices)-1], "last")
		if a.status != http.StatusTooManyRequests || !strings.Contains(a.errField("message").(string), fmt.Sprintf("This bridge keeps %d push subscriptions already", c.want)) {
			t.Errorf("subscription %d in all: %d %s", c.want+1, a.status, a.body)
		}
		var list struct{ Subscriptions []json.RawMessage }
		_ = json.Unmarshal(ts.must(200, "GET", "/push/subscriptions", "").body, &list)
		if len(list.Subscriptions) != c.want {
			t.Errorf("%d subscriptions stored, want %d", len(list.Subscriptions), c.want)
		}
	}
}

// ntfyRequest is one request the fake ntfy endpoint received.
type ntfyRequest struct {
	header http.Header
	body   string
}

// fakeNtfy is an ntfy endpoint that keeps what it receives.
func fakeNtfy(t *testing.T) (*httptest.Server, func() []ntfyRequest) {
	var mu sync.Mutex
	var got []ntfyRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, ntfyRequest{r.Header.Clone(), string(b)})
		mu.Unlock()
		_, _ = io.WriteString(w, `{"id":"x"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []ntfyRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]ntfyRequest(nil), got...)
	}
}

// TestNtfy: an ntfy topic gets the title, the category's priority and a
// click link to the event, with its access token and never the bridge's;
// the message's text only with include_content.
func TestNtfy(t *testing.T) {
	t.Parallel()
	srv, got := fakeNtfy(t)
	tokenFile := filepath.Join(t.TempDir(), "ntfy-token")
	if err := os.WriteFile(tokenFile, []byte("tk_ntfy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, Options{Token: "bridge-secret", Notify: notify.Options{
		Ntfy:    notify.Ntfy{URL: srv.URL + "/agents", TokenFile: tokenFile},
		BaseURL: func() string { return "https://laptop.example.ts.net" },
	}})
	ts.newThread("t1")
	var ans struct{ Event agentbridge.Event }
	_ = json.Unmarshal(ts.must(200, "POST", "/threads/t1/events", permissionRequest).body, &ans)
	waitFor(t, 5*time.Second, "the ntfy request", func() bool { return len(got()) == 1 })
	r := got()[0]
	id := ans.Event.ID
	if r.header.Get("Title") != "fake-acp asks permission" || r.header.Get("Priority") != "5" ||
		r.header.Get("Click") != "https://laptop.example.ts.net/ui/threads/t1#event-"+id || r.header.Get("Authorization") != "Bearer tk_ntfy" {
		t.Errorf("ntfy headers = %v", r.header)
	}
	if strings.Contains(r.body, "Write file") || r.body != "In “thread t1”: open it to answer." {
		t.Errorf("ntfy body %q carries content without include_content", r.body)
	}
	for k, vs := range r.header {
		for _, v := range vs {
			if strings.Contains(v, "bridge-secret") {
				t.Errorf("the bridge's token went out in %s", k)
			}
		}
	}

	srv2, got2 := fakeNtfy(t)
	ts2 := newTestServer(t, Options{Notify: notify.Options{Ntfy: notify.Ntfy{URL: srv2.URL + "/agents", IncludeContent: true}}})
	ts2.newThread("t1")
	ts2.must(200, "POST", "/threads/t1/events", `{"from":"claude","to":"user","content":"[USER QUESTION]: which file?","meta":{"tags":["coordinator","question"],"via":"coordinator"}}`)
	waitFor(t, 5*time.Second, "the ntfy request with content", func() bool { return len(got2()) == 1 })
	if r := got2()[0]; r.body != "[USER QUESTION]: which file?" || r.header.Get("Priority") != "4" || !strings.HasPrefix(r.header.Get("Click"), ts2.url+"/ui/threads/t1#event-") {
		t.Errorf("ntfy with content: %q %v", r.body, r.header)
	}

	// A tool's title is the agent's text: with include_content it is the
	// title's end, on one line, without control characters, clipped, and
	// RFC 2047-encoded when not ASCII; without, none of it goes out, and a
	// participant that is not an id is not taken.
	ts2.must(200, "POST", "/threads/t1/events", hostileRequest)
	waitFor(t, 5*time.Second, "the ntfy request of the hostile title", func() bool { return len(got2()) == 2 })
	raw := got2()[1].header.Get("Title")
	title, err := new(mime.WordDecoder).DecodeHeader(raw)
	if err != nil || !strings.HasPrefix(title, "coordinator asks permission: Write café.txt X-Evil: 1 aaaa") ||
		!strings.HasSuffix(title, "a…") || utf8.RuneCountInString(title) > 120 || strings.ContainsFunc(title, func(r rune) bool { return unicode.IsControl(r) || r == '\u202e' }) {
		t.Errorf("ntfy Title %q (%v), want one clipped line without control characters", title, err)
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r >= utf8.RuneSelf }) || got2()[1].header.Get("X-Evil") != "" {
		t.Errorf("ntfy headers %v: the Title is not RFC 2047-encoded ASCII, or the agent made a header", got2()[1].header)
	}
	ts.must(200, "POST", "/threads/t1/events", hostileRequest)
	waitFor(t, 5*time.Second, "the ntfy request of the hostile title without content", func() bool { return len(got()) == 2 })
	r = got()[1]
	if r.header.Get("Title") != "coordinator asks permission" || r.header.Get("X-Evil") != "" || r.body != "In “thread t1”: open it to answer." {
		t.Errorf("ntfy headers without include_content = %v", r.header)
	}
	for k, vs := range r.header {
		for _, v := range vs {
			if strings.Contains(v, "Write") || strings.Contains(v, "caf") {
				t.Errorf("the tool's title went out in %s: %q", k, v)
			}
		}
	}
	if strings.Contains(r.body, "Write") {
		t.Errorf("ntfy body %q carries the tool's title", r.body)
	}
}

// TestNtfyCategories: an ntfy topic gets what waits for the person and
// what failed, not every reply, unless notify.ntfy.categories asks for
// replies; each note's text fits its event and names the thread by its
// name.
func TestNtfyCategories(t *testing.T) {
	t.Parallel()
	reply := `{"from":"claude","to":"user","content":"done, the tests pass"}`
	failed := `{"from":"coordinator","to":"user","content":"claude's run failed: exit 1","meta":{"via":"coordinator","tags":["coordinator","error"],"participant":"claude"}}`
	question := `{"from":"claude","to":"user","content":"[USER QUESTION]: which file?","meta":{"tags":["coordinator","question"],"via":"coordinator"}}`
	for _, tc := range []struct {
		name       string
		categories []string
		want       []string // the bodies, in order
	}{
		{"default", nil, []string{"In “thread t1”: open it to see why.", "In “thread t1”: open it to answer."}},
		{"with replies", []string{"reply", "failed"}, []string{"In “thread t1”: open it to read it.", "In “thread t1”: open it to see why."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, got := fakeNtfy(t)
			ts := newTestServer(t, Options{Notify: notify.Options{Ntfy: notify.Ntfy{URL: srv.URL + "/agents", Categories: tc.categories}}})
			ts.newThread("t1")
			for _, body := range []string{reply, failed, question} {
				ts.must(200, "POST", "/threads/t1/events", body)
			}
			// A last note every config sends, so that waiting for it
			// waits for the ones before.
			ts.must(200, "POST", "/threads/t1/events", failed)
			waitFor(t, 5*time.Second, "the ntfy requests", func() bool { return len(got()) == len(tc.want)+1 })
			var bodies []string
			for _, r := range got()[:len(tc.want)] {
				bodies = append(bodies, r.body)
			}
			if strings.Join(bodies, "|") != strings.Join(tc.want, "|") {
				t.Errorf("ntfy bodies = %q, want %q", bodies, tc.want)
			}
		})
	}
}

// hostileRequest is a permission request whose tool title holds line
// breaks, a control character, a bidirectional override and more than a
// title's length, and whose participant is not an id.
const hostileRequest = `{"from":"coordinator","to":"user","content":"x","meta":{"via":"coordinator","tags":["coordinator","permission"],"participant":"fake-acp\nX-Evil: 2","permission":{"invocation":7,"tool_call":{"title":"Write caf\u00e9.txt\r\n X-Evil: 1\u0007\u202e ` + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + `","kind":"edit"},"options":[{"id":"allow","name":"Allow","kind":"allow_once"}]}}}`

// TestPushRedirectsAndFailures: even with private endpoints allowed (so
// that loopback is reached), a push endpoint's redirect is never followed:
// the 307 is the outcome, and the address it points at gets nothing
// (contract 8.3). A port that refuses the connection and one that answers
// something that is not TLS leave the same outcome, "failed: unreachable",
// so the outcomes a person token reads map no port; the log says which.
func TestPushRedirectsAndFailures(t *testing.T) {
	t.Parallel()
	var inside atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inside.Add(1) }))
	defer target.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/admin", http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := closed.Addr().String()
	closed.Close()
	notTLS, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer notTLS.Close()
	go func() {
		for {
			c, err := notTLS.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n")
			c.Close()
		}
	}()
	fp := fakepush.Start()
	defer fp.Close()
	keys, err := fp.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.Buffer{}
	opts := privatePush
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	ts := newTestServer(t, opts)
	ts.newThread("t1")
	endpoints := map[string]string{
		"redirect": redirect.URL + "/push", "refused": "https://" + refusing + "/push", "not-tls": "https://" + notTLS.Addr().String() + "/push",
	}
	for device, ep := range endpoints {
		ts.must(200, "POST", "/push/subscriptions", `{"endpoint":"`+ep+`","keys":{"p256dh":"`+keys.P256dh+`","auth":"`+keys.Auth+`"},"device":"`+device+`","categories":{"permission":true}}`)
	}
	ts.must(200, "POST", "/threads/t1/events", permissionRequest)
	outcomes := map[string]string{}
	waitFor(t, 20*time.Second, "the three outcomes", func() bool {
		var list struct{ Devices []agentbridge.Device }
		_ = json.Unmarshal(ts.must(200, "GET", "/devices", "").body, &list)
		for _, d := range list.Devices {
			outcomes[d.Name] = d.LastOutcome
		}
		return outcomes["redirect"] != "" && outcomes["refused"] != "" && outcomes["not-tls"] != ""
	})
	want := map[string]string{"redirect": "failed: 307", "refused": agentbridge.PushUnreachable, "not-tls": agentbridge.PushUnreachable}
	for d, o := range want {
		if outcomes[d] != o {
			t.Errorf("%s's outcome %q, want %q", d, outcomes[d], o)
		}
	}
	if n := inside.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests, want none", n)
	}
	if !strings.Contains(logs.String(), "connection refused") || !strings.Contains(logs.String(), "first record does not look like a TLS handshake") {
		t.Errorf("the log does not say why each failed:\n%s", logs)
	}
}
