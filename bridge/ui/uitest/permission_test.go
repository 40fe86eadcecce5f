package uitest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestPermissionRequestButtons: an ACP agent's permission request
// (contract 6.6: tags coordinator,permission, meta.permission with the tool
// call and the options), addressed to the viewer, shows the options as
// buttons; a click posts the permission control as the viewer, naming the
// request and the option, and the control reads as a sentence. Someone
// else viewing gets no buttons.
func TestPermissionRequestButtons(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("Permissions")
	s.invite(th, "claude", "")
	req := s.askPermission(th, "claude asks to run `rm -rf build`")
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	request := `document.querySelector("#event-list .event.tag-permission")`
	b.waitJS("the request with its buttons", request+` && `+request+`.classList.contains("question-for-me") && `+request+`.querySelector(".permission-option").checkVisibility()`)
	if got := eval[string](b, `Array.from(`+request+`.querySelectorAll(".permission-option")).map(b => b.textContent).join("|")`); got != "Allow once|Reject" {
		t.Errorf("buttons = %q", got)
	}
	if got := eval[string](b, request+`.querySelector(".permission-call").textContent`); got != "rm -rf build" {
		t.Errorf("tool call = %q", got)
	}
	// What the agent wants, in a sentence; the request's own text, with
	// its ids and command line, only under Details.
	if got := eval[string](b, request+`.querySelector(".ask-line").textContent`); got != "claude wants to run this command:" {
		t.Errorf("the request's sentence = %q", got)
	}
	if got := eval[string](b, request+`.innerText`); strings.Contains(got, "agent-bridge permit") || strings.Contains(got, req["id"].(string)) {
		t.Errorf("the closed card shows the command line or the request's id: %q", got)
	}
	b.click("open the details", `#event-list .event.tag-permission details.more > summary`)
	b.waitJS("the command line under Details", contains(request+`.querySelector("details.more").innerText`, fmt.Sprintf("agent-bridge permit Permissions %v allow", req["seq"])))
	b.setValue("#sender", "someone-else")
	b.waitJS("no buttons for another viewer", `!`+request+`.querySelector(".permission-option").checkVisibility()`)
	b.setValue("#sender", "user")
	b.waitJS("buttons again for user", request+`.querySelector(".permission-option").checkVisibility()`)

	b.click("allow once", `#event-list .event.tag-permission .permission-option[data-option="allow"]`)
	b.waitJS("the answer as a sentence", contains(eventsText, "answered a permission request: “Allow once”"))
	b.waitJS("the request answered, its buttons gone", request+`.classList.contains("answered") && !`+request+`.querySelector(".permission-option").checkVisibility() && `+request+`.querySelector(".permission-answer").textContent === "Allowed once by user (“Allow once”)"`)

	var page struct {
		Events []struct {
			Type    string          `json:"type"`
			From    string          `json:"from"`
			Content json.RawMessage `json:"content"`
		} `json:"events"`
	}
	s.mustAPI("GET", "/threads/"+th+"/events", nil, &page)
	var answers []map[string]map[string]string
	for _, e := range page.Events {
		var c map[string]map[string]string
		if e.Type == "control" && json.Unmarshal(e.Content, &c) == nil && c["permission"] != nil {
			if e.From != "user" {
				t.Errorf("the answer was sent as %q, want the viewer", e.From)
			}
			answers = append(answers, c)
		}
	}
	if len(answers) != 1 || answers[0]["permission"]["event"] != req["id"] || answers[0]["permission"]["option"] != "allow" {
		t.Errorf("permission controls = %v, want one {event: %v, option: allow}", answers, req["id"])
	}
}

// TestPermissionRequestClosedByNotice: the coordinator's notice that a
// request waits no more (its run stopped, or no answer came in time)
// replies to it; the request's buttons give way to the notice, and the
// notice itself asks the viewer nothing.
func TestPermissionRequestClosedByNotice(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("Withdrawn")
	s.invite(th, "claude", "")
	req := s.post(th, map[string]any{
		"from": "bridge-coordinator", "to": "user", "content": "claude asks permission to run mkdir demo",
		"meta": map[string]any{
			"tags": []string{"coordinator", "permission"}, "via": "bridge-coordinator",
			"permission": map[string]any{
				"invocation": "3",
				"tool_call":  map[string]any{"title": "mkdir demo", "kind": "execute"},
				"options":    []map[string]any{{"id": "allow", "name": "Allow", "kind": "allow_once"}},
			},
		},
	})
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	request := `document.querySelector("#event-list .event.tag-permission")`
	b.waitJS("the request with its button", request+` && `+request+`.querySelector(".permission-option").checkVisibility()`)
	s.post(th, map[string]any{
		"from": "bridge-coordinator", "to": "user", "content": "claude's run stopped before an answer: the permission request is withdrawn.",
		"meta": map[string]any{"tags": []string{"coordinator", "permission"}, "via": "bridge-coordinator", "reply_to": req["id"]},
	})
	b.waitJS("the request closed by the notice", request+`.classList.contains("answered") && !`+request+`.querySelector(".permission-option").checkVisibility() && `+
		request+`.querySelector(".permission-answer").textContent === "No longer waiting: claude's run stopped before an answer: the permission request is withdrawn."`)
	notice := `document.querySelectorAll("#event-list .event.tag-permission")[1]`
	if got := eval[bool](b, notice+`.classList.contains("asks") || !!`+notice+`.querySelector(".permission")`); got {
		t.Error("the notice is shown as a request of its own")
	}
	// Opened afresh, the thread shows the request closed as well.
	b.run("reload", chromedp.Reload())
	b.waitJS("closed after a reload", request+` && `+request+`.classList.contains("answered")`)
}

// TestPermissionFirstAnswerWins: a request rejected from the CLI and then
// answered again (a refused second "permit … allow", already_answered)
// shows "Rejected" everywhere: the CLI's second answer says so, the card
// of a page open meanwhile, the card after a reload, and a second browser.
// The first answer that took effect is the one the agent got.
func TestPermissionFirstAnswerWins(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("Answered twice")
	s.invite(th, "claude", "")
	req := s.askPermission(th, "claude asks permission to run rm -rf build")
	seq := strconv.Itoa(int(req["seq"].(float64)))
	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	sel := `#event-list .event[data-id="` + req["id"].(string) + `"]`
	card := `document.querySelector(` + jsString(sel) + `)`
	b.waitJS("the request with its buttons", card+` && `+card+`.querySelector(".permission-option").checkVisibility()`)

	cliEnv := append(os.Environ(), "BRIDGE_URL="+s.url, "HOME="+t.TempDir())
	permit := func(option string) (string, int) {
		cmd := exec.Command(s.bin, "permit", "Answered twice", seq, option)
		cmd.Env = cliEnv
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("permit %s: %v", option, err)
		}
		return string(out), code
	}
	if out, code := permit("reject"); code != 0 {
		t.Fatalf("permit reject: exit %d: %s", code, out)
	}
	out, code := permit("allow")
	if code != 1 || !strings.Contains(out, "already answered by user") || !strings.Contains(out, "rejected (“Reject”)") {
		t.Errorf("a second permit: exit %d, want 1 and the first answer named rejected:\n%s", code, out)
	}
	rejected := card + `.querySelector(".permission-answer")?.textContent === "Rejected by user (“Reject”)" && !` + card + `.querySelector(".permission-option").checkVisibility()`
	b.waitJS("both answers shown in the thread", `document.querySelectorAll("#event-list .event.type-control").length === 3`)
	b.waitJS("the open page says rejected", rejected)
	b.run("reload", chromedp.Reload())
	b.waitJS("rejected after a reload", rejected)
	other := newBrowser(t)
	other.resize(phone)
	other.run("open the thread in a second browser", chromedp.Navigate(s.url+"/ui/threads/"+th))
	other.waitJS("rejected in the second browser", rejected)

	// The person's tail marks the second answer as without effect.
	ctx, stop := context.WithCancel(t.Context())
	tail := exec.CommandContext(ctx, s.bin, "tail", "Answered twice")
	var tailOut testutil.Buffer
	tail.Env, tail.Stdout, tail.Stderr = cliEnv, &tailOut, &tailOut
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); _ = tail.Wait() }()
	second := regexp.MustCompile(`(?m)^\[\d+\] \S+ user → all \(control\): \{"permission":\{"event":"` + req["id"].(string) + `","option":"allow"\}\} — no effect: already answered by user: rejected \(“Reject”\)$`)
	testutil.WaitFor(t, waitTimeout, "tail marking the second answer", func() bool { return second.MatchString(tailOut.String()) })

	// The bridge agrees: the second answer is the one noted.
	var page struct {
		Events []struct {
			Type string
			Seq  int
		}
	}
	s.mustAPI(http.MethodGet, "/threads/"+th+"/events", nil, &page)
	if n := len(page.Events); n < 2 || page.Events[n-1].Type != "control" || page.Events[n-2].Type != "control" {
		t.Errorf("the thread does not end with the two answers: %+v", page.Events)
	}
}

// askPermission posts, as the coordinator does for claude (contract 6.6),
// a permission request to run "rm -rf build" addressed to user, with the
// options Allow once and Reject, and returns the event.
func (s *stack) askPermission(thread, content string) map[string]any {
	s.t.Helper()
	return s.post(thread, map[string]any{
		"from": "bridge-coordinator", "to": "user", "content": content,
		"meta": map[string]any{
			"tags": []string{"coordinator", "permission"}, "via": "bridge-coordinator", "participant": "claude",
			"permission": map[string]any{
				"invocation": "12", "tool_call": map[string]any{"title": "rm -rf build", "kind": "execute"},
				"options": []map[string]any{{"id": "allow", "name": "Allow once", "kind": "allow_once"}, {"id": "reject", "name": "Reject", "kind": "reject_once"}},
			},
		},
	})
}
