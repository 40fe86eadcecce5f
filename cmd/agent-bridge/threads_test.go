package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

func TestThreadCommands(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)

	id := strings.TrimSpace(c.ok("thread", "new", "design", "review"))
	if id == "" || strings.ContainsAny(id, " \n") {
		t.Fatalf("thread new printed %q, want just the id", id)
	}
	var th agentbridge.Thread
	if err := json.Unmarshal([]byte(c.ok("thread", "new", "planning", "--id", "plan", "--json")), &th); err != nil || th.ID != "plan" || th.Name != "planning" {
		t.Fatalf("thread new --json = %+v, %v", th, err)
	}

	out := c.ok("thread", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(out, "design review") || !strings.Contains(out, "plan ") {
		t.Fatalf("thread list =\n%s", out)
	}

	if got := c.ok("thread", "rename", "plan", "the", "plan"); !regexp.MustCompile(`^\S+ seq 2\n$`).MatchString(got) {
		t.Fatalf("thread rename printed %q, want \"<id> seq 2\"", got)
	}
	var list []agentbridge.Thread
	if err := json.Unmarshal([]byte(c.ok("thread", "list", "--json", "--limit", "1")), &list); err != nil || len(list) != 1 {
		t.Fatalf("thread list --json --limit 1 = %+v, %v", list, err)
	}
	got, err := b.client().Thread(t.Context(), "plan")
	if err != nil || got.Name != "the plan" {
		t.Fatalf("after rename the thread is %+v, %v", got, err)
	}
}

func TestPostCommand(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "t", "--id", "T")

	first := c.ok("post", "T", "hello @codex", "--to", "codex")
	if !regexp.MustCompile(`^\S+ seq 2\n$`).MatchString(first) {
		t.Fatalf("post printed %q", first)
	}
	firstID := strings.Fields(first)[0]

	var e agentbridge.Event
	out := c.ok("post", "--json", "T", "a", "reply", "--from", "codex", "--reply-to", firstID)
	if err := json.Unmarshal([]byte(out), &e); err != nil || e.Seq != 3 || e.From != "codex" || e.Meta.ReplyTo != firstID || e.Text() != "a reply" {
		t.Fatalf("post --json = %+v, %v", e, err)
	}

	c.stdin = "line one\nline two\n"
	c.ok("post", "T", "-")
	c.stdin = ""
	evs, err := b.client().ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: "T", After: 3})
	if err != nil || len(evs) != 1 || evs[0].Text() != "line one\nline two" {
		t.Fatalf("post - stored %+v, %v", evs, err)
	}

	k1 := c.ok("post", "T", "once", "--idempotency-key", "abc")
	k2 := c.ok("post", "T", "once", "--idempotency-key", "abc")
	if k1 != k2 {
		t.Fatalf("idempotent posts printed %q and %q", k1, k2)
	}

	c.ok("post", "T", `{"pause":{"on":true}}`, "--type", "control")
	st, _, err := b.client().State(t.Context(), "T", 0)
	if err != nil || !st.Paused {
		t.Fatalf("after a pause control the state is %+v, %v", st, err)
	}
}

func TestInviteStateAndControls(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "t", "--id", "T")

	c.ok("invite", "T", "codex", "--client", "codex", "--model", "gpt-5", "--nickname", "cx", "--role", "reviewer", "--role", "tester")
	c.ok("invite", "T", "claude", "--client", "claude", "--model", "opus")
	c.ok("mute", "T", "claude")
	c.ok("discussion", "T", "on", "--agent-mentions=false")
	c.ok("auto", "T", "on")
	c.ok("prod", "T", "codex")

	out := c.ok("state", "T")
	for _, want := range []string{
		"thread T at seq 7", "paused:       off", "muted:        claude",
		"discussion:   on (agent mentions off)", "invited_auto: on",
		"codex", "client=codex", "model=gpt-5", "nickname=cx", "roles=reviewer,tester", "(invited by user)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("state output lacks %q:\n%s", want, out)
		}
	}

	var raw struct {
		Thread string                  `json:"thread"`
		Seq    int64                   `json:"seq"`
		State  agentbridge.ThreadState `json:"state"`
	}
	if err := json.Unmarshal([]byte(c.ok("state", "T", "--json", "--at", "3")), &raw); err != nil || raw.Seq != 3 || len(raw.State.Participants.Invited) != 2 || len(raw.State.Muted) != 0 {
		t.Fatalf("state --json --at 3 = %+v, %v", raw, err)
	}

	c.ok("unmute", "T", "claude")
	c.ok("uninvite", "T", "claude")
	c.ok("pause", "T", "on")
	st, _, err := b.client().State(t.Context(), "T", 0)
	if err != nil || !st.Paused || len(st.Muted) != 0 || len(st.Participants.Invited) != 1 {
		t.Fatalf("state after unmute, uninvite, pause = %+v, %v", st, err)
	}

	// A refusal comes back as the server's own sentence, exit 1.
	_, errOut, code := c.run("post", "T", "hi", "--from", "codex")
	if code != 1 || !strings.HasPrefix(errOut, "agent-bridge: ") || !strings.Contains(errOut, "paused") || strings.Contains(errOut, "thread_paused:") {
		t.Fatalf("post while paused: exit %d, stderr %q", code, errOut)
	}
	c.ok("pause", "T", "off")
	c.ok("post", "T", "hi", "--from", "codex")
}

func TestServerErrorsAreSentences(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	_, _, want := b.client().State(t.Context(), "missing", 0)
	var e *agentbridge.Error
	if !errors.As(want, &e) {
		t.Fatalf("state of a missing thread = %v", want)
	}
	for _, args := range [][]string{
		{"state", "missing"},
		{"post", "missing", "hi"},
		{"tail", "missing"},
		{"invite", "missing", "codex", "--client", "c", "--model", "m"},
	} {
		_, errOut, code := c.run(args...)
		if code != 1 || !strings.HasPrefix(errOut, "agent-bridge: ") || !strings.Contains(errOut, "missing") || strings.Contains(errOut, "thread_not_found") {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and the server's sentence", args, code, errOut)
		}
	}
	_, errOut, code := c.run("state", "missing")
	if errOut != "agent-bridge: "+e.Message+"\n" || code != 1 {
		t.Errorf("state of a missing thread printed %q, want the server's sentence %q", errOut, e.Message)
	}

	c.ok("thread", "new", "t", "--id", "T")
	_, errOut, code = c.run("invite", "T", "codex", "--client", "c", "--model", "m", "--from", "bad id")
	if code != 1 || !strings.Contains(errOut, "bad id") {
		t.Errorf("invalid --from: exit %d, stderr %q", code, errOut)
	}

	b.Stop()
	_, errOut, code = c.run("thread", "list")
	if code != 1 || !strings.Contains(errOut, "is the bridge running") {
		t.Errorf("bridge down: exit %d, stderr %q", code, errOut)
	}
}

func TestTokenFlags(t *testing.T) {
	t.Parallel()
	b := startTokenBridge(t, "s3cret")
	c := newCLI(t, b)
	_, errOut, code := c.run("thread", "list")
	if code != 1 || !strings.HasPrefix(errOut, "agent-bridge: ") || strings.Contains(errOut, "s3cret") {
		t.Fatalf("no token: exit %d, stderr %q", code, errOut)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.ok("thread", "new", "t", "--token-file", file)
	c.env["BRIDGE_TOKEN"] = "s3cret"
	if out := c.ok("thread", "list", "--json"); !strings.Contains(out, `"name":"t"`) {
		t.Fatalf("thread list with BRIDGE_TOKEN = %q", out)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	c := cli{t: t, env: map[string]string{"BRIDGE_URL": "http://127.0.0.1:1"}}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"thread"}, "thread: give a subcommand"},
		{[]string{"thread", "destroy"}, "unknown subcommand"},
		{[]string{"thread", "new"}, "NAME"},
		{[]string{"thread", "list", "--limit", "-1"}, "--limit"},
		{[]string{"thread", "list", "--limit", "many"}, "-limit"},
		{[]string{"thread", "rename", "T"}, "NAME"},
		{[]string{"post", "T"}, "THREAD and TEXT"},
		{[]string{"post", "T", "hi", "--bogus"}, "bogus"},
		{[]string{"invite", "T", "codex", "--model", "m"}, "--client"},
		{[]string{"invite", "T", "codex", "--client", "c"}, "--model"},
		{[]string{"invite", "T"}, "participant ID"},
		{[]string{"uninvite", "T"}, "participant ID"},
		{[]string{"mute", "T"}, "participant IDs"},
		{[]string{"mute", "T", "x", "--mode", "loud"}, "--mode"},
		{[]string{"pause", "T", "maybe"}, "on or off"},
		{[]string{"discussion", "T", "on", "--agent-mentions", "perhaps"}, "--agent-mentions"},
		{[]string{"state"}, "THREAD"},
		{[]string{"state", "T", "--at", "x"}, "-at"},
		{[]string{"tail"}, "THREAD, or --all"},
		{[]string{"tail", "T", "--all"}, "not both"},
		{[]string{"state", "T", "--url", "ftp://x"}, "--url"},
		{[]string{"state", "T", "--token-file", "/nonexistent/token"}, "--token-file"},
	}
	for _, tt := range tests {
		_, errOut, code := c.run(tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tt.args, code, errOut, tt.want)
		}
	}
}

// TestIgnoredActionsExplained checks that an action the bridge stores but
// that changes nothing is explained on stderr, exit 0, and that the same
// action with an effect prints no note.
func TestIgnoredActionsExplained(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "plan", "--id", "plan")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "plan", "on", "--from", "codex"}, `pause counts only from a human (user), and "codex" is not one`},
		{[]string{"post", "plan", "hi", "--to", "claude-code"}, `"claude-code" is not invited to this thread`},
		{[]string{"uninvite", "plan", "gemini"}, `"gemini" is not invited`},
		{[]string{"scene", "plan", "off"}, "no scene is running"},
	} {
		out, errOut, code := c.run(tc.args...)
		if code != 0 || !strings.Contains(out, " seq ") || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0, the seq, and a note naming %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if _, errOut, code := c.run("pause", "plan", "on"); code != 0 || errOut != "" {
		t.Errorf("pause from a human: exit %d, stderr %q; want no note", code, errOut)
	}
}

// TestInviteTakesTheConfiguredProfile: without --client and --model an
// invite sends the profile of the configured agent of that id (the
// built-in echo when no config file is there), a flag given wins, an ACP
// entry naming no model gets "default" (the agent's own), and an id the
// config does not profile is a usage error naming the flag.
func TestInviteTakesTheConfiguredProfile(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "t", "--id", "T")
	c.env["BRIDGE_COORDINATOR_CONFIG"] = ""
	c.ok("invite", "T", "echo") // no coordinator.config.json in this folder
	cfg := filepath.Join(t.TempDir(), "coordinator.config.json")
	if err := os.WriteFile(cfg, []byte(`{"agents":{"rev":{"command":["true"],"profile":{"client":"claude","model":"opus"}},"bare":{"command":["true"],"client":"codex"},"gem":{"acp":["gemini","--acp"],"client":"gemini"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env["BRIDGE_COORDINATOR_CONFIG"] = cfg
	c.ok("invite", "T", "rev")
	c.ok("invite", "T", "bare", "--model", "gpt-5")
	c.ok("invite", "T", "gem")
	st, _, err := b.client().State(t.Context(), "T", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, in := range st.Participants.Invited {
		got[in.ID] = in.Profile.Client + "/" + in.Profile.Model
	}
	if want := map[string]string{"echo": "echo/echo", "rev": "claude/opus", "bare": "codex/gpt-5", "gem": "gemini/default"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("invited %v, want %v", got, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"invite", "T", "nobody"}, "--client: required"},
		{[]string{"invite", "T", "bare"}, "--model: required"},
	} {
		if _, errOut, code := c.run(tc.args...); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestThreadNamesAndSeqs: a command that takes a thread takes its name
// when one thread has it (and refuses a shared one, listing the ids), the
// id wins over a name, and permit takes the request's seq as tail shows
// it. The shipped config gives claude-code a profile, so inviting it by
// name needs no flag.
func TestThreadNamesAndSeqs(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "design review", "--id", "D")
	root, err := testutil.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	c.env["BRIDGE_COORDINATOR_CONFIG"] = filepath.Join(root, "coordinator.config.json")
	c.ok("invite", "design review", "claude-code")
	c.ok("pause", "design review", "on")
	st, _, err := b.client().State(t.Context(), "D", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Paused || len(st.Participants.Invited) != 1 || st.Participants.Invited[0].Profile.Model != "sonnet" {
		t.Errorf("state after invite and pause by name: %+v", st)
	}
	c.ok("pause", "design review", "off")
	// A permission request as the coordinator posts it for an ACP agent,
	// at seq 5 (docs/acp.md).
	req := agentbridge.EventInput{From: "bridge-coordinator", To: "user", Content: json.RawMessage(`"may I?"`),
		Meta: agentbridge.Meta{Tags: []string{"coordinator", "permission"}, Extra: map[string]json.RawMessage{
			agentbridge.MetaPermission: json.RawMessage(`{"invocation":1,"options":[{"id":"allow","name":"Allow","kind":"allow_once"}]}`)}}}
	if _, err := b.client().Append(t.Context(), "D", req, ""); err != nil {
		t.Fatal(err)
	}
	c.ok("permit", "design review", "5", "allow")
	evs, err := b.client().ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: "D", After: -1})
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	var ctl struct {
		Permission struct{ Event, Option string }
	}
	if err := json.Unmarshal(last.Content, &ctl); err != nil || ctl.Permission.Event != evs[4].ID || ctl.Permission.Option != "allow" {
		t.Errorf("permit by seq 5 posted %s, want the id of seq 5, %s", last.Content, evs[4].ID)
	}
	if _, errOut, code := c.run("permit", "D", "99", "allow"); code != 2 || !strings.Contains(errOut, "no event 99") {
		t.Errorf("permit of a seq past the end: exit %d, stderr %q", code, errOut)
	}
	// why takes the thread and seq too: resolved before the coordinator is
	// asked.
	if _, errOut, code := c.run("why", "design review", "99"); code != 2 || !strings.Contains(errOut, "no event 99") {
		t.Errorf("why of a seq past the end: exit %d, stderr %q", code, errOut)
	}
	c.ok("thread", "new", "twin", "--id", "twin-a")
	c.ok("thread", "new", "twin", "--id", "twin-b")
	if _, errOut, code := c.run("state", "twin"); code != 2 || !strings.Contains(errOut, "name of 2 threads") || !strings.Contains(errOut, "twin-a") {
		t.Errorf("a shared name: exit %d, stderr %q; want 2 and the ids", code, errOut)
	}
	c.ok("thread", "new", "twin-a", "--id", "other")
	if out := c.ok("state", "twin-a"); !strings.Contains(out, "twin-a") {
		t.Errorf("the id did not win over a name: %s", out)
	}
}
