package uitest

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestStopThinkingParticipant: a participant whose adapter runs shows its
// latest progress status and a Stop button; Stop posts the cancel control
// as the viewer, the coordinator stops the run and says so in the thread,
// and the button goes away.
func TestStopThinkingParticipant(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	s.startCoordinator()
	th := s.newThread("Long job")
	s.invite(th, "echo", "")
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("echo listed", `document.querySelector('#participant-list .participant[data-id="echo"]')`)
	const li = `document.querySelector('#participant-list .participant[data-id="echo"]')`
	if !eval[bool](b, li+`.querySelector("button.stop").hidden`) {
		t.Error("Stop is shown for a participant that is not thinking")
	}
	s.post(th, map[string]any{"from": "user", "to": "echo", "content": "fake:progress=2 fake:hang"})
	b.waitJS("echo thinking with its progress status", li+`.querySelector(".p-state").textContent === "thinking · step 2"`)
	b.waitJS("the Stop button shown", `!`+li+`.querySelector("button.stop").hidden`)
	b.click("stop echo", `#participant-list .participant[data-id="echo"] button.stop`)
	b.waitJS("the cancel notice in the thread", contains(eventsText, "echo's run was cancelled by user."))
	b.waitJS("echo available, Stop hidden", li+`.dataset.presence === "available" && `+li+`.querySelector("button.stop").hidden`)
	var events struct {
		Events []struct {
			Type    string          `json:"type"`
			From    string          `json:"from"`
			Content json.RawMessage `json:"content"`
		} `json:"events"`
	}
	s.mustAPI("GET", "/threads/"+th+"/events", nil, &events)
	var cancels int
	for _, e := range events.Events {
		var c map[string]any
		if e.Type == "control" && json.Unmarshal(e.Content, &c) == nil && c["cancel"] != nil {
			cancels++
			if e.From != "user" {
				t.Errorf("the cancel was sent as %q, want the viewer (user)", e.From)
			}
		}
	}
	if cancels != 1 {
		t.Errorf("%d cancel controls, want 1", cancels)
	}
}
