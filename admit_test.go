package agentbridge

import (
	"encoding/json"
	"testing"
)

func TestAdmit(t *testing.T) {
	t.Parallel()
	muted := ThreadState{Muted: []string{"codex"}}
	paused := ThreadState{Paused: true}
	in := func(typ, from, replyTo string) EventInput {
		return EventInput{Type: typ, From: from, To: ToAll, Content: json.RawMessage(`"x"`), Meta: Meta{ReplyTo: replyTo}}
	}
	ctl := func(from string) EventInput {
		return EventInput{Type: TypeControl, From: from, To: ToAll, Content: json.RawMessage(`{"discussion":{"on":true}}`)}
	}
	withHop := in(TypeMessage, "codex", "")
	withHop.Meta.Hop = new(0)
	tests := []struct {
		name  string
		s     ThreadState
		in    EventInput
		reply ReplyTarget
		code  string
	}{
		{"plain message", ThreadState{}, in(TypeMessage, "codex", ""), ReplyTarget{}, ""},
		{"known reply_to", ThreadState{}, in(TypeMessage, "codex", "E1"), ReplyTarget{Found: true}, ""},
		{"unknown reply_to", ThreadState{}, in(TypeMessage, "codex", "E1"), ReplyTarget{}, ECodeUnknownReplyTo},
		{"unknown reply_to on a control", ThreadState{}, in(TypeControl, "user", "E1"), ReplyTarget{}, ECodeUnknownReplyTo},
		{"client hop", ThreadState{}, withHop, ReplyTarget{}, ECodeFieldNotAllowed},
		{"hard-muted message", muted, in(TypeMessage, "codex", ""), ReplyTarget{}, ECodeParticipantMuted},
		{"hard-muted control still goes", muted, ctl("codex"), ReplyTarget{}, ""},
		{"soft-muted message goes", ThreadState{SoftMuted: []string{"codex"}}, in(TypeMessage, "codex", ""), ReplyTarget{}, ""},
		{"paused agent message", paused, in(TypeMessage, "codex", ""), ReplyTarget{}, ECodeThreadPaused},
		{"paused human message", paused, in(TypeMessage, "user", ""), ReplyTarget{}, ""},
		{"paused control", paused, ctl("codex"), ReplyTarget{}, ""},
		{"scene of a stranger", ThreadState{}, EventInput{Type: TypeControl, From: "user", Content: json.RawMessage(`{"scene":{"on":true,"actors":["codex","claude"]}}`)}, ReplyTarget{}, ECodeInvalidControl},
		{"party of a stranger", ThreadState{}, EventInput{Type: TypeControl, From: "user", Content: json.RawMessage(`{"party":{"on":true,"agents":["codex"]}}`)}, ReplyTarget{}, ECodeInvalidControl},
		{"muted wins over paused", ThreadState{Paused: true, Muted: []string{"codex"}}, in(TypeMessage, "codex", ""), ReplyTarget{}, ECodeParticipantMuted},
	}
	for _, tt := range tests {
		err := Admit("t", tt.s, tt.in, controlOf(t, tt.in), tt.reply, DefaultHumans)
		if got := codeOf(err); got != tt.code {
			t.Errorf("%s: Admit = %v, want code %q", tt.name, err, tt.code)
		}
		if e, ok := err.(*Error); ok && len(e.Message) < 20 {
			t.Errorf("%s: message %q is not a sentence", tt.name, e.Message)
		}
	}
}

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	return ErrorCode(err)
}

func TestAssignHop(t *testing.T) {
	t.Parallel()
	msg := func(from, replyTo string) EventInput {
		return EventInput{Type: TypeMessage, From: from, Meta: Meta{ReplyTo: replyTo}}
	}
	tests := []struct {
		name     string
		last     int
		messages bool
		in       EventInput
		reply    ReplyTarget
		want     int
	}{
		{"human", 5, true, msg("user", ""), ReplyTarget{}, 0},
		{"human replying to an agent", 5, true, msg("user", "E"), ReplyTarget{Found: true, Hop: 4}, 0},
		{"agent after the previous message", 2, true, msg("codex", ""), ReplyTarget{}, 3},
		{"agent replying", 7, true, msg("codex", "E"), ReplyTarget{Found: true, Hop: 1}, 2},
		{"agent replying to hop 0", 7, true, msg("codex", "E"), ReplyTarget{Found: true}, 1},
		{"agent first in the thread", 0, false, msg("codex", ""), ReplyTarget{}, 0},
		{"agent first, replying to a control", 0, false, msg("codex", "E"), ReplyTarget{Found: true}, 1},
	}
	for _, tt := range tests {
		if got := AssignHop(ThreadState{LastHop: tt.last}, tt.in, tt.reply, DefaultHumans, tt.messages); got != tt.want {
			t.Errorf("%s: AssignHop = %d, want %d", tt.name, got, tt.want)
		}
	}
	if got := AssignHop(ThreadState{LastHop: 2}, msg("user", ""), ReplyTarget{}, Humans{"alice"}, true); got != 3 {
		t.Errorf("user is not a human under Humans{alice}: hop %d, want 3", got)
	}
}

func TestCheckJSONText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body, code, field string
	}{
		{`{"from":"user","content":"héllo \ud83d\ude00 \n \\u"}`, "", ""},
		{"{\"from\":\"user\",\"content\":\"caf\xe9\"}", ECodeInvalidField, "content"},
		{"{\"from\":\"us\xffer\",\"content\":\"x\"}", ECodeInvalidField, "from"},
		{"{\"meta\":{\"via\":\"\xc3\"}}", ECodeInvalidField, "meta.via"},
		{`{"meta":{"tags":["ok","\ud800"]}}`, ECodeInvalidField, "meta.tags"},
		{`{"content":"\udc00 low half alone"}`, ECodeInvalidField, "content"},
		{`{"content":"\ud83d\u0041 high half then a letter"}`, ECodeInvalidField, "content"},
		{"{\"k\xff\":1}", ECodeInvalidJSON, ""},
	}
	for _, tt := range tests {
		err := CheckJSONText([]byte(tt.body))
		if codeOf(err) != tt.code {
			t.Errorf("%q: %v, want code %q", tt.body, err, tt.code)
			continue
		}
		if e, ok := err.(*Error); ok && e.Field != tt.field {
			t.Errorf("%q: field %q, want %q", tt.body, e.Field, tt.field)
		}
	}
}

// controlOf is in's control as Admit gets it: parsed, nil for any other
// type or content that does not parse (which Validate refuses before).
func controlOf(t testing.TB, in EventInput) *Control {
	t.Helper()
	if in.Type != TypeControl {
		return nil
	}
	c, err := ParseControl(in.Content)
	if err != nil {
		return nil
	}
	return &c
}
