package uitest

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestThreadListUnreadAndPreview: messages from others in a thread that is
// not open count as unread in the list, beside the first line of the last
// one and its date; opening the thread reads them, and the count stays
// read after a reload (it is kept in the browser). The viewer's own posts
// and controls never count.
func TestThreadListUnreadAndPreview(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	open := s.newThread("open one")
	other := s.newThread("other one")
	b := newBrowser(t)
	b.run("open the first thread", chromedp.Navigate(s.url+"/ui/threads/"+open))
	b.waitJS("live", `document.querySelector("#conn-status").textContent === "live" && document.querySelector("#thread-title").textContent === "open one"`)
	item := func(id string) string {
		return fmt.Sprintf(`document.querySelector('#thread-list .thread-item[data-id=%q]')`, id)
	}
	// Both listed: a thread is read up to where it was when first listed.
	b.waitJS("both threads listed", item(open)+` && `+item(other))
	s.post(other, map[string]any{"from": "ada", "content": "first **news**"})
	s.post(other, map[string]any{"from": "user", "content": "my own post"})
	s.post(other, map[string]any{"type": "control", "from": "user", "content": map[string]any{"pause": map[string]any{"on": false}}})
	s.post(other, map[string]any{"from": "ada", "content": "second line one\nline two"})
	b.waitJS("two unread and the last message's first line", item(other)+` && `+item(other)+`.querySelector(".unread") && `+item(other)+`.querySelector(".unread").textContent === "2" && `+item(other)+`.querySelector(".thread-preview").textContent === "ada: second line one"`)
	if got := eval[string](b, item(other)+`.querySelector(".thread-date").textContent`); got == "" {
		t.Error("the thread shows no date")
	}
	s.post(open, map[string]any{"from": "ada", "content": "seen as it comes"})
	b.waitJS("the message in the open thread", countEvents("seen as it comes")+` === 1`)
	if eval[bool](b, item(open)+`.querySelector(".unread") !== null`) {
		t.Error("a message in the open, visible thread counts as unread")
	}
	b.click("open the other thread", `#thread-list .thread-item[data-id="`+other+`"] .thread-link`)
	b.waitJS("read", `document.querySelector("#thread-title").textContent === "other one" && `+item(other)+`.querySelector(".unread") === null`)
	b.run("reload", chromedp.Reload())
	b.waitJS("still read after a reload", item(other)+` && `+item(other)+`.querySelector(".thread-preview").textContent === "ada: second line one" && `+item(other)+`.querySelector(".unread") === null && `+item(open)+`.querySelector(".unread") === null`)
}
