package uitest

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSuggestionsPanel: suggestions agents send with POST /suggest are
// counted on the header's button and listed, newest first, in the panel it
// opens, with who sent them and their description; one sent while the page
// is open shows after Refresh; a title that looks like HTML stays text.
func TestSuggestionsPanel(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	suggest := func(from, title, description string) {
		t.Helper()
		s.mustAPI(http.MethodPost, "/suggest", map[string]any{"from": from, "title": title, "description": description}, nil)
	}
	suggest("codex", "Shorter primer", "It repeats itself.")
	suggest("claude", `<img src=x onerror="document.title='pwned'">`, "Line one\nline two")

	b := newBrowser(t)
	b.run("open the UI", chromedp.Navigate(s.url+"/ui"))
	b.waitJS("the count on the button", `document.querySelector("#suggestions-count").textContent === "2"`)
	b.click("open the panel", "#suggestions-btn")
	titles := `Array.from(document.querySelectorAll("#suggestions-list .suggestion-title")).map(e => e.textContent).join("|")`
	b.waitJS("both listed, newest first", titles+` === "<img src=x onerror=\"document.title='pwned'\">|Shorter primer"`)
	if n := eval[int](b, `document.querySelectorAll("#suggestions-list img").length`); n != 0 {
		t.Errorf("the HTML-looking title became %d element(s)", n)
	}
	if got := eval[string](b, `document.title`); got == "pwned" {
		t.Error("a suggestion's title ran as script")
	}
	first := `document.querySelector("#suggestions-list .suggestion")`
	if got := eval[string](b, first+`.querySelector(".suggestion-from").textContent`); got != "from claude" {
		t.Errorf("sender = %q, want from claude", got)
	}
	if got := eval[string](b, first+`.querySelector(".suggestion-description").innerText`); got != "Line one\nline two" {
		t.Errorf("description = %q", got)
	}
	if got := eval[string](b, first+`.querySelector(".suggestion-status").textContent`); got != "pending" {
		t.Errorf("status = %q, want pending", got)
	}

	suggest("gemini", "Dark mode", "Please.")
	b.click("refresh", "#suggestions-refresh")
	b.waitJS("the new one after Refresh", titles+`.startsWith("Dark mode|")`)
	b.waitJS("the count follows", `document.querySelector("#suggestions-count").textContent === "3"`)
	b.click("close the panel", "#suggestions-close")
	b.waitJS("the panel closed", `!document.querySelector("#suggestions-dialog").open`)
}

// TestSuggestionActions: a pending suggestion has Accept and Dismiss
// buttons; Accept stores "accepted" as the viewer and the row shows it with
// only Reopen left; Dismiss on another, then the status filter lists each
// under its own status; Reopen sets one back to pending. The count on the
// button follows the pending ones.
func TestSuggestionActions(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	var ids []string
	for _, title := range []string{"Shorter primer", "Dark mode"} {
		var sub struct{ ID string }
		s.mustAPI(http.MethodPost, "/suggest", map[string]any{"from": "codex", "title": title}, &sub)
		ids = append(ids, sub.ID)
	}
	status := func(id string) string {
		t.Helper()
		var page struct{ Suggestions []struct{ ID, Status string } }
		s.mustAPI(http.MethodGet, "/suggestions", nil, &page)
		for _, sg := range page.Suggestions {
			if sg.ID == id {
				return sg.Status
			}
		}
		return ""
	}
	row := func(id string) string {
		return `document.querySelector('#suggestions-list .suggestion[data-id="` + id + `"]')`
	}

	b := newBrowser(t)
	b.run("open the UI", chromedp.Navigate(s.url+"/ui"))
	b.click("open the panel", "#suggestions-btn")
	b.waitJS("Accept and Dismiss on both pending ones", `document.querySelectorAll("#suggestions-list .suggestion-accept").length === 2 && document.querySelectorAll("#suggestions-list .suggestion-dismiss").length === 2`)

	count := func(what, n string) {
		t.Helper()
		b.waitJS(what, `document.querySelector("#suggestions-count").textContent === "`+n+`"`)
	}
	count("two pending on the button", "2")
	b.click("accept the first", `#suggestions-list .suggestion[data-id="`+ids[0]+`"] .suggestion-accept`)
	b.waitJS("the row says accepted, only Reopen left", row(ids[0])+`.querySelector(".suggestion-status").textContent === "accepted" && !`+row(ids[0])+`.querySelector(".suggestion-accept") && `+row(ids[0])+`.querySelector(".suggestion-reopen")`)
	if got := status(ids[0]); got != "accepted" {
		t.Errorf("stored status = %q, want accepted", got)
	}
	count("one pending left", "1")
	b.click("dismiss the second", `#suggestions-list .suggestion[data-id="`+ids[1]+`"] .suggestion-dismiss`)
	b.waitJS("the second dismissed", row(ids[1])+`.querySelector(".suggestion-status").textContent === "dismissed"`)
	if got := status(ids[1]); got != "dismissed" {
		t.Errorf("stored status = %q, want dismissed", got)
	}
	count("none pending", "")

	listed := `Array.from(document.querySelectorAll("#suggestions-list .suggestion-title")).map(e => e.textContent).join("|")`
	b.setValue("#suggestions-status", "accepted")
	b.waitJS("the accepted filter", listed+` === "Shorter primer"`)
	b.setValue("#suggestions-status", "dismissed")
	b.waitJS("the dismissed filter", listed+` === "Dark mode"`)
	b.setValue("#suggestions-status", "pending")
	b.waitJS("none pending", `document.querySelector("#suggestions-list .suggestion-none")?.textContent === "No pending suggestions."`)

	b.setValue("#suggestions-status", "dismissed")
	b.waitJS("the dismissed filter again", listed+` === "Dark mode"`)
	b.click("reopen the dismissed one", `#suggestions-list .suggestion-reopen`)
	b.waitJS("it leaves the dismissed list", `document.querySelector("#suggestions-list .suggestion-none")?.textContent === "No dismissed suggestions."`)
	if got := status(ids[1]); got != "pending" {
		t.Errorf("stored status after Reopen = %q, want pending", got)
	}
	b.setValue("#suggestions-status", "")
	count("one pending again", "1")
}
