package uitest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestListAndPresenceFromStream proves that the thread list and presence
// arrive over the stream: a thread created, a thread renamed and presence
// changes made through the API all show, over longer than the old polling
// periods (5 s for the list, 1.5 s for presence), while the page's GETs of
// /threads and of the presence stay at the initial load; a reconnect
// reloads presence once (it is not replayed); and presence turns stale
// after the TTL with nothing from the server.
func TestListAndPresenceFromStream(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("watched")
	s.invite(th, "alice", "")
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	const li = `document.querySelector('#participant-list .participant[data-id="alice"]')`
	b.waitJS("live with alice listed", `document.querySelector("#conn-status").textContent === "live" && `+li)
	eval[bool](b, `(performance.setResourceTimingBufferSize(100000), true)`)
	// gets counts the page's completed requests of a path.
	gets := func(path string) int {
		return eval[int](b, fmt.Sprintf(`performance.getEntriesByType("resource").filter(e => new URL(e.name).pathname === %s).length`, jsString(path)))
	}
	presencePath := "/threads/" + th + "/presence"
	b.waitJS("the initial load done", fmt.Sprintf(`performance.getEntriesByType("resource").filter(e => new URL(e.name).pathname === %s).length === 1`, jsString(presencePath)))
	if n := gets("/threads"); n != 1 {
		t.Fatalf("the initial load listed the threads %d times, want once", n)
	}
	start := time.Now()
	setPresence := func(state string, details map[string]any) {
		s.mustAPI(http.MethodPost, "/threads/"+th+"/presence", map[string]any{"from": "alice", "state": state, "details": details}, nil)
	}
	firstThread := `(document.querySelector("#thread-list .thread-name") || {}).textContent`

	other := s.newThread("arrived by stream")
	b.waitJS("the new thread listed first", firstThread+` === "arrived by stream"`)
	setPresence("thinking", map[string]any{"status": "reading"})
	b.waitJS("alice thinking", li+`.querySelector(".p-state").textContent === "thinking · reading"`)
	s.post(other, map[string]any{"type": "thread.renamed", "from": "user", "content": "renamed by stream"})
	b.waitJS("the new name listed", firstThread+` === "renamed by stream"`)
	s.post(th, map[string]any{"from": "user", "content": "bump"})
	b.waitJS("the watched thread first again", firstThread+` === "watched"`)
	setPresence("typing", nil)
	b.waitJS("alice typing", li+`.dataset.presence === "typing"`)
	// The observation window: longer than both old polling periods.
	time.Sleep(time.Until(start.Add(6 * time.Second)))
	if n := gets("/threads"); n != 1 {
		t.Errorf("GET /threads ran %d times in %v, want the initial load only", n, time.Since(start).Round(time.Second))
	}
	if n := gets(presencePath); n != 1 {
		t.Errorf("GET %s ran %d times in %v, want the initial load only", presencePath, n, time.Since(start).Round(time.Second))
	}

	// A reconnect resumes the stream from its cursor and reloads presence,
	// which the bridge keeps in memory only (so alice is offline now).
	s.serve.stop(t)
	b.waitJS("the page notices", `document.querySelector("#conn-status").textContent !== "live"`)
	s.startServe()
	b.waitJS("live again", `document.querySelector("#conn-status").textContent === "live"`)
	b.waitJS("presence reloaded once", fmt.Sprintf(`performance.getEntriesByType("resource").filter(e => new URL(e.name).pathname === %s).length === 2`, jsString(presencePath)))
	b.waitJS("alice offline after the restart", li+`.dataset.presence === "offline"`)
	setPresence("listening", nil)
	b.waitJS("alice listening", li+`.dataset.presence === "listening"`)
	if n := gets("/threads"); n != 1 {
		t.Errorf("GET /threads ran %d times after a reconnect, want the initial load only (the stream replays what was missed)", n)
	}

	// The TTL (120 s) passes on the page's clock: alice turns offline
	// without the server sending anything.
	eval[bool](b, `(() => { const real = Date.now; Date.now = () => real() + 121000; return true })()`)
	b.waitJS("alice stale", li+`.dataset.presence === "offline"`)
	if n := gets(presencePath); n != 2 {
		t.Errorf("GET %s ran %d times, want the initial load and one reconnect", presencePath, n)
	}
}
