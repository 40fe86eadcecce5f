package main

import (
	"bytes"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestWriteChanges: changes prints each branch with its state, commits
// and +/−, and a sentence when nobody changed anything.
func TestWriteChanges(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := writeChanges(&b, nil); err != nil || !strings.Contains(b.String(), "No agent has changed anything") {
		t.Errorf("no changes: %q %v", b.String(), err)
	}
	b.Reset()
	list := []agentbridge.BranchChanges{{Participant: "claude", Workspace: "app", Branch: "agent-bridge/t/claude", Base: "main", State: agentbridge.ChangeMerged,
		Commit: "0123456789abcdef", Added: 3, Removed: 1, Changes: []agentbridge.ChangeInReply{{Event: "E1", Subject: "Fixed it",
			Change: agentbridge.Change{Commit: "fedcba9876543210", Added: 3, Removed: 1, Files: []agentbridge.ChangeFile{{Path: "a.go", Status: "modified", Added: 3, Removed: 1}}}}}}}
	if err := writeChanges(&b, list); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"claude  agent-bridge/t/claude (from main, workspace app)  merged as 0123456789ab  1 commit(s)  +3 −1", "  fedcba987654  Fixed it  +3 −1  a.go (modified +3 −1)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output %q lacks %q", b.String(), want)
		}
	}
}
