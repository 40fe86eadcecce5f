package uitest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestChangeCardAndMerge, at phone size (390×844): an agent working in a
// workspace changes a file; its reply shows a change card (the file with
// +1 −1), whose diff opens rendered by diff2html from the diff attachment;
// its Merge and Discard buttons are at least 44 px tall, and Merge lands
// the change in the repository and marks the card merged.
func TestChangeCardAndMerge(t *testing.T) {
	t.Parallel()
	repo := testutil.GitRepo(t, map[string]string{"a.txt": "before\n"})
	s := newStack(t)
	s.startServe()
	s.config = map[string]any{"workspaces": map[string]any{"app": map[string]any{"repo": repo, "base": "main"}}}
	s.agents = map[string]any{"alice": map[string]any{"command": []string{s.fake}, "workspace": "app"}}
	s.startCoordinator()
	th := s.newThread("Changes")
	s.invite(th, "alice", "")
	s.post(th, map[string]any{"from": "user", "to": "alice", "content": "fake:write=a.txt=changed_by_alice fake:say=I_changed_a.txt"})

	b := newBrowser(t)
	b.resize(phone)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	card := `document.querySelector("#event-list .change-card")`
	b.waitJS("the change card", card+` && `+card+`.checkVisibility()`)
	if got := eval[string](b, card+`.querySelector(".change-file").textContent`); !strings.Contains(got, "a.txt") || !strings.Contains(got, "+1") || !strings.Contains(got, "−1") {
		t.Errorf("file line = %q", got)
	}
	for _, sel := range []string{".change-merge", ".change-discard", ".change-show"} {
		if h := eval[float64](b, card+`.querySelector("`+sel+`").getBoundingClientRect().height`); h < 44 {
			t.Errorf("%s is %.0f px tall, want at least 44", sel, h)
		}
	}
	if w := eval[float64](b, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the page is %.0f px wide at 390", w)
	}
	b.click("show the diff", "#event-list .change-card .change-show")
	b.waitJS("the rendered diff", card+`.querySelector(".change-diff .d2h-wrapper") && `+card+`.querySelector(".change-diff").textContent.includes("changed by alice")`)
	b.docShot("ui-phone-change.png")
	b.click("merge", "#event-list .change-card .change-merge")
	b.waitJS("the card marked merged", card+`.classList.contains("change-merged") && `+card+`.querySelector(".change-state").textContent === "Merged into main."`)
	if got, _ := os.ReadFile(filepath.Join(repo, "a.txt")); string(got) != "changed by alice\n" {
		t.Errorf("a.txt after Merge = %q", got)
	}
}
