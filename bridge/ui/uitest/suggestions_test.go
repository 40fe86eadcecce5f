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
