package uitest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakepush"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestPushDeliveriesShown (contract 8.4): the Notifications dialog lists,
// per device, what became of its last pushes in words: on a phone's
// screen, a push the fake push service answered 410 reads as expired, one
// answered 500 as failed with that status, one taken as delivered; the
// text is at least 16 px.
func TestPushDeliveriesShown(t *testing.T) {
	t.Parallel()
	fp := fakepush.Start()
	defer fp.Close()
	s := newStack(t)
	s.allowLocalPush()
	s.startServe()
	th := s.newThread("pushes")
	for _, d := range []struct {
		name   string
		status int
	}{{"old phone", http.StatusGone}, {"tablet", http.StatusInternalServerError}, {"laptop", http.StatusCreated}} {
		sub, err := fp.Subscribe()
		if err != nil {
			t.Fatal(err)
		}
		fp.SetStatus(sub.Endpoint, d.status)
		s.mustAPI(http.MethodPost, "/push/subscriptions", map[string]any{"endpoint": sub.Endpoint, "keys": map[string]string{"p256dh": sub.P256dh, "auth": sub.Auth},
			"device": d.name, "categories": map[string]bool{"permission": true}}, nil)
	}
	s.post(th, map[string]any{"from": "coordinator", "to": "user", "content": "acpy asks permission to run mkdir demo.",
		"meta": map[string]any{"via": "coordinator", "tags": []string{"coordinator", "permission"}, "participant": "acpy",
			"permission": map[string]any{"invocation": 1, "tool_call": map[string]any{"title": "mkdir demo"}, "options": []map[string]string{{"id": "allow", "name": "Allow", "kind": "allow_once"}}}}})
	testutil.WaitFor(t, waitTimeout, "the three outcomes at the bridge", func() bool {
		var list struct{ Devices []agentbridge.Device }
		s.mustAPI(http.MethodGet, "/devices", nil, &list)
		n := 0
		for _, d := range list.Devices {
			n += len(d.Deliveries)
		}
		return n == 3
	})

	b := newBrowser(t)
	b.resize(phone)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the Notifications button", `document.querySelector("#push-btn").hidden === false && document.querySelector("#event-list .event") !== null`)
	eval[bool](b, `(document.querySelector("#push-btn").click(), true)`)
	b.waitJS("the recent pushes", `document.querySelector("#push-deliveries").hidden === false && document.querySelectorAll(".push-delivery").length === 3`)
	got := eval[string](b, `JSON.stringify([...document.querySelectorAll(".push-device")].map((d) => d.querySelector(".push-device-name").textContent + ": " + d.querySelector(".push-delivery-what").textContent))`)
	var lines []string
	if err := json.Unmarshal([]byte(got), &lines); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"old phone: Expired: the push service no longer knows this browser; turn notifications on there again.",
		"tablet: Failed: the push service answered 500.",
		"laptop: Delivered to the push service.",
	} {
		if !strings.Contains(strings.Join(lines, "\n"), want) {
			t.Errorf("the dialog lists %q, want %q among them", lines, want)
		}
	}
	if px := eval[float64](b, `parseFloat(getComputedStyle(document.querySelector(".push-delivery")).fontSize)`); px < 16 {
		t.Errorf("a push's line is %.0f px, want at least 16", px)
	}
	b.docShot("ui-phone-pushes.png")
}
