package uitest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/agent-bridge/agent-bridge/internal/testkit/fakepush"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// deliverPush delivers payload to the service worker of reg, as a push
// service would, until a notification shows, and returns the worker's
// notifications: {title, body, tag, url, actions (their titles)} each.
// DevTools drops a push that reaches a worker still starting, so it is
// delivered again while none shows.
func deliverPush[T any](b *browser, origin string, reg serviceworker.RegistrationID, payload []byte, what string) []T {
	b.t.Helper()
	deliveries := 0
	testutil.WaitFor(b.t, waitTimeout, what, func() bool {
		shown := eval[int](b, `(navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns => { window.__notes = ns.map(n => ({title: n.title, body: n.body, tag: n.tag, url: n.data && n.data.url, actions: n.actions.map(a => a.title)})); }), Array.isArray(window.__notes) ? window.__notes.length : 0)`)
		if shown > 0 {
			return true
		}
		if deliveries%10 == 0 {
			b.run("deliver a push", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := cdp.Call(ctx, tg, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{Origin: origin, RegistrationID: reg, Data: string(payload)})
				return err
			}))
		}
		deliveries++
		return false
	})
	return eval[[]T](b, `window.__notes`)
}

// pages counts the browser's open windows (page targets).
func (b *browser) pages() int {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	infos, err := chromedp.Targets(ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	n := 0
	for _, i := range infos {
		if i.Type == "page" {
			n++
		}
	}
	return n
}

// inWorker evaluates expr (awaiting its promise) in the service worker
// whose script is url, attached through the DevTools protocol.
func inWorker[T any](b *browser, url, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	var id target.ID
	testutil.WaitFor(b.t, waitTimeout, "the service worker's target", func() bool {
		infos, err := chromedp.Targets(ctx)
		if err != nil {
			return false
		}
		for _, i := range infos {
			if i.Type == "service_worker" && i.URL == url {
				id = i.TargetID
				return true
			}
		}
		return false
	})
	// Detached, not closed, when done: closing the target would stop
	// the worker.
	wctx, wcancel := chromedp.NewContext(b.ctx, chromedp.WithTargetID(id), chromedp.WithDetachOnCancel())
	defer wcancel()
	wctx, tcancel := context.WithTimeout(wctx, waitTimeout)
	defer tcancel()
	v, err := chromedp.Run(wctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate in the service worker %s: %v", expr, err)
	}
	return v
}

// clickAction is a script for the service worker: it taps action on the
// notification of event, as the platform does, and resolves once the
// worker's handler is done. DevTools cannot tap a notification, so the
// event is dispatched in the worker; a dispatched event's waitUntil cannot
// extend it, so the script takes the handler's promise itself.
func clickAction(event, action string) string {
	return `(async () => {
  const n = (await self.registration.getNotifications()).find((x) => x.tag === ` + jsString(event) + `);
  if (!n) return "no notification";
  const ev = new NotificationEvent("notificationclick", { notification: n, action: ` + jsString(action) + ` });
  let work = Promise.resolve();
  ev.waitUntil = (p) => { work = p; };
  self.dispatchEvent(ev);
  await work;
  return "done";
})()`
}

// TestNotificationActionAnswers: a real permission request (the fake ACP
// agent through a real coordinator) is pushed by the bridge (through the
// project's fake push service); its payload, delivered to a paired
// browser's service worker, shows a notification with Allow once and
// Deny; a tap on Allow answers from the worker with the browser's login
// cookie (the bridge requires a token), the agent's turn goes on with
// allow, and no window opened. A tap on the same request's Deny later is
// told "already answered by user at …" in a notification.
func TestNotificationActionAnswers(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.ownToken = true
	s.allowLocalPush()
	s.agents = map[string]any{
		"acpy": map[string]any{"acp": []string{fakeACPAgent(t)}, "permissions": "ask", "workdir": t.TempDir()},
	}
	s.startServe()
	s.startCoordinator()
	th := s.newThread("Answered from the lock screen")
	s.post(th, map[string]any{"type": "control", "from": "user", "content": map[string]any{
		"invite": map[string]any{"participant_id": "acpy", "profile": map[string]any{"client": "fake-acp", "model": "fake-1"}},
	}})

	// The bridge pushes to the fake push service, which decrypts what a
	// browser would get.
	fp := fakepush.Start()
	defer fp.Close()
	var key struct {
		Public string `json:"public_key"`
	}
	s.mustAPI(http.MethodGet, "/push/key", nil, &key)
	fp.ExpectKey(key.Public)
	sub, err := fp.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	s.mustAPI(http.MethodPost, "/push/subscriptions", map[string]any{"endpoint": sub.Endpoint, "keys": map[string]string{"p256dh": sub.P256dh, "auth": sub.Auth},
		"device": "phone", "categories": map[string]any{"permission": true}}, nil)

	// The phone, paired: its login cookie is a person token of its own.
	var pair struct {
		Code string `json:"code"`
	}
	s.mustAPI(http.MethodPost, "/auth/pair", map[string]any{"name": "phone"}, &pair)
	b := newBrowser(t)
	b.grantNotifications(s.url)
	b.run("open the pairing link", chromedp.Navigate(s.url+"/ui/#pair="+pair.Code))
	b.waitJS("paired", `document.querySelector("#pair-dialog").open && document.querySelector("#pair-heading").textContent === "Paired as “phone”"`)
	b.click("open the app", "#pair-done")
	b.waitJS("the service worker active", `(navigator.serviceWorker.ready.then(() => { window.__swReady = true; }), window.__swReady === true)`)
	reg := b.swRegistration(s.url + "/ui/")

	trigger := s.post(th, map[string]any{"from": "user", "to": "acpy", "content": "PERMISSION to mkdir demo"})
	var payload []byte
	var reqID string
	testutil.WaitFor(t, waitTimeout, "the push of the permission request", func() bool {
		for _, m := range fp.Messages() {
			if m.Err != nil {
				t.Fatalf("the push service refused a push: %v", m.Err)
			}
			var n struct{ Category, Event string }
			if json.Unmarshal(m.Payload, &n) == nil && n.Category == "permission" {
				payload, reqID = m.Payload, n.Event
				return true
			}
		}
		return false
	})
	type note struct {
		Title, Body, Tag string
		Actions          []string
	}
	notes := deliverPush[note](b, s.url, reg, payload, "the notification shown")
	if len(notes) != 1 || notes[0].Tag != reqID || notes[0].Title != "acpy asks permission: mkdir demo" || strings.Join(notes[0].Actions, "|") != "Allow once|Deny" {
		t.Fatalf("notifications = %+v, want the request with Allow once and Deny", notes)
	}

	windows := b.pages()
	worker := s.url + "/ui/sw.js"
	if got := inWorker[string](b, worker, clickAction(reqID, "allow")); got != "done" {
		t.Fatalf("tap Allow: %s", got)
	}
	reply := func() string {
		var page struct {
			Events []struct {
				From, Type string
				Content    any
				Meta       struct {
					ReplyTo string `json:"reply_to"`
				}
			}
		}
		s.mustAPI(http.MethodGet, "/threads/"+th+"/events", nil, &page)
		for _, e := range page.Events {
			if e.From == "acpy" && e.Type == "message" && e.Meta.ReplyTo == trigger["id"] {
				text, _ := e.Content.(string)
				return text
			}
		}
		return ""
	}
	testutil.WaitFor(t, waitTimeout, "the agent's reply", func() bool { return reply() != "" })
	if got := reply(); got != "permission: allow" {
		t.Errorf("the agent's reply = %q, want permission: allow", got)
	}
	if got := b.pages(); got != windows {
		t.Errorf("%d windows after the tap, %d before: the tap opened one", got, windows)
	}
	if n := eval[int](b, `(navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns => { window.__left = ns.length; }), window.__left ?? -1)`); n != 0 {
		b.waitJS("the notification closed", `window.__left === 0`)
	}

	// The same request answered again (another device's stale
	// notification): the bridge's sentence, in a notification.
	eval[bool](b, `(window.__notes = undefined, true)`)
	deliverPush[note](b, s.url, reg, payload, "the request's notification again")
	if got := inWorker[string](b, worker, clickAction(reqID, "deny")); got != "done" {
		t.Fatalf("tap Deny: %s", got)
	}
	b.waitJS("the already-answered notification", `(navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns => { window.__notes = ns.map(n => ({title: n.title, body: n.body})); }), (window.__notes || []).some(n => n.title === "Already answered" && /^this permission request was already answered by user at \d{4}-/.test(n.body)))`)
	if got := b.pages(); got != windows {
		t.Errorf("%d windows after the second tap, %d before", got, windows)
	}
}
