package uitest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestConversationWithAgent is the main flow: create a thread in the UI,
// invite the fake agent through the invite panel, mention it with the
// autocomplete, send with Enter, watch it think, and see its reply arrive
// live with the coordinator badge and a link to the message it answers.
func TestConversationWithAgent(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	s.startCoordinator()
	b := newBrowser(t)

	b.run("open the UI", chromedp.Navigate(s.url+"/ui/"))
	b.run("create a thread",
		chromedp.WaitVisible(chromedp.ID("new-thread-name")),
		chromedp.SendKeys(chromedp.ID("new-thread-name"), "Design review"),
		chromedp.Click(chromedp.ID("new-thread-btn")),
	)
	b.waitJS("the thread to open at its deep link", `location.pathname.startsWith("/ui/threads/") && document.querySelector("#thread-title").textContent === "Design review"`)
	b.waitJS("the thread in the list", `Array.from(document.querySelectorAll("#thread-list .thread-name")).some(a => a.textContent === "Design review")`)

	b.openInvite()
	b.run("invite the fake agent",
		chromedp.SendKeys(chromedp.ID("inv-client"), "fake"),
		chromedp.SendKeys(chromedp.ID("inv-model"), "fake-1"),
		chromedp.SendKeys(chromedp.ID("inv-nickname"), "Echo"),
		chromedp.SendKeys(chromedp.ID("inv-roles"), "tester, echo"),
	)
	if id := eval[string](b, `document.querySelector("#inv-id").value`); id != "echo" {
		t.Fatalf("generated participant id = %q, want echo", id)
	}
	b.run("submit the invite", chromedp.Click(chromedp.ID("inv-submit")))
	b.waitJS("the participant listed", `document.querySelector('#participant-list .participant[data-id="echo"]')`)
	b.waitJS("echo offered as a recipient", `Array.from(document.querySelector("#to-select").options).some(o => o.value === "echo")`)

	b.run("mention with autocomplete", chromedp.SendKeys(chromedp.ID("message-input"), "@Ec"))
	b.waitJS("the mention list", `!document.querySelector("#mention-list").hidden && document.querySelector("#mention-list").textContent.includes("Echo")`)
	b.pressEnter("#message-input", false)
	if v := eval[string](b, `document.querySelector("#message-input").value`); v != "@echo " {
		t.Fatalf("composer after accepting the mention = %q, want %q", v, "@echo ")
	}

	msg := "please check fake:sleep=4s"
	b.setValue("#message-input", "")
	b.run("type a line", chromedp.SendKeys(chromedp.ID("message-input"), "first line"))
	b.pressEnter("#message-input", true)
	if v := eval[string](b, `document.querySelector("#message-input").value`); v != "first line\n" {
		t.Fatalf("Shift+Enter should add a newline, composer = %q", v)
	}
	b.setValue("#message-input", "")
	b.setValue("#to-select", "echo")
	b.run("type to echo", chromedp.SendKeys(chromedp.ID("message-input"), msg))
	b.pressEnter("#message-input", false)
	b.waitJS("our message shown", countEvents(msg)+" === 1")
	b.waitJS("the composer cleared once the bridge accepted", `document.querySelector("#message-input").value === ""`)
	b.waitJS("echo thinking (animated)", `document.querySelector('#participant-list .participant[data-id="echo"] .presence').classList.contains("state-thinking") && getComputedStyle(document.querySelector('#participant-list .participant[data-id="echo"] .presence')).animationName === "pulse"`)

	reply := "echo got: " + msg
	b.waitJS("the reply to arrive live", countEvents(reply)+" === 1")
	b.waitJS("echo available after replying", `document.querySelector('#participant-list .participant[data-id="echo"]').dataset.presence === "available"`)
	sel := fmt.Sprintf(`Array.from(document.querySelectorAll("#event-list .event")).find(e => e.querySelector(".event-body").textContent === %s)`, jsString(reply))
	if eval[bool](b, sel+`.querySelector(".badge-coordinator") !== null`) {
		t.Error("an agent's reply wears the coordinator badge, which marks the coordinator's own notices")
	}
	if got := eval[string](b, sel+`.querySelector(".sender").textContent`); got != "Echo (echo)" {
		t.Errorf("reply sender = %q, want nickname and id", got)
	}
	if got := eval[string](b, sel+`.querySelector(".profile").textContent`); got != "fake / fake-1" {
		t.Errorf("reply profile = %q, want client / model", got)
	}
	if got := eval[string](b, sel+`.querySelector(".reply-link").textContent`); got != "↩ user: "+msg {
		t.Errorf("reply link = %q", got)
	}
	b.click("prod echo", `#participant-list .participant[data-id="echo"] button.prod`)
	b.waitJS("the prod event and a second reply from echo", contains(eventsText, "prodded Echo (echo)")+` && document.querySelectorAll('#event-list .event .sender[data-from="echo"]').length === 2`)
	s.post(b.threadID(), map[string]any{"from": "user", "content": "Thanks! The plan:\n```go\nfmt.Println(\"ship it\")\n```\nSee `docs/ui.md` and https://example.com/design."})
	b.waitJS("the code block", `document.querySelector("#event-list pre code")`)
	b.screenshot("ui-conversation.png")

	b.run("follow the reply link", chromedp.Click(chromedp.JSPath(sel+`.querySelector(".reply-link")`)))
	b.waitJS("the original highlighted", fmt.Sprintf(`Array.from(document.querySelectorAll("#event-list .event.highlight")).some(e => e.querySelector(".event-body").textContent === %s)`, jsString(msg)))

}

// TestThreadsListSearchRenameDeepLink covers the thread list: most recent
// first, the search box, renaming (a thread.renamed event), and opening a
// thread from its URL.
func TestThreadsListSearchRenameDeepLink(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	alpha := s.newThread("alpha notes")
	s.newThread("beta plans")
	s.post(alpha, map[string]any{"from": "user", "content": "bump alpha"})
	b := newBrowser(t)

	b.run("open a deep link", chromedp.Navigate(s.url+"/ui/threads/"+alpha))
	b.waitJS("the thread opened from its URL", `document.querySelector("#thread-title").textContent === "alpha notes" && `+countEvents("bump alpha")+` === 1`)
	b.waitJS("both threads listed", `document.querySelectorAll("#thread-list .thread-item").length === 2`)
	if got := eval[[]string](b, `Array.from(document.querySelectorAll("#thread-list .thread-name")).map(a => a.textContent)`); strings.Join(got, ",") != "alpha notes,beta plans" {
		t.Errorf("thread order = %v, want the most recently updated first", got)
	}
	b.run("search", chromedp.SendKeys(chromedp.ID("thread-search"), "BETA"))
	b.waitJS("only beta listed", `Array.from(document.querySelectorAll("#thread-list .thread-name")).map(a => a.textContent).join() === "beta plans"`)
	b.setValue("#thread-search", "")
	b.waitJS("both listed again", `document.querySelectorAll("#thread-list .thread-item").length === 2`)

	b.click("open the thread menu", "#thread-menu-btn")
	b.run("rename", chromedp.Click(chromedp.ID("rename-btn")), chromedp.WaitVisible(chromedp.ID("rename-input")))
	b.setValue("#rename-input", "")
	b.run("type the new name", chromedp.SendKeys(chromedp.ID("rename-input"), "alpha, renamed"))
	b.run("save", chromedp.Click(chromedp.ID("rename-save")))
	b.waitJS("the new title, the sheet closed", `document.querySelector("#thread-title").textContent === "alpha, renamed" && !document.querySelector("#rename-dialog").open`)
	b.waitJS("the rename event shown", contains(eventsText, "renamed the thread to “alpha, renamed”"))
	var th struct {
		Threads []struct{ ID, Name string } `json:"threads"`
	}
	s.mustAPI(http.MethodGet, "/threads", nil, &th)
	for _, x := range th.Threads {
		if x.ID == alpha && x.Name != "alpha, renamed" {
			t.Errorf("server's thread name = %q after the rename", x.Name)
		}
	}
	b.waitJS("the list shows the new name", `Array.from(document.querySelectorAll("#thread-list .thread-name")).some(a => a.textContent === "alpha, renamed")`)
}

// TestMuteAndPauseRefusalsShown mutes a participant and pauses the thread
// from the panel, then posts as that participant: the composer shows the
// server's own sentence for each refusal.
func TestMuteAndPauseRefusalsShown(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("controls")
	s.invite(th, "echo", "")
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("echo listed", `document.querySelector('#participant-list .participant[data-id="echo"] button.mute')`)

	b.click("mute echo", `#participant-list .participant[data-id="echo"] button.mute`)
	b.waitJS("echo shown muted", `document.querySelector('#participant-list .participant[data-id="echo"] .badge-muted:not([hidden])') && document.querySelector("#state-summary").textContent.includes("muted: echo")`)
	code, want := s.api(http.MethodPost, "/threads/"+th+"/events", map[string]any{"from": "echo", "content": "probe"}, nil)
	if code != http.StatusConflict || want.Code != "participant_muted" {
		t.Fatalf("server answer for a muted sender: %d %+v", code, want)
	}
	b.setValue("#sender", "echo")
	b.run("type as echo", chromedp.SendKeys(chromedp.ID("message-input"), "let me speak"))
	b.pressEnter("#message-input", false)
	// The page names the thread where the server's sentence has its id.
	inWords := func(m string) string { return strings.ReplaceAll(m, th, "“controls”") }
	b.waitJS("the muted sentence", `document.querySelector("#composer-error").textContent === `+jsString(inWords(want.Message))+` && !document.querySelector("#composer-error").hidden`)
	if v := eval[string](b, `document.querySelector("#message-input").value`); v != "let me speak" {
		t.Errorf("a refused message should stay in the composer, got %q", v)
	}

	b.setValue("#sender", "user")
	b.click("unmute as user", `#participant-list .participant[data-id="echo"] button.unmute`)
	b.waitJS("echo unmuted", `document.querySelector('#participant-list .participant[data-id="echo"] button.mute:not([hidden])') && !document.querySelector("#state-summary").textContent.includes("muted")`)
	b.run("pause", chromedp.Click(chromedp.ID("ctl-pause")))
	b.waitJS("paused shown", `document.querySelector("#ctl-pause").checked && document.querySelector("#state-summary").textContent.startsWith("paused")`)
	code, want = s.api(http.MethodPost, "/threads/"+th+"/events", map[string]any{"from": "echo", "content": "probe"}, nil)
	if code != http.StatusConflict || want.Code != "thread_paused" {
		t.Fatalf("server answer while paused: %d %+v", code, want)
	}
	b.setValue("#sender", "echo")
	b.pressEnter("#message-input", false)
	b.waitJS("the paused sentence", `document.querySelector("#composer-error").textContent === `+jsString(inWords(want.Message)))
	if strings.Contains(want.Message, th) && strings.Contains(b.text("#composer-error"), th) {
		t.Errorf("the refusal quotes the thread's id: %q", b.text("#composer-error"))
	}

	b.setValue("#sender", "user")
	b.run("toggle discussion", chromedp.Click(chromedp.ID("ctl-discussion")))
	b.waitJS("discussion on", `document.querySelector("#state-summary").textContent.includes("discussion on")`)
	b.run("toggle auto-reply", chromedp.Click(chromedp.ID("ctl-auto")))
	var st struct {
		State struct {
			Discussion struct {
				On                 bool `json:"on"`
				AllowAgentMentions bool `json:"allow_agent_mentions"`
			} `json:"discussion"`
			InvitedAuto struct {
				On bool `json:"on"`
			} `json:"invited_auto"`
		} `json:"state"`
	}
	testutil.WaitFor(t, waitTimeout, "discussion and invited_auto on in the server's state", func() bool {
		s.mustAPI(http.MethodGet, "/threads/"+th+"/state", nil, &st)
		return st.State.Discussion.On && st.State.Discussion.AllowAgentMentions && st.State.InvitedAuto.On
	})
	// A checkbox shows its tick as soon as it is clicked; the summary line
	// changes only once the page has read the new state back, and that
	// line can wrap and move the participant panel under a later click.
	b.waitJS("toggles reflect the state", `document.querySelector("#ctl-discussion").checked && document.querySelector("#ctl-auto").checked && document.querySelector("#state-summary").textContent.includes("discussion on · auto-reply on")`)

	b.click("uninvite echo", `#participant-list .participant[data-id="echo"] button.uninvite`)
	b.waitJS("echo gone from the panel and the recipients", `!document.querySelector('#participant-list .participant[data-id="echo"]') && !Array.from(document.querySelector("#to-select").options).some(o => o.value === "echo") && `+contains(eventsText, "uninvited echo"))
}

// TestRevisionHistory walks back and forth through a thread's revisions:
// the banner, the disabled composer, events up to N only, and the
// participants as of N.
func TestRevisionHistory(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("history")                                   // seq 1
	s.post(th, map[string]any{"from": "user", "content": "one"})   // 2
	s.invite(th, "echo", "")                                       // 3
	s.post(th, map[string]any{"from": "user", "content": "two"})   // 4
	s.post(th, map[string]any{"from": "user", "content": "three"}) // 5
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the live view", `document.querySelector("#rev-label").textContent === "5 / 5" && document.querySelector('#participant-list .participant[data-id="echo"]')`)
	if !eval[bool](b, `document.querySelector("#revision-banner").hidden && !document.querySelector("#message-input").disabled`) {
		t.Fatal("at the head, the banner should be hidden and the composer enabled")
	}

	b.click("open the thread menu", "#thread-menu-btn")
	b.run("earlier versions", chromedp.Click(chromedp.ID("rev-open")))
	b.waitJS("revision 4", `document.querySelector("#revision-text").textContent === "Viewing version 4 of 5" && !document.querySelector("#revision-banner").hidden && !document.querySelector("#thread-menu").matches(":popover-open")`)
	if !eval[bool](b, `document.querySelector("#message-input").disabled && document.querySelector("#send-btn").disabled && document.querySelector("#ctl-pause").disabled`) {
		t.Error("the composer and controls must be disabled while viewing the past")
	}
	if got := eval[string](b, eventsText); strings.Contains(got, "three") || !strings.Contains(got, "two") {
		t.Errorf("events at revision 4 = %q", got)
	}
	b.run("back twice more", chromedp.Click(chromedp.ID("rev-back")), chromedp.Click(chromedp.ID("rev-back")))
	b.waitJS("revision 2, before the invite", `document.querySelector("#revision-text").textContent === "Viewing version 2 of 5" && document.querySelectorAll("#participant-list .participant").length === 0 && document.querySelector("#state-summary").textContent.includes("as of version 2")`)
	if got := eval[string](b, eventsText); strings.Contains(got, "invited") || !strings.Contains(got, "one") {
		t.Errorf("events at revision 2 = %q", got)
	}

	b.screenshot("ui-revision.png")
	s.post(th, map[string]any{"from": "user", "content": "four"}) // 6, arrives while in the past
	b.waitJS("the head moves on, the view stays", `document.querySelector("#revision-text").textContent === "Viewing version 2 of 6"`)
	if got := eval[string](b, eventsText); strings.Contains(got, "four") {
		t.Errorf("a live event showed up in the past view: %q", got)
	}

	b.run("forward", chromedp.Click(chromedp.ID("rev-forward")))
	b.waitJS("revision 3 has the participant", `document.querySelector("#revision-text").textContent === "Viewing version 3 of 6" && document.querySelector('#participant-list .participant[data-id="echo"]')`)
	b.run("jump to live", chromedp.Click(chromedp.ID("jump-live")))
	b.waitJS("live again", `document.querySelector("#revision-banner").hidden && !document.querySelector("#message-input").disabled && document.querySelector("#rev-label").textContent === "6 / 6"`)
	if got := eval[string](b, eventsText); !strings.Contains(got, "four") {
		t.Errorf("live view lacks the newest event: %q", got)
	}
}

// TestUntrustedContentIsInert posts script-bearing payloads through the API
// and checks that none runs and each renders as text, with only http(s)
// links made clickable.
func TestUntrustedContentIsInert(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("xss <img src=x onerror=window.__xss=1>")
	payloads := []string{
		`<img src=x onerror="window.__xss=1">`,
		`<script>window.__xss=1</script>`,
		`<a href="javascript:window.__xss=1">click</a>`,
		`[click me](javascript:window.__xss=1)`,
		`[data](data:text/html,<script>window.__xss=1</script>)`,
		"**bold** and _italic_ <script>window.__xss=1</script>",
		"`<b>code</b>` and [ok](https://example.com/a?b=1) and http://example.org/x.",
		"```html\n<svg onload=window.__xss=1></svg>\n```",
	}
	for _, p := range payloads {
		s.post(th, map[string]any{"from": "user", "content": p})
	}
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("every payload rendered", fmt.Sprintf(`document.querySelectorAll("#event-list .event.type-message").length === %d`, len(payloads)))
	b.run("click the javascript link text", chromedp.Click(chromedp.JSPath(`Array.from(document.querySelectorAll("#event-list .event-body")).find(e => e.textContent.includes("click me"))`)))

	if got := eval[string](b, `typeof window.__xss`); got != "undefined" {
		t.Fatalf("a payload ran: window.__xss is %s", got)
	}
	if n := eval[int](b, `document.querySelectorAll("#event-list .event-body :is(img, script, svg, iframe, b)").length`); n != 0 {
		t.Errorf("%d elements were created from event content", n)
	}
	for _, p := range payloads[:5] {
		if n := eval[int](b, countEvents(p)); n != 1 {
			t.Errorf("payload %q should render once as its own text, found %d", p, n)
		}
	}
	links := eval[[]map[string]string](b, `Array.from(document.querySelectorAll("#event-list a")).map(a => ({href: a.href, text: a.textContent, target: a.target, rel: a.rel}))`)
	if len(links) != 2 {
		t.Fatalf("links = %v, want exactly the two https/http ones", links)
	}
	for _, l := range links {
		if !strings.HasPrefix(l["href"], "http://") && !strings.HasPrefix(l["href"], "https://") {
			t.Errorf("link to %q", l["href"])
		}
		if l["target"] != "_blank" || l["rel"] != "noopener noreferrer" {
			t.Errorf("link %v lacks target=_blank rel=noopener noreferrer", l)
		}
	}
	if links[1]["href"] != "http://example.org/x" {
		t.Errorf("bare URL link = %q, want the trailing period left out", links[1]["href"])
	}
	md := `Array.from(document.querySelectorAll("#event-list .event-body")).find(e => e.textContent.includes("and italic"))`
	if got := eval[string](b, md+`.querySelector("strong").textContent + "|" + `+md+`.querySelector("em").textContent`); got != "bold|italic" {
		t.Errorf("Markdown emphasis rendered as %q, want bold in <strong> and italic in <em>", got)
	}
	if got := eval[string](b, md+`.textContent`); got != "bold and italic <script>window.__xss=1</script>" {
		t.Errorf("raw HTML beside Markdown = %q, want the tags shown as typed", got)
	}
	if got := eval[string](b, `document.querySelector("#event-list pre code").textContent`); got != "<svg onload=window.__xss=1></svg>" {
		t.Errorf("code block = %q", got)
	}
	if got := eval[string](b, `document.querySelector("#event-list .event-body code").textContent`); got != "<b>code</b>" {
		t.Errorf("inline code = %q", got)
	}
	if got := b.text("#thread-title"); got != "xss <img src=x onerror=window.__xss=1>" {
		t.Errorf("thread title = %q", got)
	}
}

// TestReconnectAfterServerRestart stops the server under an open page,
// starts it again on the same port and database, and checks that events
// posted around the restart each appear exactly once.
func TestReconnectAfterServerRestart(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("restart")
	s.post(th, map[string]any{"from": "user", "content": "before"})
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("live", `document.querySelector("#conn-status").textContent === "live" && `+countEvents("before")+` === 1`)

	s.serve.stop(t)
	b.waitJS("the page notices", `document.querySelector("#conn-status").textContent !== "live"`)
	s.startServe()
	s.post(th, map[string]any{"from": "user", "content": "after"})
	b.waitJS("the new event once", countEvents("after")+` === 1`)
	b.waitJS("live again", `document.querySelector("#conn-status").textContent === "live"`)
	s.post(th, map[string]any{"from": "user", "content": "later"})
	b.waitJS("the next event", countEvents("later")+` === 1`)
	seqs := eval[[]int](b, `Array.from(document.querySelectorAll("#event-list .event")).map(e => Number(e.dataset.seq))`)
	for i, seq := range seqs {
		if seq != i+1 {
			t.Fatalf("rendered seqs = %v, want 1..n with no gap or duplicate", seqs)
		}
	}
	if n := eval[int](b, countEvents("before")); n != 1 {
		t.Errorf("the event from before the restart shows %d times", n)
	}

	// A hidden tab gives its stream's connection back and resumes where it
	// left off when shown again.
	setHidden := func(hidden bool) {
		eval[bool](b, fmt.Sprintf(`(() => { Object.defineProperty(document, "hidden", {configurable: true, get: () => %t}); document.dispatchEvent(new Event("visibilitychange")); return true })()`, hidden))
	}
	setHidden(true)
	b.waitJS("the stream paused", `document.querySelector("#conn-status").textContent === "paused while hidden"`)
	s.post(th, map[string]any{"from": "user", "content": "while hidden"})
	setHidden(false)
	b.waitJS("the missed event after showing the tab", countEvents("while hidden")+` === 1 && document.querySelector("#conn-status").textContent === "live"`)
}

// TestTokenMode runs the server with a token: the page asks for it,
// exchanges it for the HttpOnly login cookie, keeps no copy a script could
// read, and then works, streams included.
func TestTokenMode(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.token = "s3cret-token"
	s.startServe()
	th := s.newThread("locked")
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the token prompt", `document.querySelector("#token-dialog").open`)
	b.run("enter a wrong token", chromedp.SendKeys(chromedp.ID("token-input"), "wrong"), chromedp.Click(chromedp.ID("token-submit")))
	b.waitJS("asked again, with the server's sentence", `document.querySelector("#token-dialog").open && !document.querySelector("#token-error").hidden && document.querySelector("#token-error").textContent.length > 0`)
	b.run("enter the token", chromedp.SendKeys(chromedp.ID("token-input"), s.token), chromedp.Click(chromedp.ID("token-submit")))
	b.waitJS("the thread loads", `!document.querySelector("#token-dialog").open && document.querySelector("#thread-title").textContent === "locked" && document.querySelector("#conn-status").textContent === "live"`)
	s.post(th, map[string]any{"from": "user", "content": "streamed with a token"})
	b.waitJS("the streamed event", countEvents("streamed with a token")+` === 1`)
	if got := eval[string](b, `JSON.stringify(Object.keys(localStorage).map(k => localStorage.getItem(k))) + JSON.stringify(Object.keys(sessionStorage).map(k => sessionStorage.getItem(k))) + document.cookie + location.href`); strings.Contains(got, s.token) {
		t.Errorf("the token is readable by the page (storage, document.cookie or the URL): %s", got)
	}
}

// TestLoginLink opens a login link (serve as a user runs it, with the
// person token it made): the page loads logged in without asking for a
// token, the code is gone from the address bar, and the same link opened
// again (in a browser without the cookie) is refused, so the page asks for
// a token.
func TestLoginLink(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.ownToken = true
	s.startServe()
	th := s.newThread("linked")
	var link struct {
		Path string `json:"path"`
	}
	s.mustAPI(http.MethodPost, "/auth/login-links", nil, &link)
	b := newBrowser(t)
	b.run("open the login link", chromedp.Navigate(s.url+link.Path))
	b.waitJS("the thread list, logged in", `!document.querySelector("#token-dialog").open && document.querySelector("#conn-status").textContent === "live" && document.body.textContent.includes("linked")`)
	if got := eval[string](b, `location.href`); strings.Contains(got, "code=") || !strings.HasSuffix(got, "/ui") {
		t.Errorf("the address bar after the login: %s", got)
	}
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the thread loads", `document.querySelector("#thread-title").textContent === "linked" && document.querySelector("#conn-status").textContent === "live"`)

	// A used link says so, and how to get a new one.
	again := newBrowser(t)
	again.resize(phone)
	again.run("open the used link", chromedp.Navigate(s.url+link.Path))
	again.waitJS("the page about the used link", `document.querySelector("#token-dialog").open && document.querySelector("#token-heading").textContent === "This login link no longer works"`)
	if got := eval[string](again, `document.querySelector("#token-dialog").innerText`); !strings.Contains(got, "used already") || !strings.Contains(got, "agent-bridge login-link") || !strings.Contains(got, "agent-bridge pair") {
		t.Errorf("the used link's page does not say what happened and how to get a new link:\n%s", got)
	}
	again.fitsAPhone("the used login link's page")
	again.screenshot("ui-phone-used-link.png")
}

// TestRevokedDeviceSaysSo pairs a browser as a phone, revokes its token
// (as agent-bridge devices revoke does), and reloads: the page says the
// device was signed out, with the bridge's sentence, and how to pair it
// again; the used pairing link, opened again, says it no longer works.
func TestRevokedDeviceSaysSo(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.ownToken = true
	s.startServe()
	s.newThread("paired")
	var pair struct {
		URL string `json:"url"`
	}
	s.mustAPI(http.MethodPost, "/auth/pair", map[string]any{"name": "phone"}, &pair)
	_, code, _ := strings.Cut(pair.URL, "#pair=")
	b := newBrowser(t)
	b.resize(phone)
	b.run("open the pairing link", chromedp.Navigate(s.url+"/ui/#pair="+code))
	b.waitJS("paired", `document.querySelector("#pair-dialog").open && document.querySelector("#pair-heading").textContent === "Paired as “phone”"`)
	b.click("open the app", "#pair-done")
	b.waitJS("the thread list", `document.querySelector("#conn-status").textContent === "live" && document.querySelector("#whoami").textContent === "Signed in as user on “phone” ·"`)

	var tokens struct {
		Tokens []struct{ ID, Name string } `json:"tokens"`
	}
	s.mustAPI(http.MethodGet, "/auth/tokens", nil, &tokens)
	for _, tk := range tokens.Tokens {
		if tk.Name == "phone" {
			s.mustAPI(http.MethodDelete, "/auth/tokens/"+tk.ID, nil, nil)
		}
	}
	b.run("reload", chromedp.Reload())
	b.waitJS("the signed-out page", `document.querySelector("#token-dialog").open && document.querySelector("#token-heading").textContent === "This device was signed out"`)
	if got := eval[string](b, `document.querySelector("#token-dialog").innerText`); !strings.Contains(got, `This token ("phone") was revoked at`) || !strings.Contains(got, "agent-bridge pair") {
		t.Errorf("the signed-out page does not say why and how to pair again:\n%s", got)
	}
	b.fitsAPhone("the signed-out page")
	b.screenshot("ui-phone-signed-out.png")

	other := newBrowser(t)
	other.resize(phone)
	other.run("open the used pairing link", chromedp.Navigate(s.url+"/ui/#pair="+code))
	other.waitJS("the page about the used pairing link", `document.querySelector("#token-dialog").open && document.querySelector("#token-heading").textContent === "This pairing link no longer works" && `+
		contains(`document.querySelector("#token-dialog").innerText`, "agent-bridge pair"))
	other.fitsAPhone("the used pairing link's page")
}

// TestLongThreadLoadsOlderOnScroll opens a thread longer than one page: the
// page shows only the tail, and scrolling up prepends older events, in
// order, without duplicates, until the start.
func TestLongThreadLoadsOlderOnScroll(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("long")
	const n = 230
	for i := 1; i <= n; i++ {
		s.post(th, map[string]any{"from": "user", "content": fmt.Sprintf("message %d", i)})
	}
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the last page", countEvents(fmt.Sprintf("message %d", n))+` === 1`)
	if got := eval[int](b, `document.querySelectorAll("#event-list .event").length`); got != 100 {
		t.Fatalf("initial load rendered %d events, want the last 100", got)
	}
	for i := 0; i < 5 && eval[int](b, `document.querySelectorAll("#event-list .event").length`) < n+1; i++ {
		before := eval[int](b, `document.querySelectorAll("#event-list .event").length`)
		eval[bool](b, `(() => { document.querySelector("#events").scrollTop = 0; document.querySelector("#events").dispatchEvent(new Event("scroll")); return true })()`)
		b.waitJS("older events prepended", fmt.Sprintf(`document.querySelectorAll("#event-list .event").length > %d`, before))
	}
	seqs := eval[[]int](b, `Array.from(document.querySelectorAll("#event-list .event")).map(e => Number(e.dataset.seq))`)
	if len(seqs) != n+1 {
		t.Fatalf("rendered %d events after scrolling up, want %d", len(seqs), n+1)
	}
	for i, seq := range seqs {
		if seq != i+1 {
			t.Fatalf("rendered seqs out of order or duplicated at %d: %v", i, seqs[max(0, i-3):i+2])
		}
	}
	b.waitJS("the start marker", `document.querySelector("#older").textContent === "Start of thread"`)
}

// TestIgnoredActionsSaySo: a message or a control the bridge stores but
// that will have no effect (contract 6.4) shows the server's reason, as
// the CLI prints it, instead of looking like a success.
func TestIgnoredActionsSaySo(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("ignored")
	s.invite(th, "echo", "")
	s.post(th, map[string]any{"type": "control", "from": "user", "content": map[string]any{"pause": map[string]any{"on": true}}})
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("paused, echo a recipient", `document.querySelector("#ctl-pause").checked && Array.from(document.querySelector("#to-select").options).some(o => o.value === "echo")`)

	b.setValue("#to-select", "echo")
	b.run("type", chromedp.SendKeys(chromedp.ID("message-input"), "are you there?"))
	b.pressEnter("#message-input", false)
	b.waitJS("the message stored, the reason shown", contains(eventsText, "are you there?")+` && document.querySelector("#message-input").value === "" && !document.querySelector("#composer-error").hidden && `+
		contains(`document.querySelector("#composer-error").textContent`, `the thread is paused, so "echo" is not invoked`))

	b.setValue("#sender", "echo")
	b.run("toggle discussion as echo", chromedp.Click(chromedp.ID("ctl-discussion")))
	b.waitJS("the control stored, the reason shown", contains(eventsText, "discussion")+` && !document.querySelector("#control-error").hidden && `+
		contains(`document.querySelector("#control-error").textContent`, `counts only from a human`))
	b.waitJS("the toggle back off", `!document.querySelector("#ctl-discussion").checked`)
}
