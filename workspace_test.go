package agentbridge

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestWorkspaceAndChangeControls: the workspace and change controls parse
// into their shapes, a bad one is invalid_control naming its key, both are
// a person's only, the fold keeps the thread's workspace, and an invite's
// profile workspace is the participant's.
func TestWorkspaceAndChangeControls(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		content string
		field   string
	}{
		{`{"workspace":{"name":"app"}}`, ""},
		{`{"workspace":{"name":""}}`, ""},
		{`{"workspace":{"name":"../etc"}}`, "content.workspace"},
		{`{"workspace":{}}`, "content.workspace"},
		{`{"change":{"merge":{"participant":"claude","into":"main","squash":true}}}`, ""},
		{`{"change":{"discard":{"participant":"claude"}}}`, ""},
		{`{"change":{"merge":{"participant":"claude","into":"--force"}}}`, "content.change"},
		{`{"change":{"merge":{"participant":"claude","into":"a..b"}}}`, "content.change"},
		{`{"change":{"merge":{"participant":"claude"},"discard":{"participant":"claude"}}}`, "content.change"},
		{`{"change":{}}`, "content.change"},
		{`{"invite":{"participant_id":"x","profile":{"client":"c","model":"m","workspace":"/home"}}}`, "content.invite"},
	} {
		_, err := ParseControl(json.RawMessage(c.content))
		var e *Error
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v", c.content, err)
		case c.field != "" && (!asError(err, &e) || e.Field != c.field):
			t.Errorf("%s: %v, want invalid_control on %s", c.content, err, c.field)
		}
	}
	ctl, _ := ParseControl(json.RawMessage(`{"change":{"merge":{"participant":"claude","into":"main","squash":true}},"workspace":{"name":"app"}}`))
	if keys := HumanOnlyKeys(ctl); strings.Join(keys, ",") != "workspace,change" {
		t.Errorf("human-only keys = %v", keys)
	}
	if m := ctl.Change.Merge; m.Participant != "claude" || m.Into != "main" || !m.Squash || ctl.Change.Participant() != "claude" {
		t.Errorf("merge = %+v", m)
	}
	humans := Humans{"user"}
	st := Fold(ThreadState{}, Event{Type: TypeControl, From: "user", Content: json.RawMessage(`{"workspace":{"name":"app"}}`)}, humans)
	st = Fold(st, Event{Type: TypeControl, From: "codex", Content: json.RawMessage(`{"workspace":{"name":"web"}}`)}, humans)
	st = Fold(st, Event{Type: TypeControl, From: "user", Content: json.RawMessage(`{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m","workspace":"web"}}}`)}, humans)
	if st.Workspace != "app" || st.WorkspaceOf("codex") != "web" || st.WorkspaceOf("claude") != "app" {
		t.Errorf("state workspace %q, codex's %q, claude's %q", st.Workspace, st.WorkspaceOf("codex"), st.WorkspaceOf("claude"))
	}
}

func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

// TestIgnoredWorkspace: a workspace no live coordinator registered is
// ignored, naming the ones they have; a registered one, a lapsed
// coordinator's aside, is not.
func TestIgnoredWorkspace(t *testing.T) {
	t.Parallel()
	list := []CoordinatorInfo{
		{Registration: Registration{ID: "a", Workspaces: []string{"app"}}, Live: true},
		{Registration: Registration{ID: "b", Workspaces: []string{"old"}}, Live: false},
	}
	ctl := func(name string) *Control { return &Control{Workspace: &WorkspaceControl{Name: name}} }
	if ig := IgnoredWorkspace(ctl("app"), list); ig != nil {
		t.Errorf("app: %+v", ig)
	}
	if ig := IgnoredWorkspace(ctl("old"), list); ig == nil || ig.Code != IgnoredUnknownWorkspace || !strings.Contains(ig.Reason, `"app"`) {
		t.Errorf("old (only a lapsed coordinator's): %+v", ig)
	}
	if ig := IgnoredWorkspace(ctl(""), list); ig != nil {
		t.Errorf("back to the agents' own: %+v", ig)
	}
}

// TestChangesOf: the replies' changes group by participant; a merge's
// notice closes its participant's branch, a later change opens a new one,
// and a refusal leaves it open.
func TestChangesOf(t *testing.T) {
	t.Parallel()
	change := func(from, commit string, added int) Event {
		b, _ := json.Marshal(Change{Workspace: "app", Branch: "agent-bridge/t/" + from, Base: "main", Commit: commit, Parent: "p", Added: added})
		return Event{ID: commit, From: from, Type: TypeMessage, Content: json.RawMessage(`"did it\nmore"`), Meta: Meta{Extra: map[string]json.RawMessage{MetaChange: b}}}
	}
	result := func(p, state string) Event {
		b, _ := json.Marshal(ChangeResult{Participant: p, Op: "merge", State: state, Commit: "m1"})
		return Event{ID: "n-" + state, From: "bridge-coordinator", Type: TypeMessage, Meta: Meta{Extra: map[string]json.RawMessage{MetaChangeResult: b}}}
	}
	got := ChangesOf([]Event{change("claude", "c1", 1), change("codex", "x1", 2), change("claude", "c2", 3), result("codex", ChangeRefused), result("claude", ChangeMerged), change("claude", "c3", 5)})
	if len(got) != 2 || got[0].Participant != "claude" || got[0].State != "open" || len(got[0].Changes) != 1 || got[0].Changes[0].Commit != "c3" || got[0].Added != 5 {
		t.Fatalf("claude = %+v", got)
	}
	if got[1].State != "open" || len(got[1].Changes) != 1 || got[1].Changes[0].Subject != "did it" {
		t.Errorf("codex = %+v", got[1])
	}
	if got := ChangesOf([]Event{change("claude", "c1", 1), result("claude", ChangeMerged)}); got[0].State != ChangeMerged || got[0].Commit != "m1" {
		t.Errorf("merged = %+v", got)
	}
}
