package adapters_test

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestPayloadGolden(t *testing.T) {
	hop := 1
	created := agentbridge.Event{ID: "01JD3Q0000000000000000000A", Seq: 1, GSeq: 10, TS: "2026-11-21T09:59:00.000000Z",
		Thread: "t1", Type: agentbridge.TypeThreadCreated, From: "user", To: "all", Content: json.RawMessage(`"design"`)}
	reply := agentbridge.Event{ID: "01JD3Q0000000000000000000B", Seq: 6, GSeq: 92, TS: "2026-11-21T09:59:30.000000Z",
		Thread: "t1", Type: agentbridge.TypeMessage, From: "claude", To: "all", Content: json.RawMessage(`"I think so."`),
		Meta: agentbridge.Meta{ReplyTo: "01JD3Q0000000000000000000A", Tags: []string{"coordinator"}, Via: "bridge-coordinator", Hop: &hop}}
	trigger := agentbridge.Event{ID: "01JD3Q6Y7M8K9N0P1Q2R3S4T5V", Seq: 7, GSeq: 93, TS: "2026-11-21T10:00:00.123456Z",
		Thread: "t1", Type: agentbridge.TypeMessage, From: "user", To: "codex", Content: json.RawMessage(`"hello @codex"`),
		Meta: agentbridge.Meta{Extra: map[string]json.RawMessage{agentbridge.MetaAttachments: json.RawMessage(
			`[{"id":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","name":"shot.png","type":"image/png","size":48213}]`)}}}
	p := adapters.NewPayload("http://127.0.0.1:5111", agentbridge.Thread{ID: "t1", Name: "design"}, trigger, "codex",
		agentbridge.Profile{Client: "codex", Model: "gpt-5-codex", Nickname: "cx"},
		[]agentbridge.Event{created, reply, trigger}, "You are in a bridge thread.\n")
	// The coordinator writes the run's copy and sets its path.
	p.Attachments[0].Path = "/home/me/.local/state/agent-bridge/attachments/42/shot.png"
	got, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "payload.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("payload shape changed; adapters depend on it (go test -update if intended):\n%s", got)
	}

	empty := adapters.NewPayload("u", agentbridge.Thread{ID: "t"}, trigger, "p", agentbridge.Profile{}, nil, "")
	b, err := json.Marshal(empty)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"context_window":[]`) {
		t.Errorf("nil context not sent as []: %s", b)
	}
}

func TestTruncateReply(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"empty", "", 100, "[no output]"},
		{"blank", " \n\t\n", 100, "[no output]"},
		{"trimmed", "\n  hello\n\n", 100, "hello"},
		{"exact fit", "12345", 5, "12345"},
		{"no limit", strings.Repeat("a", 50), 0, strings.Repeat("a", 50)},
		{"cut", "abcdefghijklmnopqrstuvwxyz", 20, "abcdefgh\n[truncated]"},
		{"cut trims space before the marker", "abcdefg  hijklmnopqrstuvwxyz", 21, "abcdefg\n[truncated]"},
		{"runes not bytes", strings.Repeat("é", 30), 15, "ééé\n[truncated]"},
		{"tiny max", "abcdefghijklmnop", 5, "[trun"},
		{"max equals marker", "abcdefghijklmnop", 12, "[truncated]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := adapters.TruncateReply(tt.in, tt.max)
			if got != tt.want {
				t.Errorf("TruncateReply(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
			if tt.max > 0 && utf8.RuneCountInString(got) > tt.max {
				t.Errorf("result has %d runes, over max %d", utf8.RuneCountInString(got), tt.max)
			}
		})
	}
}

func TestRenderPrompt(t *testing.T) {
	msg := func(id, from, to, text string) agentbridge.Event {
		b, _ := json.Marshal(text)
		return agentbridge.Event{ID: id, Type: agentbridge.TypeMessage, From: from, To: to, Content: b}
	}
	control := agentbridge.Event{ID: "c", Type: agentbridge.TypeControl, From: "user", To: "all", Content: json.RawMessage(`{"pause":{"on":false}}`)}
	trigger := msg("e3", "user", "codex", "  what now?  ")
	full := adapters.NewPayload("u", agentbridge.Thread{ID: "t1", Name: "design"}, trigger, "codex", agentbridge.Profile{},
		[]agentbridge.Event{msg("e1", "user", "all", "hi all"), control, msg("e2", "claude", "all", "hello\n"), trigger}, "\nPRIMER\n")
	tests := []struct {
		name string
		p    adapters.Payload
		want string
	}{
		{"full", full, "PRIMER\n\n" +
			"## Conversation so far in thread \"design\" (oldest first)\n\n" +
			"user -> all: hi all\n\n" +
			"claude -> all: hello\n\n" +
			"## The message to answer\n\n" +
			"user -> codex: what now?\n\n" +
			"You are \"codex\" in this thread. Your reply (what you print) is posted to the thread for you.\n"},
		{"no primer, no history", adapters.NewPayload("u", agentbridge.Thread{ID: "t1"}, trigger, "codex", agentbridge.Profile{}, nil, ""),
			"## The message to answer\n\n" +
				"user -> codex: what now?\n\n" +
				"You are \"codex\" in this thread. Your reply (what you print) is posted to the thread for you.\n"},
		{"original payload with nested fields only", adapters.Payload{Trigger: adapters.TriggerInfo{ID: "x", From: "user", To: "all", Content: "nested"}},
			"## The message to answer\n\n" +
				"user -> all: nested\n\n" +
				"Your reply (what you print) is posted to the thread for you.\n"},
	}
	roster := adapters.Roster([]agentbridge.Invite{
		{ID: "claude", Profile: agentbridge.Profile{Client: "claude", Model: "opus", Nickname: "sage", Roles: []string{"reviewer"}}},
		{ID: "codex", Profile: agentbridge.Profile{Client: "codex"}},
	}, map[string]string{"claude": "listening"}, []string{"user"})
	withRoster := full
	withRoster.Participants = roster
	resumed := withRoster
	resumed.Session = adapters.SessionInfo{ID: "s1", Turns: 3}
	resumed.SinceLastTurn = []agentbridge.Event{msg("e2", "claude", "all", "hello\n"), trigger}
	tests = append(tests, []struct {
		name string
		p    adapters.Payload
		want string
	}{
		{"roster", withRoster, "PRIMER\n\n" +
			"## Who is in this thread\n\n" +
			"- @claude: claude, model opus, nickname sage, roles reviewer, listening\n" +
			"- @codex (you): codex, offline\n" +
			"- user: a person\n\n" +
			"## Conversation so far in thread \"design\" (oldest first)\n\n" +
			"user -> all: hi all\n\n" +
			"claude -> all: hello\n\n" +
			"## The message to answer\n\n" +
			"user -> codex: what now?\n\n" +
			"You are \"codex\" in this thread. Your reply (what you print) is posted to the thread for you.\n"},
		// A resumed session has the primer and the older messages
		// already: only what is new since its last turn is sent.
		{"resumed session", resumed,
			"## Who is in this thread\n\n" +
				"- @claude: claude, model opus, nickname sage, roles reviewer, listening\n" +
				"- @codex (you): codex, offline\n" +
				"- user: a person\n\n" +
				"## New in thread \"design\" since your last turn (oldest first)\n\n" +
				"claude -> all: hello\n\n" +
				"## The message to answer\n\n" +
				"user -> codex: what now?\n\n" +
				"You are \"codex\" in this thread. Your reply (what you print) is posted to the thread for you.\n"},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := adapters.RenderPrompt(tt.p); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		r    adapters.Result
		want []string
	}{
		{"start", adapters.Result{ExitCode: -1, StartErr: errors.New(`exec: "claude": executable file not found in $PATH`)},
			[]string{"could not be started", "executable file not found"}},
		{"interrupted", adapters.Result{ExitCode: -1, Interrupted: true, Signaled: true, Signal: syscall.SIGTERM}, []string{"interrupted"}},
		{"timeout", adapters.Result{ExitCode: -1, TimedOut: true, Signaled: true, Signal: syscall.SIGKILL}, []string{"within 10m0s"}},
		{"signal", adapters.Result{ExitCode: -1, Signaled: true, Signal: syscall.SIGSEGV}, []string{"signal 11"}},
		{"exit with stderr", adapters.Result{ExitCode: 2, StderrTail: []byte("\nusage: claude -p\n")},
			[]string{"exited with code 2", "stderr:\nusage: claude -p"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := adapters.ErrorMessage(tt.r, 10*time.Minute)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
		})
	}
}

func TestProdPayloadContent(t *testing.T) {
	trigger := agentbridge.Event{ID: "e1", Seq: 4, Thread: "t", Type: agentbridge.TypeControl, From: "user", To: "all",
		Content: json.RawMessage(`{"prod":["codex"]}`)}
	p := adapters.NewPayload("http://127.0.0.1:5111", agentbridge.Thread{ID: "t"}, trigger, "codex", agentbridge.Profile{}, nil, "")
	want := "user prodded you: read the conversation and reply if you have something to add."
	if p.Content != want || p.Trigger.Content != want {
		t.Fatalf("prod content = %q / %q, want %q", p.Content, p.Trigger.Content, want)
	}
	if p.Trigger.Type != agentbridge.TypeControl {
		t.Fatalf("trigger type = %q, want control", p.Trigger.Type)
	}
}

func TestStripControls(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "",
		"plain\ttext\nline two": "plain\ttext\nline two",
		"\x00\x01\x1f\r\n":      "\n",
		"é\x00ü \u0085":         "éü \u0085", // C1 (U+0085 is 0xC2 0x85) is valid text here
	} {
		if got := string(adapters.StripControls([]byte(in))); got != want {
			t.Errorf("StripControls(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRenderPromptAttachments: each message's files are listed under it,
// with where this run's copy is, or that there is none; the trigger's
// too. AttachmentsOf lists each file once, with the newest event naming
// it.
func TestRenderPromptAttachments(t *testing.T) {
	files := func(refs string) agentbridge.Meta {
		return agentbridge.Meta{Extra: map[string]json.RawMessage{agentbridge.MetaAttachments: json.RawMessage(refs)}}
	}
	a := `{"id":"sha256:aa","name":"shot.png","type":"image/png","size":10}`
	b := `{"id":"sha256:bb","name":"app.log","type":"text/plain; charset=utf-8","size":20}`
	first := agentbridge.Event{ID: "E1", Seq: 1, Type: agentbridge.TypeMessage, From: "user", To: "all", Content: json.RawMessage(`"look"`), Meta: files("[" + a + "]")}
	trigger := agentbridge.Event{ID: "E2", Seq: 2, Type: agentbridge.TypeMessage, From: "user", To: "codex", Content: json.RawMessage(`"and this"`), Meta: files("[" + a + "," + b + "]")}
	p := adapters.NewPayload("u", agentbridge.Thread{ID: "t"}, trigger, "codex", agentbridge.Profile{}, []agentbridge.Event{first, trigger}, "")
	if len(p.Attachments) != 2 || p.Attachments[0].Event != "E2" || p.Attachments[1].Name != "app.log" {
		t.Fatalf("attachments = %+v, want shot.png (newest event E2) and app.log", p.Attachments)
	}
	p.Attachments[0].Path = "/run/shot.png"
	got := adapters.RenderPrompt(p)
	for _, want := range []string{
		"user -> all: look\n[attached: shot.png (image/png, 10 bytes) at /run/shot.png]\n",
		"user -> codex: and this\n[attached: shot.png (image/png, 10 bytes) at /run/shot.png]\n[attached: app.log (text/plain; charset=utf-8, 20 bytes), not copied for this run]\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("prompt lacks %q:\n%s", want, got)
		}
	}
}
