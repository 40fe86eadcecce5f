package agentbridge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecodeEventInput(t *testing.T) {
	long := strings.Repeat("a", 128)
	tests := []struct {
		name  string
		body  string
		code  string // "" = valid
		field string
		check func(t *testing.T, in EventInput)
	}{
		// Valid inputs and defaults.
		{name: "minimal message gets defaults", body: `{"from":"user","content":"hi"}`,
			check: func(t *testing.T, in EventInput) {
				if in.Type != TypeMessage || in.To != ToAll || in.From != "user" || string(in.Content) != `"hi"` {
					t.Errorf("got %+v", in)
				}
			}},
		{name: "explicit fields", body: `{"type":"message","from":"codex","to":"user","content":"done","meta":{"reply_to":"E1","tags":["a"],"via":"c","hop":2,"x":{"y":1}}}`,
			check: func(t *testing.T, in EventInput) {
				m := in.Meta
				if in.To != "user" || m.ReplyTo != "E1" || m.Via != "c" || m.Hop == nil || *m.Hop != 2 || !m.HasTag("a") || string(m.Extra["x"]) != `{"y":1}` {
					t.Errorf("got %+v", in)
				}
			}},
		{name: "null type and to mean the defaults", body: `{"type":null,"to":null,"from":"user","content":"hi"}`,
			check: func(t *testing.T, in EventInput) {
				if in.Type != TypeMessage || in.To != ToAll {
					t.Errorf("got %+v", in)
				}
			}},
		{name: "null meta", body: `{"from":"user","content":"hi","meta":null}`},
		{name: "meta keys may be null", body: `{"from":"user","content":"hi","meta":{"reply_to":null,"tags":null,"via":null,"hop":null}}`},
		{name: "longest participant id", body: `{"from":"` + long + `","to":"` + long + `","content":"hi"}`},
		{name: "id punctuation", body: `{"from":"a.b_c@d:e-f","to":"9x","content":"hi"}`},
		{name: "content surrounded by spaces is trimmed", body: `{"from":"user","content":  "hi"  }`,
			check: func(t *testing.T, in EventInput) {
				if string(in.Content) != `"hi"` {
					t.Errorf("content = %q", in.Content)
				}
			}},
		{name: "control object", body: `{"type":"control","from":"user","content":{"pause":{"on":true}}}`},
		{name: "control as a JSON string", body: `{"type":"control","from":"user","content":"{\"pause\":{\"on\":true}}"}`},
		{name: "control with a known and an unknown key", body: `{"type":"control","from":"user","content":{"pause":{"on":true},"future":1}}`},
		{name: "permission answer", body: `{"type":"control","from":"user","content":{"permission":{"event":"E1","option":"allow"}}}`},
		{name: "scene.closed with a reason", body: `{"type":"scene.closed","from":"coordinator","content":"hard-cap"}`},
		{name: "journal entry", body: `{"type":"journal","from":"maria","to":"maria","content":"I wonder."}`},
		{name: "thread.created", body: `{"type":"thread.created","from":"user","content":"plans"}`},
		{name: "thread.renamed", body: `{"type":"thread.renamed","from":"user","content":"new name"}`},
		{name: "custom type with any content", body: `{"type":"note.v1_x-y","from":"user","content":[1,2]}`},
		{name: "custom type without content", body: `{"type":"ping","from":"user"}`},

		// invalid_json.
		{name: "truncated JSON", body: `{"from":"user"`, code: ECodeInvalidJSON},
		{name: "not JSON", body: `hello`, code: ECodeInvalidJSON},
		{name: "empty body", body: ``, code: ECodeInvalidJSON},
		{name: "array body", body: `[]`, code: ECodeInvalidJSON},
		{name: "string body", body: `"x"`, code: ECodeInvalidJSON},
		{name: "null body", body: `null`, code: ECodeInvalidJSON},
		{name: "trailing garbage", body: `{"from":"user","content":"hi"} x`, code: ECodeInvalidJSON},

		// field_not_allowed: server-assigned fields.
		{name: "id", body: `{"id":"x","from":"user","content":"hi"}`, code: ECodeFieldNotAllowed, field: "id"},
		{name: "seq", body: `{"seq":1,"from":"user","content":"hi"}`, code: ECodeFieldNotAllowed, field: "seq"},
		{name: "gseq", body: `{"gseq":1,"from":"user","content":"hi"}`, code: ECodeFieldNotAllowed, field: "gseq"},
		{name: "ts", body: `{"ts":"2026-01-01T00:00:00.000000Z","from":"user","content":"hi"}`, code: ECodeFieldNotAllowed, field: "ts"},
		{name: "thread", body: `{"thread":"T","from":"user","content":"hi"}`, code: ECodeFieldNotAllowed, field: "thread"},
		{name: "server field wins over unknown field", body: `{"aaa":1,"ts":"x","from":"user","content":"hi"}`, code: ECodeFieldNotAllowed, field: "ts"},

		// unknown_field.
		{name: "unknown field", body: `{"from":"user","content":"hi","priority":1}`, code: ECodeUnknownField, field: "priority"},
		{name: "field names are case-sensitive", body: `{"From":"user","content":"hi"}`, code: ECodeUnknownField, field: "From"},

		// missing_field.
		{name: "from missing", body: `{"content":"hi"}`, code: ECodeMissingField, field: "from"},
		{name: "from empty", body: `{"from":"","content":"hi"}`, code: ECodeMissingField, field: "from"},
		{name: "from null", body: `{"from":null,"content":"hi"}`, code: ECodeMissingField, field: "from"},
		{name: "message content missing", body: `{"from":"user"}`, code: ECodeMissingField, field: "content"},
		{name: "message content null", body: `{"from":"user","content":null}`, code: ECodeMissingField, field: "content"},
		{name: "control content missing", body: `{"type":"control","from":"user"}`, code: ECodeMissingField, field: "content"},
		{name: "thread.created content missing", body: `{"type":"thread.created","from":"user"}`, code: ECodeMissingField, field: "content"},

		// invalid_field.
		{name: "from not a string", body: `{"from":1,"content":"hi"}`, code: ECodeInvalidField, field: "from"},
		{name: "from with a space", body: `{"from":"a b","content":"hi"}`, code: ECodeInvalidField, field: "from"},
		{name: "from starting with punctuation", body: `{"from":"-a","content":"hi"}`, code: ECodeInvalidField, field: "from"},
		{name: "from too long", body: `{"from":"a` + long + `","content":"hi"}`, code: ECodeInvalidField, field: "from"},
		{name: "to invalid", body: `{"from":"user","to":"a/b","content":"hi"}`, code: ECodeInvalidField, field: "to"},
		{name: "to not a string", body: `{"from":"user","to":["a"],"content":"hi"}`, code: ECodeInvalidField, field: "to"},
		{name: "type not a string", body: `{"type":1,"from":"user","content":"hi"}`, code: ECodeInvalidField, field: "type"},
		{name: "type upper-case", body: `{"type":"Note","from":"user","content":"hi"}`, code: ECodeInvalidField, field: "type"},
		{name: "type too long", body: `{"type":"a` + strings.Repeat("b", 64) + `","from":"user","content":"hi"}`, code: ECodeInvalidField, field: "type"},
		{name: "message content a number", body: `{"from":"user","content":1}`, code: ECodeInvalidField, field: "content"},
		{name: "message content an object", body: `{"from":"user","content":{"a":1}}`, code: ECodeInvalidField, field: "content"},
		{name: "message content empty", body: `{"from":"user","content":""}`, code: ECodeInvalidField, field: "content"},
		{name: "message content blank", body: `{"from":"user","content":" \n\t"}`, code: ECodeInvalidField, field: "content"},
		{name: "thread name not a string", body: `{"type":"thread.renamed","from":"user","content":5}`, code: ECodeInvalidField, field: "content"},
		{name: "thread name blank", body: `{"type":"thread.renamed","from":"user","content":"  "}`, code: ECodeInvalidField, field: "name"},
		{name: "thread name too long", body: `{"type":"thread.created","from":"user","content":"` + strings.Repeat("n", MaxThreadNameLen+1) + `"}`, code: ECodeInvalidField, field: "name"},
		{name: "meta not an object", body: `{"from":"user","content":"hi","meta":[]}`, code: ECodeInvalidField, field: "meta"},
		{name: "meta.reply_to not a string", body: `{"from":"user","content":"hi","meta":{"reply_to":1}}`, code: ECodeInvalidField, field: "meta.reply_to"},
		{name: "meta.reply_to empty", body: `{"from":"user","content":"hi","meta":{"reply_to":""}}`, code: ECodeInvalidField, field: "meta.reply_to"},
		{name: "meta.tags not an array", body: `{"from":"user","content":"hi","meta":{"tags":"a"}}`, code: ECodeInvalidField, field: "meta.tags"},
		{name: "meta.tags of numbers", body: `{"from":"user","content":"hi","meta":{"tags":[1]}}`, code: ECodeInvalidField, field: "meta.tags"},
		{name: "meta.via not a string", body: `{"from":"user","content":"hi","meta":{"via":true}}`, code: ECodeInvalidField, field: "meta.via"},
		{name: "meta.hop negative", body: `{"from":"user","content":"hi","meta":{"hop":-1}}`, code: ECodeInvalidField, field: "meta.hop"},
		{name: "meta.hop fraction", body: `{"from":"user","content":"hi","meta":{"hop":1.5}}`, code: ECodeInvalidField, field: "meta.hop"},
		{name: "meta.hop a string", body: `{"from":"user","content":"hi","meta":{"hop":"1"}}`, code: ECodeInvalidField, field: "meta.hop"},

		// invalid_control.
		{name: "control content an array", body: `{"type":"control","from":"user","content":[1]}`, code: ECodeInvalidControl, field: "content"},
		{name: "control content a number", body: `{"type":"control","from":"user","content":5}`, code: ECodeInvalidControl, field: "content"},
		{name: "control content a plain string", body: `{"type":"control","from":"user","content":"pause"}`, code: ECodeInvalidControl, field: "content"},
		{name: "control content null", body: `{"type":"control","from":"user","content":null}`, code: ECodeMissingField, field: "content"},
		{name: "invite without client", body: `{"type":"control","from":"user","content":{"invite":{"participant_id":"codex","profile":{"model":"m"}}}}`, code: ECodeInvalidControl, field: "content.invite"},
		{name: "control with only unknown keys", body: `{"type":"control","from":"user","content":{"explode":{}}}`, code: ECodeInvalidControl, field: "content"},
		{name: "control string with only unknown keys", body: `{"type":"control","from":"user","content":"{\"future\":1}"}`, code: ECodeInvalidControl, field: "content"},
		{name: "empty control", body: `{"type":"control","from":"user","content":{}}`, code: ECodeInvalidControl, field: "content"},
		{name: "scene.closed with an unknown reason", body: `{"type":"scene.closed","from":"coordinator","content":"bored"}`, code: ECodeInvalidField, field: "content"},
		{name: "scene.closed without content", body: `{"type":"scene.closed","from":"coordinator"}`, code: ECodeInvalidField, field: "content"},
		{name: "journal not text", body: `{"type":"journal","from":"maria","content":{"a":1}}`, code: ECodeInvalidField, field: "content"},
		{name: "pause without on", body: `{"type":"control","from":"user","content":"{\"pause\":{}}"}`, code: ECodeInvalidControl, field: "content.pause"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := decodeEventInput([]byte(tt.body))
			if tt.code == "" {
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if tt.check != nil {
					tt.check(t, in)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *Error %s", err, err, tt.code)
			}
			if e.Code != tt.code || e.Field != tt.field {
				t.Errorf("code, field = %q, %q; want %q, %q (%s)", e.Code, e.Field, tt.code, tt.field, e.Message)
			}
			if !isSentence(e.Message) {
				t.Errorf("message %q is not a sentence", e.Message)
			}
			if in.From != "" || in.Content != nil {
				t.Errorf("a failed decode returned a partial input: %+v", in)
			}
		})
	}
}

// isSentence is the bar for error messages: one line ending with a full
// stop (it may start with a field name such as meta.hop).
func isSentence(s string) bool {
	return len(s) > 10 && strings.HasSuffix(s, ".") && !strings.Contains(s, "\n")
}

// TestSeveralBadKeysOneError checks that content or meta with several
// malformed keys is refused for the first of them in key order, every
// time: map order once picked one at random (found by FuzzEventInput).
func TestSeveralBadKeysOneError(t *testing.T) {
	for _, c := range []struct{ body, field string }{
		{`{"type":"control","from":"user","content":{"uninvite":{"98":"1"},"unmute":{"22":true}}}`, "content.uninvite"},
		{`{"type":"control","from":"user","content":{"unmute":{},"pause":1,"mute":2,"invite":3}}`, "content.invite"},
		{`{"from":"user","content":"hi","meta":{"via":1,"tags":2,"reply_to":3,"hop":"x"}}`, "meta.hop"},
	} {
		for range 50 {
			_, err := decodeEventInput([]byte(c.body))
			var e *Error
			if !errors.As(err, &e) || e.Field != c.field {
				t.Fatalf("%s: got %v, want an error for %s", c.body, err, c.field)
			}
		}
	}
}

func TestValidateDefaults(t *testing.T) {
	in := EventInput{From: "user", Content: json.RawMessage(`"hi"`)}
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	if in.Type != TypeMessage || in.To != ToAll {
		t.Fatalf("defaults not applied: %+v", in)
	}
	// Validating twice is harmless.
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := EventInput{From: "user", To: "a b", Content: json.RawMessage(`"hi"`)}
	if err := bad.Validate(); ErrorCode(err) != ECodeInvalidField {
		t.Fatalf("Validate = %v, want invalid_field", err)
	}
}

func TestValidateThreadName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"plans", true},
		{"ünïcode ✓", true},
		{strings.Repeat("x", MaxThreadNameLen), true},
		{strings.Repeat("x", MaxThreadNameLen+1), false},
		{"", false},
		{" \t", false},
		{"bad \xff utf8", false},
	}
	for _, tt := range tests {
		err := ValidateThreadName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateThreadName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && (ErrorCode(err) != ECodeInvalidField || !isSentence(err.(*Error).Message)) {
			t.Errorf("ValidateThreadName(%q) = %v, want an invalid_field sentence", tt.name, err)
		}
	}
}

func TestMetaJSON(t *testing.T) {
	hop := 3
	m := Meta{ReplyTo: "E1", Tags: []string{"coordinator"}, Via: "c", Hop: &hop, Extra: map[string]json.RawMessage{"z": json.RawMessage(`true`), "a": json.RawMessage(`[1]`)}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"a":[1],"hop":3,"reply_to":"E1","tags":["coordinator"],"via":"c","z":true}`
	if string(b) != want {
		t.Fatalf("Marshal = %s, want %s", b, want)
	}
	var back Meta
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if string(b2) != want {
		t.Fatalf("round trip = %s, want %s", b2, want)
	}
	empty, err := json.Marshal(Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if string(empty) != `{}` {
		t.Fatalf("empty meta = %s, want {}", empty)
	}
	// Unmarshal resets what was there before.
	if err := json.Unmarshal([]byte(`null`), &back); err != nil || back.ReplyTo != "" || back.Hop != nil {
		t.Fatalf("Unmarshal(null) = %+v, %v", back, err)
	}
	if !m.HasTag("coordinator") || m.HasTag("error") {
		t.Fatal("HasTag")
	}
}

func TestEventText(t *testing.T) {
	tests := []struct {
		content string
		want    string
	}{
		{`"hello"`, "hello"},
		{`"line\nbreak"`, "line\nbreak"},
		{`{"pause":{"on":true}}`, `{"pause":{"on":true}}`},
		{``, ``},
	}
	for _, tt := range tests {
		if got := (Event{Content: json.RawMessage(tt.content)}).Text(); got != tt.want {
			t.Errorf("Text(%s) = %q, want %q", tt.content, got, tt.want)
		}
	}
}

func TestFormatTime(t *testing.T) {
	ts := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.FixedZone("X", 3600))
	if got := FormatTime(ts); got != "2026-11-21T09:00:00.123456Z" {
		t.Fatalf("FormatTime = %q", got)
	}
	if got := FormatTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); got != "2026-01-02T03:04:05.000000Z" {
		t.Fatalf("FormatTime keeps six digits: %q", got)
	}
}

func TestError(t *testing.T) {
	e := FieldErrorf(ECodeInvalidField, "from", "The sender %q is bad.", "x")
	if e.Error() != `invalid_field (from): The sender "x" is bad.` {
		t.Errorf("Error() = %q", e.Error())
	}
	if got := Errorf(ECodeNotFound, "No such route.").Error(); got != "not_found: No such route." {
		t.Errorf("Error() = %q", got)
	}
	wrapped := errors.Join(errors.New("context"), e)
	if ErrorCode(wrapped) != ECodeInvalidField {
		t.Errorf("ErrorCode(wrapped) = %q", ErrorCode(wrapped))
	}
	if ErrorCode(errors.New("boom")) != ECodeInternal {
		t.Errorf("ErrorCode(plain) is not internal")
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"code":"invalid_field","message":"The sender \"x\" is bad.","field":"from"}` {
		t.Errorf("JSON = %s", b)
	}
}

// TestParseTimeReadsFormatTime reads back what FormatTime writes, to the
// microsecond, and refuses a timestamp in another layout.
func TestParseTimeReadsFormatTime(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 2, 40, 1, 123456000, time.UTC)
	got, err := ParseTime(FormatTime(at))
	if err != nil || !got.Equal(at) {
		t.Fatalf("ParseTime(FormatTime(%v)) = %v, %v", at, got, err)
	}
	if _, err := ParseTime("2026-11-28 02:40:01"); err == nil {
		t.Fatal("ParseTime accepted a timestamp in another layout")
	}
}
