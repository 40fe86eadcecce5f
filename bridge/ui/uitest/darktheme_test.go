package uitest

import (
	"context"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// TestDarkTheme: with the system's dark setting the page and its events
// turn dark, as the runs dashboard does.
func TestDarkTheme(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	s.startCoordinator()
	th := s.newThread("Night")
	s.post(th, map[string]any{"from": "user", "content": "late **work**"})
	b := newBrowser(t)
	b.run("prefer dark", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		})
		return err
	}))
	// dark is a JS expression: the element's background is darker than mid-grey.
	dark := func(sel string) string {
		return `(() => { const m = getComputedStyle(document.querySelector(` + jsString(sel) + `)).backgroundColor.match(/\d+/g).map(Number); return m[0] + m[1] + m[2] < 3 * 100; })()`
	}
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the thread", `document.querySelector("#event-list .event.type-message strong")`)
	for _, sel := range []string{"html", "#sidebar", "#event-list .event.type-message"} {
		if !eval[bool](b, dark(sel)) {
			t.Errorf("%s is not dark: %s", sel, eval[string](b, `getComputedStyle(document.querySelector(`+jsString(sel)+`)).backgroundColor`))
		}
	}
	b.run("open the dashboard", chromedp.Navigate(s.statusURL+"/"))
	b.waitJS("the dashboard", `document.querySelector("#status").textContent.startsWith("live")`)
	if !eval[bool](b, dark("body")) {
		t.Error("the runs dashboard is not dark")
	}
}
