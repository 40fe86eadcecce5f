package uitest

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// acpQuestionStack is a bridge and a coordinator serving acpy, the fake
// ACP agent, invited to a new thread; extra are coordinator settings.
func acpQuestionStack(t *testing.T, extra map[string]any) (*stack, string) {
	t.Helper()
	s := newStack(t)
	s.agents = map[string]any{"acpy": map[string]any{"acp": []string{fakeACPAgent(t)}, "workdir": t.TempDir()}}
	s.config = extra
	s.startServe()
	s.startCoordinator()
	th := s.newThread("Deploy questions")
	s.post(th, map[string]any{"type": "control", "from": "user", "content": map[string]any{
		"invite": map[string]any{"participant_id": "acpy", "profile": map[string]any{"client": "fake-acp", "model": "fake-1"}},
	}})
	return s, th
}

// threadEvent is an event as the tests read the log.
type threadEvent struct {
	ID, From, Type string
	Content        json.RawMessage
	Meta           struct {
		ReplyTo string `json:"reply_to"`
	}
}

// agentReply waits for acpy's reply to trigger and returns its text.
func (s *stack) agentReply(th string, trigger map[string]any) string {
	s.t.Helper()
	var text string
	testutil.WaitFor(s.t, waitTimeout, "acpy's reply", func() bool {
		var page struct{ Events []threadEvent }
		s.mustAPI(http.MethodGet, "/threads/"+th+"/events", nil, &page)
		for _, e := range page.Events {
			if e.From == "acpy" && e.Type == "message" && e.Meta.ReplyTo == trigger["id"] {
				return json.Unmarshal(e.Content, &text) == nil
			}
		}
		return false
	})
	return text
}

// TestQuestionAnsweredFromForm: at phone size, the fake ACP agent's form
// (a required string field and an enum field) shows on its question as a
// form for the person it asks, with a field per question field, finger-
// sized and inside the window, and how long it waits; the person types a
// branch, picks a size and sends: the agent receives exactly those values,
// and the question says who answered what, its form gone. A second
// question, declined from its form, reaches the agent as decline and says
// so.
func TestQuestionAnsweredFromForm(t *testing.T) {
	t.Parallel()
	s, th := acpQuestionStack(t, nil)
	b := newBrowser(t)
	b.resize(phone)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the thread drawn", `document.querySelector("#event-list .event") !== null`)

	trigger := s.post(th, map[string]any{"from": "user", "to": "acpy", "content": "ELICIT the deploy"})
	q := `document.querySelectorAll("#event-list .event.tag-question")`
	first := q + `[0]`
	b.waitJS("the question's form shown", q+`.length === 1 && `+first+`.classList.contains("question-for-me") && `+first+`.querySelector(".question-form")?.checkVisibility()`)
	if got := eval[string](b, `Array.from(`+first+`.querySelectorAll(".question-label")).map(l => l.textContent).join("|")`); got != "Branch (required)|Size" {
		t.Errorf("field labels = %q", got)
	}
	if got := eval[string](b, `Array.from(`+first+`.querySelectorAll("select[name=size] option")).map(o => o.value + "=" + o.textContent).join("|")`); got != "=No answer|s=s|m=m|l=l" {
		t.Errorf("size choices = %q", got)
	}
	if got := eval[string](b, first+`.querySelector(".question-title").textContent`); got != "Deploy" {
		t.Errorf("form title = %q", got)
	}
	if got := eval[string](b, first+`.querySelector(".question-wait").textContent`); got != "Waits 60 min more for an answer" {
		t.Errorf("wait line = %q", got)
	}
	if eval[bool](b, first+`.querySelector(".answer-btn") !== null`) {
		t.Error("a question with fields offers a reply as its answer")
	}
	eval[bool](b, `(() => { `+first+`.querySelector(".question-form").scrollIntoView({block: "center"}); return true })()`)
	small := eval[[]string](b, `Array.from(`+first+`.querySelectorAll(".question-input, .question-actions button")).filter(e => {
		const r = e.getBoundingClientRect(); return r.height < 44 || r.width < 44 || parseFloat(getComputedStyle(e).fontSize) < 16;
	}).map(e => e.name || e.textContent)`)
	if len(small) > 0 {
		t.Errorf("smaller than a finger or than 16 px text at 390×844: %v", small)
	}
	if out := eval[[]string](b, overflowing); len(out) > 0 {
		t.Errorf("wider than the phone's window: %v", out)
	}
	b.screenshot("question-form-phone.png")

	b.run("type the branch", chromedp.SendKeys(`#event-list .event.tag-question input[name=branch]`, "main"))
	b.setValue(`#event-list .event.tag-question select[name=size]`, "m")
	b.click("send the answer", `#event-list .event.tag-question .question-send`)
	if got := s.agentReply(th, trigger); got != `elicitation: accept {"branch":"main","size":"m"}` {
		t.Errorf("the agent got %q, want exactly the values typed", got)
	}
	b.waitJS("the question answered", first+`.classList.contains("answered") && !`+first+`.querySelector(".question-form").checkVisibility() && `+first+`.querySelector(".question-answer").textContent === "user answered: Branch: main; Size: m"`)

	// Declined from the form.
	trigger = s.post(th, map[string]any{"from": "user", "to": "acpy", "content": "ELICIT, to decline"})
	second := q + `[1]`
	b.waitJS("the second form shown", q+`.length === 2 && `+second+`.querySelector(".question-form")?.checkVisibility()`)
	b.click("decline", `#event-list .event.tag-question:not(.answered) .question-decline`)
	if got := s.agentReply(th, trigger); got != "elicitation: decline" {
		t.Errorf("the agent got %q, want decline", got)
	}
	b.waitJS("the question declined", second+`.classList.contains("answered") && `+second+`.querySelector(".question-answer").textContent === "user declined to answer"`)
	b.waitJS("the decline said in the thread", `Array.from(document.querySelectorAll("#event-list .event.type-control .event-body")).some(e => e.textContent === "declined a question")`)
}

// TestQuestionTimeoutShown: a question nobody answers within
// permission_timeout_s reaches the agent as cancel, and its form gives way
// to the coordinator's notice, in the thread, that it is withdrawn.
func TestQuestionTimeoutShown(t *testing.T) {
	t.Parallel()
	s, th := acpQuestionStack(t, map[string]any{"permission_timeout_s": 2})
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the thread drawn", `document.querySelector("#event-list .event") !== null`)
	trigger := s.post(th, map[string]any{"from": "user", "to": "acpy", "content": "ELICIT and wait"})
	if got := s.agentReply(th, trigger); got != "elicitation: cancel" {
		t.Errorf("the agent got %q, want cancel", got)
	}
	q := `document.querySelector("#event-list .event.tag-question")`
	b.waitJS("the question withdrawn", q+`?.classList.contains("answered") && !`+q+`.querySelector(".question-form").checkVisibility() && `+
		q+`.querySelector(".question-answer").textContent === "No longer waiting: No answer within 2s: the question is withdrawn, and acpy was told it was cancelled."`)
}
