package main

import (
	"encoding/json"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestPermitCommand: permit posts the permission control a coordinator
// hands to the waiting ACP agent (docs/acp.md); a wrong number of
// arguments is a usage error.
func TestPermitCommand(t *testing.T) {
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "t", "--id", "T")
	req := c.ok("post", "T", "may I?", "--json")
	var posted struct {
		Event agentbridge.Event `json:"event"`
	}
	id := ""
	if err := json.Unmarshal([]byte(req), &posted); err == nil {
		id = posted.Event.ID
	}
	if id == "" {
		evs, err := b.client().ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: "T", After: -1})
		if err != nil || len(evs) == 0 {
			t.Fatalf("events: %v", err)
		}
		id = evs[len(evs)-1].ID
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
	if _, _, code := c.run("permit", "T", id); code != 2 {
		t.Errorf("permit with two arguments exited %d, want 2", code)
	}
}
