package uitest

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
)

// receiptLines is the text of the receipt lines under the message whose
// body is text.
func receiptLines(text string) string {
	return fmt.Sprintf(`(() => { const e = Array.from(document.querySelectorAll("#event-list .event")).find(e => e.querySelector(".event-body").textContent === %s); return e ? Array.from(e.querySelectorAll(".receipts .receipt")).map(r => r.querySelector(".receipt-text, .receipt-link").textContent).join("\n") : ""; })()`, jsString(text))
}

// TestReceiptLines: under an addressed message the UI shows one line per
// addressee, loaded with the page and then live from the stream, each with
// its reason when it has one: a skipped one, a queued one waiting for a
// coordinator, an interrupted one, a running one with its time and the status its
// presence reports, and "replied" once the reply is posted. The header
// links to the coordinator's dashboard at the URL serve was given.
func TestReceiptLines(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.serveArgs = []string{"--coordinator-url", "http://127.0.0.1:5999"}
	s.startServe()
	th := s.newThread("Receipts")
	s.invite(th, "codex", "")
	s.invite(th, "gemini", "")
	ev := s.post(th, map[string]any{"from": "user", "content": "@codex @gemini look at this"})
	id := ev["id"].(string)
	put := func(participant string, body map[string]any) {
		t.Helper()
		body["from"] = "bridge-coordinator"
		s.mustAPI(http.MethodPut, "/threads/"+th+"/receipts/"+id+"/"+participant, body, nil)
	}
	put("gemini", map[string]any{"state": "skipped", "reason": "no adapter"})
	// A coordinator registered with the bridge (contract 7.1): the receipts
	// it reports link their runs on its own status API.
	s.mustAPI(http.MethodPut, "/coordinators/laptop", map[string]any{"instance": "i1", "host": "laptop",
		"agents": []any{map[string]any{"name": "claude", "kind": "adapter"}}, "status_url": "http://127.0.0.1:5998"}, nil)

	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	lines := receiptLines("@codex @gemini look at this")
	b.waitJS("the skipped line loaded with the page", lines+` === "gemini: not invoked — no adapter"`)
	if href := eval[string](b, `document.querySelector("#runs-link").href`); href != "http://127.0.0.1:5999/" {
		t.Errorf("runs link = %q, want the --coordinator-url", href)
	}
	b.waitJS("the stream to be live", `document.querySelector("#conn-status").textContent === "live"`)

	// A queued line says what it waits for, and an interrupted one why,
	// without the state twice (a bridge before 0.4 wrote "interrupted:
	// <host> offline" as the reason).
	put("codex", map[string]any{"state": "queued", "reason": "waiting for a coordinator serving codex"})
	b.waitJS("codex queued with its reason, live", lines+`.startsWith("codex: queued — waiting for a coordinator serving codex\n")`)
	put("codex", map[string]any{"state": "interrupted", "reason": "interrupted: laptop offline"})
	b.waitJS("codex interrupted with its reason", lines+`.startsWith("codex: interrupted — laptop offline\n")`)
	put("codex", map[string]any{"state": "queued", "invocation": "7"})
	b.waitJS("codex queued, live", lines+`.startsWith("codex: queued\n")`)
	put("codex", map[string]any{"state": "running", "invocation": "7"})
	s.mustAPI(http.MethodPost, "/threads/"+th+"/presence", map[string]any{"from": "codex", "state": "thinking", "details": map[string]any{"status": "Bash: go test"}}, nil)
	b.waitJS("codex running with its status", `/^codex: running \d+ s · Bash: go test\n/.test(`+lines+`)`)
	b.waitJS("the running time to count", `/^codex: running [1-9]\d* s/.test(`+lines+`)`)

	reply := s.post(th, map[string]any{"from": "codex", "content": "all green", "meta": map[string]any{"reply_to": id}})
	put("codex", map[string]any{"state": "succeeded", "invocation": "7", "reply": reply["id"]})
	b.waitJS("codex replied", lines+` === "codex: replied\ngemini: not invoked — no adapter"`)
	// The line links its run on the coordinator's dashboard.
	if got := eval[string](b, `document.querySelector('.receipts .receipt[data-participant="codex"] .run-link').href`); got != "http://127.0.0.1:5999/?run=7" {
		t.Errorf("codex's run link = %q", got)
	}
	s.mustAPI(http.MethodPut, "/threads/"+th+"/receipts/"+id+"/gemini", map[string]any{"from": "laptop", "state": "failed", "invocation": "9"}, nil)
	b.waitJS("gemini failed", lines+` === "codex: replied\ngemini: failed"`)
	if got := eval[string](b, `document.querySelector('.receipts .receipt[data-participant="gemini"] .run-link').href`); got != "http://127.0.0.1:5998/?run=9" {
		t.Errorf("the run link of a receipt from the registered laptop = %q, want its status URL", got)
	}
	b.run("follow the replied line", chromedp.Click(chromedp.JSPath(`document.querySelector(".receipts .receipt-link")`)))
	b.waitJS("the reply highlighted", `Array.from(document.querySelectorAll("#event-list .event.highlight")).some(e => e.querySelector(".event-body").textContent === "all green")`)
}
