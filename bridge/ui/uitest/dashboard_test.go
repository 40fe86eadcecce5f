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
	t.Parallel()
	s := newStack(t)
	s.startServe()
	s.startCoordinator()
	th := s.newThread("Dashboard")
	s.invite(th, "echo", "")
	s.invite(th, "slow", "")

	b := newBrowser(t)
	b.run("open the dashboard", chromedp.Navigate(s.statusURL+"/"))
	b.waitJS("the empty table says why", contains(`document.querySelector("#runs-body").textContent`, "No runs yet"))
	s.post(th, map[string]any{"from": "user", "to": "echo", "content": "count fake:progress=3"})
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
	if got := eval[string](b, echo+`.querySelector(".exit").textContent`); got != "0 · ok" {
		t.Errorf("exit = %q", got)
	}
	if got := eval[string](b, echo+`.querySelector(".thread a").textContent + " " + `+echo+`.querySelector(".thread a").href`); got != "Dashboard "+s.url+"/ui/threads/"+th {
		t.Errorf("thread cell = %q, want the name linking to the bridge's UI", got)
	}
	b.waitJS("echo's usage today", `(() => { const r = document.querySelector('#usage-body tr[data-participant="echo"]'); return r && Array.from(r.children).map(c => c.textContent).join("|") === "echo|1|9|$0.0030|1|9|$0.0030"; })()`)

	b.run("open echo's detail", chromedp.Click(chromedp.JSPath(echo)))
	b.waitJS("the progress timeline", `document.querySelectorAll("#detail-progress li").length === 3 && document.querySelector("#detail-progress").textContent.includes("step 3")`)
	if !eval[bool](b, inWindow("#detail")) {
		t.Error("the run's detail is not in view")
	}
	if got := eval[string](b, `location.search`); got != "?run="+eval[string](b, echo+`.dataset.id`) {
		t.Errorf("the address of the open detail = %q", got)
	}
	b.click("close the detail", "#detail-close")
	b.waitJS("the detail closed", `document.querySelector("#detail").hidden`)

	// A prod's run shows its trigger as one line of words.
	s.post(th, map[string]any{"type": "control", "from": "user", "content": map[string]any{"prod": []string{"echo"}}})
	b.waitJS("the prod's run", `Array.from(document.querySelectorAll("#runs-body tr.run .trigger")).some(c => c.textContent === "prod echo")`)

	s.post(th, map[string]any{"from": "user", "to": "slow", "content": "wait fake:hang"})
	slow := runRow("slow")
	b.waitJS("slow's run running", slow+` && `+slow+`.dataset.status === "running"`)
	b.setValue("#f-participant", "slow")
	b.waitJS("only slow's runs listed", `document.querySelectorAll("#runs-body tr.run").length === 1 && `+slow)
	b.run("cancel slow's run", chromedp.Click(chromedp.JSPath(slow+`.querySelector("button.cancel")`)))
	b.waitJS("slow's run cancelled, its end in words", slow+` && `+slow+`.dataset.status === "cancelled" && `+slow+`.querySelector(".exit").textContent === "stopped: cancelled"`)
	// A run that reported no cost (as codex reports none) says "-" in both
	// tables, as the CLI's invocations table does: "$0" would claim it was
	// free.
	if got := eval[string](b, slow+`.querySelector(".cost").textContent`); got != "-" {
		t.Errorf("the cost of a run that reported none = %q, want -", got)
	}
	b.waitJS("slow's usage without a cost", `(() => { const r = document.querySelector('#usage-body tr[data-participant="slow"]'); return r && Array.from(r.children).map(c => c.textContent).join("|") === "slow|1|0|-|1|0|-"; })()`)
	b.setValue("#f-participant", "nobody")
	b.waitJS("no run matches", `document.querySelectorAll("#runs-body tr.run").length === 0 && `+contains(`document.querySelector("#runs-body").textContent`, "No runs match these filters."))
}

// TestRunsDashboardLayout shows the dashboard at 390×844 and 1400×900:
// nothing wider than the window, a run's detail in view, opened from the
// link a receipt in the bridge's UI carries (?run=ID). The desktop's
// detail is in docs/ui.md.
func TestRunsDashboardLayout(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	s.startCoordinator()
	th := s.newThread("Release checklist")
	s.invite(th, "echo", "Echo")
	s.post(th, map[string]any{"from": "user", "to": "echo", "content": "summarise the failing tests fake:progress=2"})
	s.post(th, map[string]any{"type": "control", "from": "user", "content": map[string]any{"prod": []string{"echo"}}})
	for _, vp := range []viewport{phone, desktop} {
		t.Run(vp.name, func(t *testing.T) {
			b := newBrowser(t)
			b.resize(vp)
			b.run("open the dashboard", chromedp.Navigate(s.statusURL+"/"))
			b.waitJS("both runs succeeded", `document.querySelectorAll('#runs-body tr.run[data-status="succeeded"]').length === 2`)
			if got := eval[[]string](b, overflowing); len(got) > 0 {
				t.Errorf("wider than the %d px window: %v", vp.w, got)
			}
			if vp.mobile {
				b.screenshot("ui-layout-phone-runs.png")
			}
			id := eval[string](b, `Array.from(document.querySelectorAll("#runs-body tr.run")).pop().dataset.id`)
			b.run("open a run by its address", chromedp.Navigate(s.statusURL+"/?run="+id))
			b.waitJS("the detail in view", inWindow("#detail")+` && document.querySelector("#detail-title").textContent.startsWith("#"+`+jsString(id)+`) && document.querySelectorAll("#detail-progress li").length === 2`)
			if !vp.mobile {
				b.docShot("ui-desktop-run-detail.png")
			}
		})
	}
}
