package main

import (
	"encoding/json"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestPermitCommand: permit posts the permission control a coordinator
// hands to the waiting ACP agent (docs/acp.md); an option the request does
// not offer is refused with the options it does; a wrong number of
// arguments is a usage error.
func TestPermitCommand(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "t", "--id", "T")
	req, err := b.client().Append(t.Context(), "T", agentbridge.EventInput{From: "bridge-coordinator", To: "user",
		Content: json.RawMessage(`"claude asks to run mkdir demo"`),
		Meta: agentbridge.Meta{Extra: map[string]json.RawMessage{agentbridge.MetaPermission: json.RawMessage(
			`{"invocation":1,"tool_call":{"title":"mkdir demo","kind":"execute"},"options":[{"id":"allow","name":"Allow","kind":"allow_once"}]}`)}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	id := req.ID
	if _, errOut, code := c.run("permit", "T", id, "always"); code != 1 || !strings.Contains(errOut, `offers the options "allow", not "always"`) {
		t.Errorf("permit with an option not offered: exit %d, stderr %q", code, errOut)
	}
	c.ok("permit", "T", id, "allow")
	evs, err := b.client().ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: "T", After: -1})
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	ctl, err := agentbridge.ParseControl(last.Content)
	if last.Type != agentbridge.TypeControl || last.From != "user" || err != nil || ctl.Permission == nil ||
		ctl.Permission.Event != id || ctl.Permission.Option != "allow" {
		t.Fatalf("last event = %+v (%v)", last, err)
	}
	// A second answer (from another device, say) is stored but counts
	// for nothing: the bridge's sentence names the first, and exit 1.
	out, errOut, code := c.run("permit", "T", id, "allow")
	if code != 1 || !strings.Contains(errOut, "already answered by user at "+last.TS) || !strings.Contains(out, " seq ") {
		t.Errorf("a second permit: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, _, code := c.run("permit", "T", id); code != 2 {
		t.Errorf("permit with two arguments exited %d, want 2", code)
	}
}
