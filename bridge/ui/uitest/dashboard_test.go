package uitest

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// runRow is a JS expression for the dashboard row of the run whose
// participant is p.
func runRow(p string) string {
	return fmt.Sprintf(`Array.from(document.querySelectorAll("#runs-body tr.run")).find(r => r.querySelector(".participant").textContent === %s)`, jsString(p))
}

// TestRunsDashboard drives the coordinator's dashboard in Chromium: a
// finished run with its trigger, tokens and cost, its detail with the
// progress timeline, the usage totals, the filters, and a hanging run
// stopped with the Cancel button.
func TestRunsDashboard(t *testing.T) {
	s := newStack(t)
	s.startServe()
	s.startCoordinator()
	th := s.newThread("Dashboard")
	s.invite(th, "echo", "")
	s.invite(th, "slow", "")
	s.post(th, map[string]any{"from": "user", "to": "echo", "content": "count fake:progress=3"})

	b := newBrowser(t)
	b.run("open the dashboard", chromedp.Navigate(s.statusURL+"/"))
	echo := runRow("echo")
	b.waitJS("echo's run succeeded", echo+` && `+echo+`.dataset.status === "succeeded"`)
	if got := eval[string](b, echo+`.querySelector(".trigger").textContent`); got != "count fake:progress=3" {
		t.Errorf("trigger excerpt = %q", got)
	}
	if got := eval[string](b, echo+`.querySelector(".tokens").textContent`); got != "3 in / 6 out" {
		t.Errorf("tokens = %q, want the last cumulative usage", got)
	}
	if got := eval[string](b, echo+`.querySelector(".cost").textContent`); got != "$0.0030" {
		t.Errorf("cost = %q", got)
	}
	if got := eval[string](b, echo+`.querySelector(".exit").textContent`); got != "0" {
		t.Errorf("exit = %q", got)
	}
	b.waitJS("echo's usage today", `(() => { const r = document.querySelector('#usage-body tr[data-participant="echo"]'); return r && Array.from(r.children).map(c => c.textContent).join("|") === "echo|1|9|$0.0030|1|9|$0.0030"; })()`)

	b.run("open echo's detail", chromedp.Click(chromedp.JSPath(echo)))
	b.waitJS("the progress timeline", `document.querySelectorAll("#detail-progress li").length === 3 && document.querySelector("#detail-progress").textContent.includes("step 3")`)

	s.post(th, map[string]any{"from": "user", "to": "slow", "content": "wait fake:hang"})
	slow := runRow("slow")
	b.waitJS("slow's run running", slow+` && `+slow+`.dataset.status === "running"`)
	b.setValue("#f-participant", "slow")
	b.waitJS("only slow's runs listed", `document.querySelectorAll("#runs-body tr.run").length === 1 && `+slow)
	b.run("cancel slow's run", chromedp.Click(chromedp.JSPath(slow+`.querySelector("button.cancel")`)))
	b.waitJS("slow's run cancelled", slow+` && `+slow+`.dataset.status === "cancelled"`)
}
