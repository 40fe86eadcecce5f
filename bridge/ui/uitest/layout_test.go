package uitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// viewport is a screen size the UI is tested at.
type viewport struct {
	name   string
	w, h   int64
	mobile bool
}

var (
	phone   = viewport{"phone", 390, 844, true}
	desktop = viewport{"desktop", 1400, 900, false}
)

// resize emulates the viewport (at scale 1, so screenshots stay small).
func (b *browser) resize(v viewport) {
	b.t.Helper()
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
	if v.mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	b.run("emulate "+v.name, chromedp.EmulateViewport(v.w, v.h, opts...))
}

// docShot takes a screenshot of the page as it is and, with
// UPDATE_SCREENSHOTS=1, writes it to docs/ (docs/ui.md shows them); without
// it the tree is left as it was, so CI stays clean.
func (b *browser) docShot(name string) {
	b.t.Helper()
	png := b.screenshot(name)
	if os.Getenv("UPDATE_SCREENSHOTS") != "1" {
		return
	}
	root, err := testutil.ModuleRoot()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// JS expressions about the layout.
const (
	// lastInView: the newest rendered event's bottom is inside the events box.
	lastInView = `(() => { const box = document.querySelector("#events").getBoundingClientRect();
		const evs = document.querySelectorAll("#event-list .event:not(.future)"); const last = evs[evs.length - 1];
		if (!last) return false; const r = last.getBoundingClientRect(); return r.bottom <= box.bottom + 1 && r.bottom > box.top; })()`
	// overflowing lists what sticks out to the right of the window (code
	// blocks and tables scroll inside themselves and are left out).
	overflowing = `(() => { const out = [];
		if (document.documentElement.scrollWidth > innerWidth) out.push("page " + document.documentElement.scrollWidth);
		for (const e of document.querySelectorAll("body *")) {
			if (e.offsetParent === null || e.closest("pre, .md table, dialog:not([open]), #sidebar, #panel")) continue;
			const r = e.getBoundingClientRect(); if (r.width && r.right > innerWidth + 1) out.push((e.id || e.className || e.tagName) + " " + Math.round(r.right));
		}
		return out; })()`
	// splitCells lists the Markdown table cells holding one word that is
	// drawn on more than one line: a table keeps its words whole and
	// scrolls inside itself when it is wider than the event.
	splitCells = `Array.from(document.querySelectorAll(".md th, .md td")).filter((c) => {
		if (/\s/.test(c.textContent.trim())) return false;
		const r = document.createRange(); r.selectNodeContents(c); return r.getClientRects().length > 1;
	}).map((c) => c.textContent)`
	// lastText is the body text of the newest event.
	lastText = `(() => { const evs = document.querySelectorAll("#event-list .event"); return evs.length ? evs[evs.length - 1].querySelector(".event-body").textContent : ""; })()`
)

// inWindow is a JS expression: the element matching sel lies inside the
// window.
func inWindow(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e || !e.checkVisibility()) return false; const r = e.getBoundingClientRect(); return r.left >= -1 && r.right <= innerWidth + 1 && r.top >= -1 && r.bottom <= innerHeight + 1 && r.width > 0; })()`, sel)
}

// seedConversation fills a thread with a conversation long enough to scroll:
// Markdown of every kind agents write, and an agent invited.
func seedConversation(s *stack, name string) string {
	th := s.newThread(name)
	s.invite(th, "echo", "Echo")
	for i := 1; i <= 12; i++ {
		// To all, with no mention: the running coordinator stays out of it.
		s.post(th, map[string]any{"from": "user", "content": fmt.Sprintf("Step %d: what do we check next?", i)})
		reply := fmt.Sprintf("For step %d:\n\n- run the **unit** tests\n- read `docs/ui.md`\n- then *[nods]* ask again", i)
		if i == 3 {
			reply = "A **bold** claim, and <script>window.__xss=1</script> shown as typed."
		}
		if i == 6 {
			reply = "Here is the patch:\n\n```go\nfunc main() {\n\tfmt.Println(\"a rather long line of code that is wider than any phone screen would ever be\")\n}\n```\n\n| check | state |\n|---|---|\n| vet | ok |\n| race | ok |\n| TestLayoutPhoneAndDesktop_and_every_subtest_of_the_package | ok |"
		}
		s.post(th, map[string]any{"from": "echo", "to": "user", "content": reply, "meta": map[string]any{"tags": []string{"coordinator"}, "via": "bridge-coordinator"}})
	}
	return th
}

// TestLayoutPhoneAndDesktop opens a long conversation at 390×844 and at
// 1400×900: nothing overflows to the right, the thread opens with its last
// event in view once everything is drawn, the idle agent shows available,
// the composer is on screen and a message sent with it scrolls into view;
// scrolled up, a new event shows as "1 new" until the pill is clicked. On
// the phone the thread list and the panel are drawers, whose screenshots
// are in docs/ui.md.
func TestLayoutPhoneAndDesktop(t *testing.T) {
	t.Parallel()
	for _, vp := range []viewport{phone, desktop} {
		t.Run(vp.name, func(t *testing.T) {
			s := newStack(t)
			s.startServe()
			s.startCoordinator()
			th := seedConversation(s, "Release checklist")
			s.newThread("Design notes")
			b := newBrowser(t)
			b.resize(vp)
			b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
			echo := `document.querySelector('#participant-list .participant[data-id="echo"]')`
			b.waitJS("the idle agent available", echo+` && `+echo+`.dataset.presence === "available"`)
			b.waitJS("the last event in view", lastInView+` && `+contains(lastText, "Step 12")+` === false && `+contains(lastText, "For step 12"))
			b.waitJS("the date separator", `document.querySelector("#event-list .event.day-start").dataset.dayLabel === "Today"`)
			if got := eval[[]string](b, overflowing); len(got) > 0 {
				t.Errorf("wider than the %d px window: %v", vp.w, got)
			}
			if got := eval[string](b, `Array.from(document.querySelectorAll("#event-list strong")).map(e => e.textContent).join(",") + " " + typeof window.__xss`); !strings.Contains(got, ",bold,") || !strings.HasSuffix(got, " undefined") {
				t.Errorf("Markdown and script: strong elements and window.__xss = %q, want **bold** in <strong> and no script run", got)
			}
			if got := eval[[]string](b, splitCells); len(got) > 0 {
				t.Errorf("table cells split mid-word (a wide table should scroll instead): %q", got)
			}
			if !eval[bool](b, contains(eventsText, "A bold claim, and <script>window.__xss=1</script> shown as typed.")) {
				t.Error("the <script> in a message is not shown as typed")
			}
			// On a phone the text box has a row of its own, the whole width
			// (it was 190 px between the recipient and Send).
			minInput := 150
			if vp.mobile {
				minInput = 300
			}
			if !eval[bool](b, inWindow("#message-input")+` && `+inWindow("#send-btn")+` && `+inWindow("#to-select")+` && document.querySelector("#message-input").getBoundingClientRect().width >= `+strconv.Itoa(minInput)) {
				t.Errorf("the composer is not usable: input %v", eval[any](b, `JSON.stringify(document.querySelector("#message-input").getBoundingClientRect())`))
			}
			if !eval[bool](b, lastInView) {
				t.Error("the last event left the view once receipts, presence and the panel were drawn")
			}
			b.screenshot("ui-layout-" + vp.name + "-thread.png")

			b.run("type a message", chromedp.SendKeys(chromedp.ID("message-input"), "Posted from the "+vp.name))
			b.pressEnter("#message-input", false)
			b.waitJS("the posted message at the bottom, in view", `(`+lastText+`) === "Posted from the `+vp.name+`" && `+lastInView)
			b.waitJS("the composer cleared (the post answered)", `document.querySelector("#message-input").value === ""`)

			// Scrolled up, a new event does not move the view: the pill counts it.
			eval[bool](b, `(() => { const e = document.querySelector("#events"); e.scrollTop = 0; e.dispatchEvent(new Event("scroll")); return true })()`)
			b.waitJS("scrolled up", `document.querySelector("#events").scrollTop === 0`)
			s.post(th, map[string]any{"from": "echo", "to": "user", "content": "a late reply"})
			b.waitJS("the pill", `!document.querySelector("#new-pill").hidden && document.querySelector("#new-pill").textContent.startsWith("1 new")`)
			if !eval[bool](b, `document.querySelector("#events").scrollTop < 50`) {
				t.Error("a new event moved a view that was scrolled up")
			}
			b.click("the pill", "#new-pill")
			b.waitJS("back at the newest, pill gone", `(`+lastText+`) === "a late reply" && `+lastInView+` && document.querySelector("#new-pill").hidden`)

			if vp.mobile {
				if eval[bool](b, inWindow("#sidebar")) || eval[bool](b, inWindow("#panel")) {
					t.Error("on a phone the thread list and the panel should start closed")
				}
				b.click("open the thread list", "#threads-toggle")
				b.waitJS("the thread list drawer", inWindow("#sidebar")+` && document.querySelectorAll("#thread-list .thread-item").length >= 2`)
				b.docShot("ui-phone-threads-drawer.png")
				b.click("pick another thread", `#thread-list .thread-item[data-id]:not(.active)`)
				b.waitJS("the drawer closed on the other thread", `document.querySelector("#thread-title").textContent === "Design notes" && !document.body.classList.contains("show-threads")`)
				b.run("back", chromedp.NavigateBack())
				b.waitJS("the first thread again", `document.querySelector("#thread-title").textContent === "Release checklist"`)
				b.click("open the panel", "#panel-toggle")
				b.waitJS("the panel drawer", inWindow("#panel")+` && `+echo)
				b.docShot("ui-phone-panel.png")
				// The backdrop is the dimmed strip left of the drawer.
				b.run("close it on the backdrop", chromedp.MouseClickXY(20, 400))
				b.waitJS("the panel closed", `!document.body.classList.contains("show-panel")`)
				// With no thread open, the phone shows the thread list.
				b.run("open the UI's start", chromedp.Navigate(s.url+"/ui/"))
				b.waitJS("the thread list fills the screen", inWindow("#sidebar")+` && document.querySelector("#sidebar").getBoundingClientRect().width >= 380 && document.querySelectorAll("#thread-list .thread-item").length >= 2`)
			} else {
				for _, sel := range []string{"#sidebar", "#panel", "#thread-title"} {
					if !eval[bool](b, inWindow(sel)) {
						t.Errorf("%s is not on screen at %d px", sel, vp.w)
					}
				}
			}
		})
	}
}

// TestTitleReadableAt1024: at 1024 px the header's buttons leave the thread
// title room to be read in full.
func TestTitleReadableAt1024(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("design review of the phone layout")
	b := newBrowser(t)
	b.resize(viewport{"1024", 1024, 768, false})
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the thread", `document.querySelector("#thread-title").textContent === "design review of the phone layout"`)
	title := `document.querySelector("#thread-title")`
	if !eval[bool](b, title+`.scrollWidth <= `+title+`.clientWidth`) {
		t.Errorf("the title is cut at 1024 px: %d of %d px shown", eval[int](b, title+`.clientWidth`), eval[int](b, title+`.scrollWidth`))
	}
}

// TestIdleAgentShowsAvailable: participants invited before the coordinator
// started, and never run, show available when the coordinator has an
// adapter for them, offline when it has none.
func TestIdleAgentShowsAvailable(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("Idle")
	s.invite(th, "echo", "")
	s.post(th, map[string]any{"type": "control", "from": "user", "content": map[string]any{
		"invite": map[string]any{"participant_id": "ghost", "profile": map[string]any{"client": "nobody", "model": "none"}},
	}})
	s.startCoordinator()
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	li := func(id string) string {
		return fmt.Sprintf(`document.querySelector('#participant-list .participant[data-id=%q]')`, id)
	}
	b.waitJS("echo available", li("echo")+` && `+li("echo")+`.dataset.presence === "available" && `+li("echo")+`.querySelector(".p-state").textContent === "available"`)
	if got := eval[string](b, li("ghost")+`.dataset.presence`); got != "offline" {
		t.Errorf("a participant no adapter serves shows %q, want offline", got)
	}
	// Where each agent runs (contract 7.1): the host its coordinator
	// reports, and none for the one nobody serves.
	host, _ := os.Hostname()
	if got := eval[string](b, li("echo")+`.querySelector(".p-host").textContent`); got != "@ "+host {
		t.Errorf("echo's host shows %q, want %q", got, "@ "+host)
	}
	if got := eval[string](b, li("ghost")+`.querySelector(".p-host").textContent`); got != "" {
		t.Errorf("ghost's host shows %q, want nothing", got)
	}
}

// grantNotifications allows the page's origin to show notifications, as a
// person clicking Allow would.
func (b *browser) grantNotifications(origin string) {
	b.t.Helper()
	b.run("grant notifications", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := cdp.Call(ctx, chromedp.FromContext(ctx).Browser, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"},
			Setting:    cdpbrowser.PermissionSettingGranted,
			Origin:     origin,
		})
		return err
	}))
}

// TestNotificationForQuestionToViewer: with notifications allowed, a hidden
// page keeps its stream and raises one notification for a question
// addressed to the viewer, none for a question to someone else.
func TestNotificationForQuestionToViewer(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("Questions")
	b := newBrowser(t)
	b.grantNotifications(s.url)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("live", `document.querySelector("#conn-status").textContent === "live" && document.querySelector("#thread-title").textContent === "Questions"`)
	if got := b.text("#notify-btn"); got != "Notifications on" {
		t.Errorf("notify button = %q with the permission granted", got)
	}
	// Record what the page shows; the real constructor still runs.
	eval[bool](b, `(() => { const N = window.Notification; window.__shown = [];
		window.Notification = class extends N { constructor(title, opts) { window.__shown.push({title, body: (opts || {}).body || ""}); super(title, opts); } };
		Object.defineProperty(document, "hidden", {configurable: true, get: () => true}); document.dispatchEvent(new Event("visibilitychange")); return true })()`)
	question := func(to, text string) {
		s.post(th, map[string]any{"from": "ada", "to": to, "content": text, "meta": map[string]any{"tags": []string{"coordinator", "question"}, "via": "bridge-coordinator"}})
	}
	question("someone-else", "not for you")
	question("user", "ship it today?")
	b.waitJS("one notification", `window.__shown.length === 1`)
	if got := eval[string](b, `window.__shown[0].title + " | " + window.__shown[0].body`); got != "ada asks you | ship it today?\n— Questions" {
		t.Errorf("notification = %q", got)
	}
	if got := b.text("#conn-status"); got != "live" {
		t.Errorf("the hidden page's stream is %q; with notifications on it must stay live", got)
	}
}
