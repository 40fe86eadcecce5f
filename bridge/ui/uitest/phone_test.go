package uitest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// envAxe names axe-core's axe.min.js (.ci/install-axe prints it); without
// it the tests look where .ci/install-axe puts it.
const envAxe = "AGENT_BRIDGE_AXE"

// axeSource returns axe-core's script, skipping the test when it is not
// installed (failing instead under CI, where .ci/run installs it).
func axeSource(t testing.TB) string {
	t.Helper()
	path := os.Getenv(envAxe)
	if path == "" {
		root, err := testutil.ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(root, ".ci", "axe", "node_modules", "axe-core", "axe.min.js")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		why := fmt.Sprintf("axe-core is not installed (%v): run .ci/install-axe (npm), or set %s to its axe.min.js", err, envAxe)
		if os.Getenv("CI") != "" {
			t.Fatal(why + "; CI is set, so the accessibility checks must run")
		}
		t.Skip(why)
	}
	return string(b)
}

// axeViolations runs axe-core over the page as it is and returns its
// serious and critical violations, one line each. The DevTools protocol
// evaluates the script, so the page's CSP does not stand in its way, and
// nothing of axe is ever served by the bridge.
func (b *browser) axeViolations(src string) []string {
	b.t.Helper()
	eval[bool](b, `window.axe !== undefined || (() => { `+src+`; return true })()`)
	return eval[[]string](b, `axe.run(document, {resultTypes: ["violations"]}).then((r) => r.violations
		.filter((v) => v.impact === "serious" || v.impact === "critical")
		.map((v) => v.impact + " " + v.id + ": " + v.help + " at " + v.nodes.slice(0, 5).map((n) => n.target.join(" ")).join(", ")))`,
		chromedp.EvalAwaitPromise)
}

// smallTargets lists the visible buttons, links, fields and summaries
// smaller than 44×44 CSS px, the tap target the platforms ask for. A link
// inside a sentence of message text is left out, as WCAG 2.5.8 leaves it
// out: it flows with the words around it.
const smallTargets = `(() => {
	const out = [];
	for (const e of document.querySelectorAll("button, a[href], input, select, textarea, summary")) {
		if (!e.checkVisibility({visibilityProperty: true, opacityProperty: false})) continue;
		if (e.closest(".md") && e.tagName === "A") continue;
		const r = e.getBoundingClientRect();
		if (r.width === 0 && r.height === 0) continue;
		if (r.width < 43.5 || r.height < 43.5) out.push((e.id ? "#" + e.id : e.tagName.toLowerCase() + "." + String(e.className).split(" ")[0]) + " " + Math.round(r.width) + "×" + Math.round(r.height) + " “" + (e.textContent || e.value || e.getAttribute("aria-label") || "").trim().slice(0, 30) + "”");
	}
	return out; })()`

// smallText lists visible text of the page's main reading under 16 px:
// message bodies, the thread's and threads' names, the composer, the
// buttons and the fields. Meta lines (times, receipts, the quote of the
// message replied to) may be smaller.
const smallText = `(() => {
	const out = [];
	for (const e of document.querySelectorAll(".event-body p, .event-body li, .ask-line, .thread-name, #thread-title, #message-input, button, .menu-item, input, select, textarea, .sheet p, .gate p")) {
		if (!e.checkVisibility({visibilityProperty: true}) || e.closest(".badge, .count, .receipts, .reply-link")) continue;
		const px = parseFloat(getComputedStyle(e).fontSize);
		if (px < 16) out.push((e.id ? "#" + e.id : e.tagName.toLowerCase() + "." + String(e.className).split(" ")[0]) + " " + px + "px");
	}
	return out; })()`

// fitsAPhone reports, as errors of the browser's test, what the page as it
// is would make hard on a phone: a visible tap target under 44×44 CSS px
// or main text under 16 px. state names the page in the errors.
func (b *browser) fitsAPhone(state string) {
	b.t.Helper()
	if got := eval[[]string](b, smallTargets); len(got) > 0 {
		b.t.Errorf("%s at 390×844: tap targets under 44×44: %q", state, got)
	}
	if got := eval[[]string](b, smallText); len(got) > 0 {
		b.t.Errorf("%s at 390×844: text under 16 px: %q", state, got)
	}
}

// rawIDs lists what looks like a raw id (an event's or thread's ULID, a
// session's UUID) in the text the page shows; what a "Details" fold holds
// is left out while it is closed, as the person sees it.
const rawIDs = `(document.body.innerText.match(/\b[0-9A-HJKMNP-TV-Z]{26}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g) || [])`

// headerRows is how many rows the visible items of the thread header take:
// an item that starts below the bottom of every item of the row before
// starts a row.
const headerRows = `(() => {
	const boxes = Array.from(document.querySelector("#thread-header").children)
		.filter((e) => e.checkVisibility() && !e.matches("[popover]")).map((e) => e.getBoundingClientRect()).sort((a, b) => a.top - b.top);
	let rows = 0, bottom = -Infinity;
	for (const r of boxes) { if (r.top >= bottom) { rows++; bottom = r.bottom; } else bottom = Math.max(bottom, r.bottom); }
	return rows; })()`

// fivePages seeds what the phone-first and accessibility tests look at: a
// conversation with a real coordinator's receipts, a permission request
// addressed to the person, and the runs the dashboard lists. It returns
// the two threads' ids.
func fivePages(s *stack) (conversation, permission string) {
	s.t.Helper()
	conversation = s.newThread("Release checklist")
	s.invite(conversation, "echo", "Echo")
	s.post(conversation, map[string]any{"from": "user", "content": "Step 1: what do we check first?"})
	ask := s.post(conversation, map[string]any{"from": "user", "to": "echo", "content": "@echo summarise the failing tests fake:progress=2"})
	testutil.WaitFor(s.t, waitTimeout, "echo's reply", func() bool {
		var page struct{ Events []struct{ From string } }
		s.mustAPI(http.MethodGet, "/threads/"+conversation+"/events", nil, &page)
		return page.Events[len(page.Events)-1].From == "echo"
	})
	s.post(conversation, map[string]any{"from": "user", "content": "Thanks! The plan:\n\n```go\nfmt.Println(\"ship it\")\n```\n\nSee `docs/ui.md`.", "meta": map[string]any{"reply_to": ask["id"]}})
	s.newThread("Design notes")

	permission = s.newThread("Clean build")
	s.invite(permission, "claude", "")
	s.post(permission, map[string]any{"from": "user", "to": "claude", "content": "@claude clean the build folder, please"})
	s.askPermission(permission, "claude asks permission to run rm -rf build (execute). Answer with one of: `allow` (Allow once), `reject` (Reject) — the buttons, or `agent-bridge permit "+permission+" <this message's seq or id> <option>`.")
	return conversation, permission
}

// signIn opens a login link in the browser, as the person does with the
// one up prints.
func (s *stack) signIn(b *browser) {
	s.t.Helper()
	var link struct {
		Path string `json:"path"`
	}
	s.mustAPI(http.MethodPost, "/auth/login-links", nil, &link)
	b.run("open a login link", chromedp.Navigate(s.url+link.Path))
	b.waitJS("signed in", `document.querySelector("#conn-status").textContent === "live" && !document.querySelector("#token-dialog").open`)
}

// TestPhoneFirst looks at the five pages people use — the thread list, a
// thread, a permission request, the runs dashboard and a phone just
// paired — at 390×844 and at 1400×900, as a person signed in with a login
// link sees them. On the phone every visible button, link and field is at
// least 44×44 CSS px; at both sizes the main text is at least 16 px, the
// thread's header is one row, no raw id shows, and axe-core finds no
// serious or critical violation. The screenshots in docs/ui.md come from
// here.
func TestPhoneFirst(t *testing.T) {
	t.Parallel()
	src := axeSource(t)
	s := newStack(t)
	s.ownToken = true
	s.startServe()
	s.startCoordinator()
	conversation, permission := fivePages(s)

	pages := []struct {
		name string
		open func(b *browser)
	}{
		{"threads", func(b *browser) {
			b.run("open the thread list", chromedp.Navigate(s.url+"/ui/"))
			b.waitJS("the threads listed with their last lines", `document.querySelectorAll("#thread-list .thread-item").length === 3 && `+contains(`document.querySelector("#thread-list").textContent`, "Thanks! The plan"))
		}},
		{"thread", func(b *browser) {
			b.run("open the conversation", chromedp.Navigate(s.url+"/ui/threads/"+conversation))
			b.waitJS("the conversation with its receipts", `document.querySelector("#thread-title").textContent === "Release checklist" && `+
				`document.querySelector('.receipts .receipt[data-participant="echo"][data-state="succeeded"]') !== null && document.querySelector("#event-list pre code") !== null && `+lastInView)
		}},
		{"permission", func(b *browser) {
			b.run("open the request", chromedp.Navigate(s.url+"/ui/threads/"+permission))
			b.waitJS("the request's card with its buttons", `document.querySelector("#event-list .event.question-for-me .permission-option") !== null && `+
				`document.querySelector("#event-list .event.question-for-me .permission-option").checkVisibility() && `+lastInView)
		}},
		{"runs", func(b *browser) {
			b.run("open the runs dashboard", chromedp.Navigate(s.statusURL+"/"))
			b.waitJS("echo's run listed", `document.querySelectorAll('#runs-body tr.run[data-status="succeeded"]').length >= 1 && document.querySelector("#usage-body tr") !== null`)
		}},
		{"pairing", func(b *browser) {
			var pair struct {
				URL string `json:"url"`
			}
			s.mustAPI(http.MethodPost, "/auth/pair", map[string]any{"name": "phone"}, &pair)
			_, code, _ := strings.Cut(pair.URL, "#pair=")
			b.run("open the pairing link", chromedp.Navigate(s.url+"/ui/#pair="+code))
			b.waitJS("paired, with the next step", `document.querySelector("#pair-dialog").open && document.querySelector("#pair-heading").textContent === "Paired as “phone”" && !document.querySelector("#pair-push").hidden`)
		}},
	}
	for _, vp := range []viewport{phone, desktop} {
		t.Run(vp.name, func(t *testing.T) {
			b := newBrowser(t)
			b.resize(vp)
			s.signIn(b)
			for _, p := range pages {
				p.open(b)
				if vp.mobile {
					if got := eval[[]string](b, smallTargets); len(got) > 0 {
						t.Errorf("%s at %d×%d: tap targets under 44×44: %q", p.name, vp.w, vp.h, got)
					}
				}
				if got := eval[[]string](b, smallText); len(got) > 0 {
					t.Errorf("%s at %d×%d: text under 16 px: %q", p.name, vp.w, vp.h, got)
				}
				if got := eval[[]string](b, overflowing); len(got) > 0 {
					t.Errorf("%s at %d×%d: wider than the window: %v", p.name, vp.w, vp.h, got)
				}
				if got := eval[[]string](b, rawIDs); len(got) > 0 {
					t.Errorf("%s at %d×%d: raw ids on the page: %q", p.name, vp.w, vp.h, got)
				}
				if p.name == "thread" && eval[bool](b, `document.querySelector("#sender").checkVisibility() || document.querySelector("#whoami").textContent !== "Signed in as user ·"`) {
					// The sender is the credential's: no "Post as" field.
					t.Errorf("thread at %d×%d: a \"Post as\" field, or no \"Signed in as user\": %q", vp.w, vp.h, b.text("#whoami"))
				}
				if p.name == "thread" || p.name == "permission" {
					if n := eval[int](b, headerRows); n != 1 {
						t.Errorf("%s at %d×%d: the thread's header takes %d rows, want 1", p.name, vp.w, vp.h, n)
					}
				}
				if got := b.axeViolations(src); len(got) > 0 {
					t.Errorf("%s at %d×%d: axe-core: %d serious or critical violations:\n%s", p.name, vp.w, vp.h, len(got), strings.Join(got, "\n"))
				}
				b.docShot(fmt.Sprintf("ui-%s-%s.png", vp.name, p.name))
			}
			if vp.mobile {
				phoneStates(t, b, s, conversation, src)
			}
		})
	}
}

// phoneStates measures what a phone shows beyond the pages' first look:
// the thread list and the people-and-settings drawers (the invite form
// unfolded), the thread's menu, the banner of an earlier version and the
// notifications sheet. Every visible tap target is 44×44 there too, and
// axe-core finds nothing serious.
func phoneStates(t *testing.T, b *browser, s *stack, conversation, src string) {
	t.Helper()
	b.run("open the conversation", chromedp.Navigate(s.url+"/ui/threads/"+conversation))
	b.waitJS("the conversation", `document.querySelector("#thread-title").textContent === "Release checklist" && document.querySelector('#participant-list .participant[data-id="echo"]') !== null`)
	check := func(state string) {
		t.Helper()
		b.fitsAPhone(state)
		if got := b.axeViolations(src); len(got) > 0 {
			t.Errorf("%s at 390×844: axe-core: %d serious or critical violations:\n%s", state, len(got), strings.Join(got, "\n"))
		}
	}
	b.click("open the thread list", "#threads-toggle")
	b.waitJS("the thread list drawer", inWindow("#sidebar"))
	check("the thread list drawer")
	// The backdrop is the dimmed strip right of the drawer.
	b.run("close it on the backdrop", chromedp.MouseClickXY(375, 400))
	b.waitJS("the drawer closed", `!document.body.classList.contains("show-threads")`)
	b.click("open the panel", "#panel-toggle")
	b.waitJS("the panel drawer", inWindow("#panel"))
	b.openInvite()
	check("the people and settings drawer")
	b.click("close the panel", "#panel-close")
	b.waitJS("the panel closed", `!document.body.classList.contains("show-panel")`)
	b.click("open the thread menu", "#thread-menu-btn")
	b.waitJS("the menu", `document.querySelector("#thread-menu").matches(":popover-open")`)
	check("the thread menu")
	b.click("earlier versions", "#rev-open")
	b.waitJS("the banner of an earlier version", `!document.querySelector("#revision-banner").hidden`)
	check("an earlier version")
	b.click("back to live", "#jump-live")
	b.waitJS("live again", `document.querySelector("#revision-banner").hidden`)
	b.click("open the notifications sheet", "#threads-toggle")
	b.waitJS("the thread list drawer", inWindow("#push-btn"))
	b.click("notifications", "#push-btn")
	b.waitJS("the notifications sheet", `document.querySelector("#push-dialog").open`)
	check("the notifications sheet")
}
