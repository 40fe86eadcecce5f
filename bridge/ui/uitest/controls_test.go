package uitest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestControlSentences posts one control of every kind the UI's sentence
// table knows and checks the sentence each is shown as: no JSON, and a
// scene's start and close say nothing about party mode. The permission
// answer is covered by TestPermissionRequestButtons.
func TestControlSentences(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("Controls")
	// The answer control names a question with fields (an ACP agent's
	// form, as the coordinator posts it): a message, not a control.
	question := s.post(th, map[string]any{"from": "bridge-coordinator", "to": "user", "content": "maria asks: Which branch?",
		"meta": map[string]any{"tags": []string{"coordinator", "question"},
			"question": map[string]any{"invocation": 1, "message": "Which branch?", "fields": []any{map[string]any{"name": "branch", "type": "string"}}}}})
	samples := []controlSample{
		{"invite", map[string]any{"invite": map[string]any{"participant_id": "maria", "profile": map[string]any{"client": "fake", "model": "fake-1", "nickname": "Maria"}}}, "invited maria (Maria, fake / fake-1)"},
		{"invite", map[string]any{"invite": map[string]any{"participant_id": "sam", "profile": map[string]any{"client": "fake", "model": "fake-1"}}}, "invited sam (fake / fake-1)"},
		{"scene", map[string]any{"scene": map[string]any{"on": true, "actors": []string{"maria", "sam"}, "setting": "a kitchen"}}, "started a scene with Maria (maria) and sam"},
		{"scene", map[string]any{"scene": map[string]any{"on": false}}, "closed the scene"},
		{"party", map[string]any{"party": map[string]any{"on": true, "max_agents": 2}}, "turned party mode on (up to 2 of everyone, with reactions)"},
		{"party", map[string]any{"party": map[string]any{"on": false}}, "turned party mode off"},
		{"mute", map[string]any{"mute": map[string]any{"targets": []string{"sam"}, "mode": "hard"}}, "muted sam"},
		{"unmute", map[string]any{"unmute": map[string]any{"targets": []string{"sam"}}}, "unmuted sam"},
		{"discussion", map[string]any{"discussion": map[string]any{"on": true, "allow_agent_mentions": false}}, "turned discussion mode on (only people’s mentions wake agents)"},
		{"invited_auto", map[string]any{"invited_auto": map[string]any{"on": true}}, "turned invited auto-reply on"},
		{"prod", map[string]any{"prod": []string{"maria", "sam"}}, "prodded Maria (maria) and sam"},
		{"cancel", map[string]any{"cancel": map[string]any{"participant_id": "sam"}}, "stopped sam’s runs in this thread"},
		{"reset_session", map[string]any{"reset_session": map[string]any{"participant_id": "maria"}}, "reset Maria (maria)’s session: its next run starts afresh"},
		{"uninvite", map[string]any{"uninvite": map[string]any{"participant_id": "sam"}}, "uninvited sam"},
		{"workspace", map[string]any{"workspace": map[string]any{"name": "app"}}, "set the thread’s workspace to app"},
		{"change", map[string]any{"change": map[string]any{"merge": map[string]any{"participant": "maria", "into": "main", "squash": true}}}, "asked to merge Maria (maria)’s change into main, squashed"},
		{"change", map[string]any{"change": map[string]any{"discard": map[string]any{"participant": "maria"}}}, "asked to discard Maria (maria)’s change"},
		{"schedule", map[string]any{"schedule": map[string]any{"id": "standup", "cron": "0 9 * * 1-5", "tz": "Europe/Berlin", "event": map[string]any{"to": "maria", "content": "the open PRs"}}}, "scheduled standup (0 9 * * 1-5, Europe/Berlin) to Maria (maria)"},
		{"schedule", map[string]any{"schedule": map[string]any{"id": "standup", "off": true}}, "turned schedule standup off"},
		{"pause", map[string]any{"pause": map[string]any{"on": true}}, "paused the thread"},
		{"answer", map[string]any{"answer": map[string]any{"event": question["id"], "fields": map[string]any{"branch": "main"}}}, "answered a question: branch “main”"},
	}
	for _, c := range samples {
		s.post(th, map[string]any{"type": "control", "from": "user", "content": c.content})
	}
	for _, vp := range []viewport{phone, desktop} {
		t.Run(vp.name, func(t *testing.T) { checkControlSentences(t, s, th, vp, samples) })
	}
}

// checkControlSentences opens the thread at one size and checks each
// control's sentence.
func checkControlSentences(t *testing.T, s *stack, th string, vp viewport, samples []controlSample) {
	b := newBrowser(t)
	b.resize(vp)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	sentences := `Array.from(document.querySelectorAll("#event-list .event.type-control .event-body")).map(e => e.textContent)`
	b.waitJS("every control shown", fmt.Sprintf(`(%s).length === %d && document.querySelector("#participant-list .participant")`, sentences, len(samples)))
	// The names come from the state: wait for them before reading.
	b.waitJS("names from the state", contains(sentences+`.join("\n")`, "Maria (maria)"))
	got := eval[[]string](b, sentences)
	for i, c := range samples {
		if got[i] != c.want {
			t.Errorf("%s control %s shown as %q, want %q", c.key, mustMarshal(c.content), got[i], c.want)
		}
		if strings.ContainsAny(got[i], "{}") {
			t.Errorf("%s control shown with JSON: %q", c.key, got[i])
		}
		if c.key == "scene" && strings.Contains(got[i], "party") {
			t.Errorf("a scene control mentions party mode: %q", got[i])
		}
	}
	// Every key of the one table has a sample here (the table itself is
	// checked against the bridge's control keys in bridge/ui).
	keys := eval[[]string](b, `import("/ui/static/controls.js").then(m => Object.keys(m.CONTROL_SENTENCES))`, chromedp.EvalAwaitPromise)
	for _, k := range keys {
		if k != "permission" && !slices.ContainsFunc(samples, func(c controlSample) bool { return c.key == k }) {
			t.Errorf("no sample for the control %q", k)
		}
	}
}

// controlSample is one control event and the sentence it must show as.
type controlSample struct {
	key     string
	content map[string]any
	want    string
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
