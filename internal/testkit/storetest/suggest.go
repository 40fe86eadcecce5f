package storetest

import (
	"context"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// testSuggestionStatus checks POST /suggestions/{id}/status's storage: a
// suggestion is accepted, dismissed and set back to pending, the change
// shows in the lists filtered by status and touches no other suggestion;
// a bad status, a missing by and an unknown id are refused with their
// codes and change nothing.
func testSuggestionStatus(t *testing.T, newStore Factory) {
	ss, ok := newStore(t, nil).(agentbridge.SuggestionStore)
	if !ok {
		t.Skip("the store keeps no suggestions")
	}
	ctx := context.Background()
	var ids []string
	for _, title := range []string{"one", "two", "three"} {
		sg, err := ss.Suggest(ctx, agentbridge.SuggestionInput{From: "codex", Title: title, Description: "d\x00 " + title})
		if err != nil {
			t.Fatalf("Suggest(%s): %v", title, err)
		}
		ids = append(ids, sg.ID)
	}
	statuses := func() string {
		t.Helper()
		list, err := ss.Suggestions(ctx, "")
		if err != nil {
			t.Fatalf("Suggestions: %v", err)
		}
		var out []string
		for _, sg := range list {
			out = append(out, sg.Status)
		}
		return strings.Join(out, ",")
	}
	set := func(id, status string) agentbridge.Suggestion {
		t.Helper()
		sg, err := ss.SetSuggestionStatus(ctx, id, agentbridge.SuggestionStatusInput{Status: status, By: "user"})
		if err != nil {
			t.Fatalf("SetSuggestionStatus(%s, %s): %v", id, status, err)
		}
		return sg
	}

	sg := set(ids[1], agentbridge.SuggestionAccepted)
	if sg.ID != ids[1] || sg.Status != agentbridge.SuggestionAccepted || sg.Title != "two" || sg.From != "codex" ||
		sg.Description != "d\x00 two" || sg.Timestamp == "" {
		t.Errorf("accepted suggestion = %+v", sg)
	}
	set(ids[2], agentbridge.SuggestionDismissed)
	if got := statuses(); got != "pending,accepted,dismissed" {
		t.Errorf("statuses = %s, want pending,accepted,dismissed", got)
	}
	for status, want := range map[string]string{"pending": ids[0], "accepted": ids[1], "dismissed": ids[2]} {
		list, err := ss.Suggestions(ctx, status)
		if err != nil || len(list) != 1 || list[0].ID != want {
			t.Errorf("Suggestions(%s) = %+v %v, want only %s", status, list, err, want)
		}
	}
	set(ids[2], agentbridge.SuggestionPending)
	set(ids[1], agentbridge.SuggestionAccepted) // setting the same status again is no error
	if got := statuses(); got != "pending,accepted,pending" {
		t.Errorf("statuses = %s, want pending,accepted,pending", got)
	}

	for _, c := range []struct {
		name, id string
		in       agentbridge.SuggestionStatusInput
		code     string
	}{
		{"bad status", ids[0], agentbridge.SuggestionStatusInput{Status: "done", By: "user"}, agentbridge.ECodeInvalidField},
		{"no status", ids[0], agentbridge.SuggestionStatusInput{By: "user"}, agentbridge.ECodeMissingField},
		{"no by", ids[0], agentbridge.SuggestionStatusInput{Status: "accepted"}, agentbridge.ECodeMissingField},
		{"bad by", ids[0], agentbridge.SuggestionStatusInput{Status: "accepted", By: "a b"}, agentbridge.ECodeInvalidField},
		{"unknown id", "01JD3Q6Y7M8K9N0P1Q2R3S4T5V", agentbridge.SuggestionStatusInput{Status: "accepted", By: "user"}, agentbridge.ECodeSuggestionNotFound},
		{"id not a ulid", "../x\xff", agentbridge.SuggestionStatusInput{Status: "accepted", By: "user"}, agentbridge.ECodeSuggestionNotFound},
	} {
		if _, err := ss.SetSuggestionStatus(ctx, c.id, c.in); agentbridge.ErrorCode(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	if got := statuses(); got != "pending,accepted,pending" {
		t.Errorf("after refused changes statuses = %s, want pending,accepted,pending", got)
	}
}
