package uitest

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSceneView invites an actor with a character sheet through the invite
// form, runs a scene between two fake actors, and checks what the UI
// shows: the scene header (status, turns per actor, caps), every private
// event collapsed, and a transcript download without private text.
func TestSceneView(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	s.startCoordinator()
	th := s.newThread("Kitchen")
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the thread open", `document.querySelector("#thread-title").textContent === "Kitchen"`)
	b.openInvite()
	b.run("invite maria with a character sheet",
		chromedp.SendKeys(chromedp.ID("inv-client"), "fake"),
		chromedp.SendKeys(chromedp.ID("inv-model"), "fake-1"),
		chromedp.SendKeys(chromedp.ID("inv-character"), "Maria, a retired captain."),
	)
	b.setValue("#inv-id", "maria")
	b.run("submit the invite", chromedp.Click(chromedp.ID("inv-submit")))
	b.waitJS("maria listed", `document.querySelector('#participant-list .participant[data-id="maria"]')`)
	var st struct {
		State struct {
			Participants struct {
				Invited []struct {
					Profile struct {
						Character string `json:"character"`
					} `json:"profile"`
				} `json:"invited"`
			} `json:"participants"`
		} `json:"state"`
	}
	s.mustAPI("GET", "/threads/"+th+"/state", nil, &st)
	if inv := st.State.Participants.Invited; len(inv) != 1 || inv[0].Profile.Character != "Maria, a retired captain." {
		t.Fatalf("invited from the form: %+v", inv)
	}
	s.invite(th, "sam", "")
	s.post(th, map[string]any{"type": "control", "from": "user", "content": map[string]any{"scene": map[string]any{
		"on": true, "actors": []string{"maria", "sam"}, "soft_cap": 5, "hard_cap": 9,
		"briefs": map[string]string{"maria": "fake:close=3"},
	}}})

	b.waitJS("the scene header with the close", `!document.querySelector("#scene-header").hidden && document.querySelector("#scene-status").textContent === "Scene closed (natural)"`)
	b.waitJS("turns per actor", `Array.from(document.querySelectorAll("#scene-actors .scene-actor")).map(e => e.textContent).join("|") === "maria: 2 turns|sam: 2 turns"`)
	if caps := b.text("#scene-caps"); caps != "soft cap 5 · hard cap 9 per actor" {
		t.Errorf("caps = %q", caps)
	}
	b.waitJS("six private events (four thoughts, two journals)", `document.querySelectorAll("#event-list details.private").length === 6`)
	if open := eval[int](b, `document.querySelectorAll("#event-list details.private[open]").length`); open != 0 {
		t.Errorf("%d private events shown expanded", open)
	}
	if !eval[bool](b, `Array.from(document.querySelectorAll("#event-list details.private")).every(d => d.querySelector("summary").textContent.startsWith("private "))`) {
		t.Error("a private event has no summary line")
	}
	eval[bool](b, `(window.__tx = null, fetch(document.querySelector("#transcript-md").href).then(r => r.text()).then(t => { window.__tx = t; }), true)`)
	b.waitJS("the transcript", `window.__tx !== null`)
	tx := eval[string](b, `window.__tx`)
	if !strings.Contains(tx, "**MARIA:** maria says line 1.") || strings.Contains(tx, "SECRET") {
		t.Errorf("transcript download:\n%s", tx)
	}
	if got := eval[string](b, `document.querySelector("#transcript-md").getAttribute("download")`); got != "transcript-"+th+".md" {
		t.Errorf("download name = %q", got)
	}
}
