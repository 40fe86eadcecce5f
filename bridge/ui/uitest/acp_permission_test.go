package uitest

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	kit "github.com/agent-bridge/agent-bridge/internal/testkit/stack"
)

// fakeACPAgent is the project's fake ACP agent (internal/testkit/fakeacp).
func fakeACPAgent(t testing.TB) string { return progs.Build(t, kit.FakeACP) }

// TestPermissionAnsweredFromUI: a real ACP agent run (the fake ACP agent,
// started by a real coordinator with "permissions": "ask") asks permission
// for a tool call; the person who asked sees the request in Chromium with
// the agent's options as buttons, clicks one, and the agent's turn goes on
// with that answer: "Allow" → its reply says the permission was granted,
// then, on the same warm agent, "Reject" → its reply says it was refused.
// Each request says who decided what, its buttons gone.
func TestPermissionAnsweredFromUI(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.agents = map[string]any{
		"acpy": map[string]any{"acp": []string{fakeACPAgent(t)}, "permissions": "ask", "workdir": t.TempDir()},
	}
	s.startServe()
	s.startCoordinator()
	th := s.newThread("ACP permissions")
	s.post(th, map[string]any{"type": "control", "from": "user", "content": map[string]any{
		"invite": map[string]any{"participant_id": "acpy", "profile": map[string]any{"client": "fake-acp", "model": "fake-1"}},
	}})

	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the thread drawn", `document.querySelector("#event-list .event") !== null`)

	for i, c := range []struct {
		option, label, answered, reply string
	}{
		{"allow", "Allow", "Allowed once by user (“Allow”)", "permission: allow"},
		{"reject", "Reject", "Rejected by user (“Reject”)", "permission: reject"},
	} {
		trigger := s.post(th, map[string]any{"from": "user", "to": "acpy", "content": "PERMISSION to mkdir demo"})
		// The request the agent's run raised for this trigger: the
		// (i+1)-th permission request in the thread.
		requests := `document.querySelectorAll("#event-list .event.tag-permission")`
		req := requests + `[` + strconv.Itoa(i) + `]`
		b.waitJS("request "+c.option+" shown with its buttons", requests+`.length === `+strconv.Itoa(i+1)+` && `+req+`.classList.contains("question-for-me") && `+req+`.querySelector(".permission-option").checkVisibility()`)
		if got := eval[string](b, `Array.from(`+req+`.querySelectorAll(".permission-option")).map(b => b.textContent).join("|")`); got != "Always allow|Allow|Reject" {
			t.Errorf("buttons = %q, want the agent's options", got)
		}
		if got := eval[string](b, req+`.querySelector(".permission-call").textContent`); got != "mkdir demo" {
			t.Errorf("tool call = %q", got)
		}
		b.click("click "+c.label, `#event-list .event.tag-permission[data-id="`+eval[string](b, req+`.dataset.id`)+`"] .permission-option[data-option="`+c.option+`"]`)
		b.waitJS("the request answered", req+`.classList.contains("answered") && !`+req+`.querySelector(".permission-option").checkVisibility() && `+req+`.querySelector(".permission-answer").textContent === `+jsString(c.answered))
		reply := `Array.from(document.querySelectorAll("#event-list .event")).some(e => e.querySelector(".event-body")?.textContent.trim() === ` + jsString(c.reply) + `)`
		b.waitJS("the agent's reply: "+c.reply, reply)

		// The reply is the agent's, to this trigger, and its run succeeded.
		var page struct {
			Events []struct {
				ID, From, Type string
				Content        any
				Meta           struct {
					ReplyTo string `json:"reply_to"`
				}
			}
		}
		s.mustAPI(http.MethodGet, "/threads/"+th+"/events", nil, &page)
		found := false
		for _, e := range page.Events {
			if e.From == "acpy" && e.Type == "message" && e.Content == c.reply && e.Meta.ReplyTo == trigger["id"] {
				found = true
			}
		}
		if !found {
			t.Errorf("no reply %q from acpy to %v in the log", c.reply, trigger["id"])
		}
	}
}
