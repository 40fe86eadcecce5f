package uitest

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestPartyMode: invite an agent with expertise through the form (shown on
// its card), switch party mode on in the thread controls, and watch a real
// round: the first takes grouped under "round 1", the reactions under
// "round 2", then the notice; the exit word switches the Party box off.
func TestPartyMode(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	s.startCoordinator()
	th := s.newThread("panel")
	s.invite(th, "bob", "")
	b := newBrowser(t)

	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the thread", `document.querySelector('#participant-list .participant[data-id="bob"]')`)
	b.openInvite()
	b.run("invite alice with expertise",
		chromedp.SendKeys(chromedp.ID("inv-client"), "fake"),
		chromedp.SendKeys(chromedp.ID("inv-model"), "fake-1"),
		chromedp.SendKeys(chromedp.ID("inv-expertise"), "databases, go"),
	)
	b.setValue("#inv-id", "alice")
	b.run("submit the invite", chromedp.Click(chromedp.ID("inv-submit")))
	b.waitJS("alice's card shows her expertise", `(document.querySelector('#participant-list .participant[data-id="alice"] .p-expertise') || {}).textContent === "knows: databases, go"`)

	b.click("switch party mode on", "#ctl-party")
	b.waitJS("the summary says party on", contains(`document.querySelector("#state-summary").textContent`, "party on (up to 2 of everyone, with reactions)"))
	b.waitJS("the control shown in the thread", contains(eventsText, "turned party mode on"))

	b.run("ask the panel", chromedp.SendKeys(chromedp.ID("message-input"), "which databases?"))
	b.pressEnter("#message-input", false)
	b.waitJS("the closing notice", `document.querySelector("#event-list .event.tag-party")`)
	b.waitJS("two round-1 and two round-2 replies",
		`document.querySelectorAll("#event-list .party-round-1").length === 2 && document.querySelectorAll("#event-list .party-round-2").length === 2`)
	starts := eval[[]string](b, `Array.from(document.querySelectorAll("#event-list .party-start")).map(e => e.dataset.partyTitle)`)
	if len(starts) != 2 || starts[0] != "Party · round 1 — first takes" || starts[1] != "Party · round 2 — reactions" {
		t.Errorf("party groups start with %q, want one for round 1 then one for round 2", starts)
	}
	if got := eval[string](b, `getComputedStyle(document.querySelector("#event-list .party-start"), "::before").content`); got != `"Party · round 1 — first takes"` {
		t.Errorf("group title shown as %s", got)
	}
	// A party trigger keeps one receipt per participant, the last round's;
	// its line tells both rounds.
	b.waitJS("the receipts tell both rounds", receiptLines("which databases?")+` === "alice: replied in rounds 1 and 2\nbob: replied in rounds 1 and 2"`)
	b.screenshot("ui-party.png")

	b.run("say goodbye", chromedp.SendKeys(chromedp.ID("message-input"), "thanks, goodbye"))
	b.pressEnter("#message-input", false)
	b.waitJS("the Party box off after the exit word", `!document.querySelector("#ctl-party").checked && !document.querySelector("#state-summary").textContent.includes("party on")`)
}
