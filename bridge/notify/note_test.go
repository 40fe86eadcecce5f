package notify

import (
	"encoding/json"
	"reflect"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestClassifyActions: a permission request to a human carries its
// answers as notification actions (Allow once for its allow_once option,
// Deny for its reject option) and whom to answer as; one to nobody in
// particular carries none, so its tap opens the request.
func TestClassifyActions(t *testing.T) {
	t.Parallel()
	humans := agentbridge.Humans{"user"}
	request := func(to, options string) agentbridge.Event {
		return agentbridge.Event{ID: "E1", Thread: "t1", Type: agentbridge.TypeMessage, From: "bridge-coordinator", To: to,
			Content: json.RawMessage(`"acpy asks permission to run mkdir demo"`),
			Meta: agentbridge.Meta{Tags: []string{"coordinator", "permission"}, Via: "bridge-coordinator", Extra: map[string]json.RawMessage{
				agentbridge.MetaPermission: json.RawMessage(`{"invocation":1,"tool_call":{"title":"mkdir demo","kind":"execute"},"options":` + options + `}`),
				"participant":              json.RawMessage(`"acpy"`)}}}
	}
	all := `[{"id":"allow_always","name":"Always allow","kind":"allow_always"},{"id":"allow","name":"Allow","kind":"allow_once"},{"id":"reject","name":"Reject","kind":"reject_once"}]`
	for _, c := range []struct {
		name, to, options string
		want              []Action
		as                string
	}{
		{"allow once and reject", "user", all, []Action{{"allow", "Allow once", "allow"}, {"deny", "Deny", "reject"}}, "user"},
		{"only always options", "user", `[{"id":"aa","name":"Always","kind":"allow_always"},{"id":"ra","name":"Never","kind":"reject_always"}]`, []Action{{"deny", "Deny", "ra"}}, "user"},
		{"to everyone", "all", all, nil, ""},
	} {
		n, ok := Classify(request(c.to, c.options), humans)
		if !ok || n.Category != agentbridge.PushPermission || !reflect.DeepEqual(n.Actions, c.want) || n.AnswerAs != c.as {
			t.Errorf("%s: %v %+v, want actions %+v as %q", c.name, ok, n, c.want, c.as)
		}
	}
}

// TestClassifyFieldQuestion: an ACP agent's question with fields is a
// question, titled with what the agent asks; ntfy's headline leaves that
// out.
func TestClassifyFieldQuestion(t *testing.T) {
	t.Parallel()
	e := agentbridge.Event{ID: "E2", Thread: "t1", Type: agentbridge.TypeMessage, From: "bridge-coordinator", To: "user",
		Content: json.RawMessage(`"acpy asks: Which branch?"`),
		Meta: agentbridge.Meta{Tags: []string{"coordinator", "question"}, Via: "bridge-coordinator", Extra: map[string]json.RawMessage{
			agentbridge.MetaQuestion: json.RawMessage(`{"invocation":1,"message":"Which branch?","fields":[{"name":"branch","type":"string"}]}`),
			"participant":            json.RawMessage(`"acpy"`)}}}
	n, ok := Classify(e, agentbridge.Humans{"user"})
	if !ok || n.Category != agentbridge.PushQuestion || n.Title != "acpy asks: Which branch?" || n.Headline != "acpy asks you a question" ||
		n.URL != "/ui/threads/t1#event-E2" || n.Actions != nil {
		t.Errorf("note = %+v", n)
	}
}
