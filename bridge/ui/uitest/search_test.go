package uitest

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSearchOnAPhone: at 390×844, the Search button opens the search
// dialog; a query lists the message that matches, with its thread and the
// matched word marked; tapping it opens its thread, scrolled to that
// message (older than the first page, so it is loaded on the way) and
// highlighted. A bad query shows the bridge's sentence. The thread's panel
// lists its schedule with its next due time.
func TestSearchOnAPhone(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	plan := s.newThread("Release plan")
	other := s.newThread("Chatter")
	s.post(plan, map[string]any{"from": "user", "content": "We decided: the parser ships on Friday."})
	for i := range 120 {
		s.post(plan, map[string]any{"from": "user", "content": fmt.Sprintf("filler message %d", i)})
	}
	s.post(other, map[string]any{"from": "user", "content": "nothing to see"})
	s.mustAPI(http.MethodPost, "/threads/"+plan+"/events", map[string]any{"type": "control", "from": "user",
		"content": map[string]any{"schedule": map[string]any{"id": "standup", "cron": "0 9 * * 1-5", "tz": "Europe/Berlin", "event": map[string]any{"to": "all", "content": "standup time"}}}}, nil)

	b := newBrowser(t)
	b.resize(phone)
	b.run("open the UI", chromedp.Navigate(s.url+"/ui/threads/"+other))
	b.waitJS("the other thread open", `document.querySelector("#thread-title").textContent === "Chatter"`)
	if box := eval[map[string]float64](b, `(() => { const r = document.querySelector("#search-open").getBoundingClientRect(); return {w: r.width, h: r.height}; })()`); box["w"] < 44 || box["h"] < 44 {
		t.Errorf("the Search button is %vx%v px, want at least 44x44", box["w"], box["h"])
	}
	b.click("open the threads drawer", "#threads-toggle")
	b.click("open search", "#search-open")
	b.waitJS("the dialog open", `document.querySelector("#search-dialog").open`)
	b.setValue("#search-input", `"unbalanced`)
	b.pressEnter("#search-input", false)
	b.waitJS("the bad query's sentence", `document.querySelector("#search-status").textContent.includes("not closed")`)

	b.setValue("#search-input", "parser friday")
	b.pressEnter("#search-input", false)
	b.waitJS("one hit", `document.querySelectorAll("#search-results .search-hit").length === 1`)
	hit := `document.querySelector("#search-results .search-hit")`
	if got := eval[string](b, hit+`.querySelector(".search-hit-thread").textContent`); got != "Release plan" {
		t.Errorf("the hit's thread = %q", got)
	}
	if got := eval[string](b, `Array.from(document.querySelectorAll("#search-results mark")).map(m => m.textContent).join("|")`); got != "parser|Friday" {
		t.Errorf("marked words = %q, want parser|Friday", got)
	}
	if h := eval[float64](b, hit+`.getBoundingClientRect().height`); h < 44 {
		t.Errorf("a hit is %v px high, want at least 44", h)
	}
	if fs := eval[string](b, `getComputedStyle(`+hit+`).fontSize`); fs != "16px" {
		t.Errorf("a hit's text is %s, want 16px", fs)
	}
	b.click("open the hit", "#search-results .search-hit")
	b.waitJS("its thread open", `document.querySelector("#thread-title").textContent === "Release plan" && location.pathname === "/ui/threads/`+plan+`"`)
	b.waitJS("the message shown and highlighted", `(() => {
		const n = Array.from(document.querySelectorAll("#event-list .highlight")).find(e => e.textContent.includes("the parser ships on Friday"));
		if (!n) return false;
		const r = n.getBoundingClientRect();
		return r.top >= 0 && r.bottom <= window.innerHeight;
	})()`)
	if eval[bool](b, `document.querySelector("#search-dialog").open`) {
		t.Error("the dialog is still open over the thread")
	}
	b.click("open the panel", "#panel-toggle")
	b.waitJS("the schedule listed with its next time", `(() => {
		const li = document.querySelector("#schedule-list .schedule");
		return li && li.textContent.includes("standup: next") && li.textContent.includes("0 9 * * 1-5") && li.textContent.includes("standup time");
	})()`)
}
