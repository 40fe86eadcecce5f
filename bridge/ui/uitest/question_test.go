package uitest

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestQuestionForTheViewer: an agent's [USER QUESTION]: reply, addressed
// to the person viewing, is highlighted with an Answer action; answering
// sends the reply to the asker with meta.reply_to set. The same question
// is not highlighted for someone else.
func TestQuestionForTheViewer(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	s.startCoordinator()
	th := s.newThread("Questions")
	s.invite(th, "ada", "Ada")
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the thread open", `document.querySelector("#thread-title").textContent === "Questions"`)
	b.waitJS("ada offered as a recipient", `Array.from(document.querySelector("#to-select").options).some(o => o.value === "ada")`)
	s.post(th, map[string]any{"from": "user", "to": "ada", "content": "fake:say=[USER_QUESTION]:_ship_it_today?"})

	question := `document.querySelector("#event-list .event.tag-question")`
	b.waitJS("the question shown", question+` !== null`)
	b.waitJS("the question highlighted for user", question+`.classList.contains("question-for-me")`)
	if !eval[bool](b, question+`.querySelector(".badge-question") !== null`) {
		t.Error("the question has no question badge")
	}
	b.setValue("#sender", "someone-else")
	b.waitJS("not highlighted for another viewer", `!`+question+`.classList.contains("question-for-me")`)
	if eval[bool](b, question+`.querySelector(".answer-btn").offsetParent !== null`) {
		t.Error("the Answer action is shown to someone the question is not for")
	}
	b.setValue("#sender", "user")
	b.waitJS("highlighted again for user", question+`.classList.contains("question-for-me")`)
	b.screenshot("ui-question.png")
	// On a phone the question is a card with an Answer button to tap.
	onPhone := newBrowser(t)
	onPhone.resize(phone)
	onPhone.run("open the thread on a phone", chromedp.Navigate(s.url+"/ui/threads/"+th))
	onPhone.waitJS("the question with its Answer button", `document.querySelector("#event-list .event.tag-question.question-for-me .answer-btn")?.checkVisibility() === true`)
	onPhone.fitsAPhone("a question for the person")
	onPhone.screenshot("ui-phone-question.png")

	qid := eval[string](b, question+`.dataset.id`)
	// The trigger's receipt line, above the question, may appear only now
	// (the coordinator reports it on its own schedule) and push the button
	// down between the test seeing it and the click landing: wait for the
	// final one.
	b.waitJS("ada's receipt settled", `Array.from(document.querySelectorAll("#event-list .receipts .receipt")).some(r => / replied$/.test(r.querySelector(".receipt-text, .receipt-link").textContent))`)
	b.click("answer the question", "#event-list .event.tag-question .answer-btn")
	b.waitJS("the composer replying to ada", `!document.querySelector("#reply-indicator").hidden && document.querySelector("#reply-text").textContent.startsWith("Replying to ada")`)
	if to := eval[string](b, `document.querySelector("#to-select").value`); to != "ada" {
		t.Errorf("answer addressed to %q, want ada", to)
	}
	b.run("type the answer", chromedp.SendKeys(chromedp.ID("message-input"), "yes, ship it"))
	b.pressEnter("#message-input", false)
	b.waitJS("the answer shown", countEvents("yes, ship it")+" === 1")

	var page struct {
		Events []struct {
			From    string `json:"from"`
			To      string `json:"to"`
			Content any    `json:"content"`
			Meta    struct {
				ReplyTo string `json:"reply_to"`
			} `json:"meta"`
		} `json:"events"`
	}
	s.mustAPI("GET", "/threads/"+th+"/events?after=0", nil, &page)
	found := false
	for _, e := range page.Events {
		if e.Content == "yes, ship it" {
			found = true
			if e.From != "user" || e.To != "ada" || e.Meta.ReplyTo != qid {
				t.Errorf("answer posted from %s to %s reply_to %q, want from user to ada reply_to %s", e.From, e.To, e.Meta.ReplyTo, qid)
			}
		}
	}
	if !found {
		t.Fatal("the answer is not in the thread")
	}
}
