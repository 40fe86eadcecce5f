package agentbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// nested is a JSON document whose arrays nest n deep around value.
func nested(n int, value string) string {
	return strings.Repeat("[", n) + value + strings.Repeat("]", n)
}

func TestCheckJSONDepth(t *testing.T) {
	t.Parallel()
	meta := func(n int) string { return `{"from":"user","content":"hi","meta":{"x":` + nested(n, "1") + `}}` }
	for _, tc := range []struct {
		name string
		body string
		deep bool
	}{
		{"flat", `{"from":"user","content":"hi"}`, false},
		{"64 levels with the body's own", meta(MaxJSONDepth - 2), false},
		{"65 levels", meta(MaxJSONDepth - 1), true},
		{"9,997 levels in meta (the issue's)", meta(9997), true},
		{"brackets inside strings do not count", `{"content":"` + strings.Repeat("[{", 500) + `"}`, false},
		{"escaped quotes keep the string open", `{"content":"\"` + strings.Repeat("[", 100) + `\\"}`, false},
		{"objects count as arrays do", strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65), true},
		{"not JSON at all, a million brackets", strings.Repeat("[", 1<<20), true},
		{"an unterminated string", `{"a":"` + strings.Repeat("[", 100), false},
	} {
		err := CheckJSONDepth([]byte(tc.body))
		var e *Error
		switch {
		case !tc.deep && err != nil:
			t.Errorf("%s: %v, want it to pass", tc.name, err)
		case tc.deep && (!errors.As(err, &e) || e.Code != ECodeTooDeep || e.Message == ""):
			t.Errorf("%s: %v, want too_deep", tc.name, err)
		}
	}
}

// TestTooDeepRefusedOnAppend: an event's body nested past MaxJSONDepth is
// refused by the parse every append goes through, also when it is nested
// past encoding/json's own limit (which the decoder refuses first).
func TestTooDeepRefusedOnAppend(t *testing.T) {
	t.Parallel()
	for _, n := range []int{MaxJSONDepth, 9997, 20000} {
		body := `{"from":"user","content":"hi","meta":{"x":` + nested(n, "1") + `}}`
		_, err := ParseEventInput([]byte(body))
		var e *Error
		if !errors.As(err, &e) || e.Code != ECodeTooDeep {
			t.Errorf("meta nested %d deep: %v, want too_deep", n, err)
		}
	}
	if _, err := ParseEventInput([]byte(`{"from":"user","content":"hi","meta":{"x":` + nested(MaxJSONDepth-2, "1") + `}}`)); err != nil {
		t.Errorf("64 levels: %v, want accepted", err)
	}
}

// TestClipTooDeep: a value stored before the depth check, read back from a
// store, is served as a note, and the event then decodes inside a list,
// which it did not before.
func TestClipTooDeep(t *testing.T) {
	t.Parallel()
	hop := 1
	ev := Event{ID: "e", Type: TypeControl, From: "user", To: ToAll,
		Content: json.RawMessage(`{"x":` + nested(9990, "1") + `}`),
		Meta: Meta{Hop: &hop, ReplyTo: "r", Tags: []string{"t"}, Extra: map[string]json.RawMessage{
			"deep": json.RawMessage(nested(9997, "1")), "shallow": json.RawMessage(`{"a":[1]}`),
		}}}
	list := func(e Event) error {
		b, err := json.Marshal(map[string]any{"events": []Event{e}})
		if err != nil {
			return err
		}
		var out struct{ Events []Event }
		return json.Unmarshal(b, &out)
	}
	if err := list(ev); err == nil {
		t.Fatal("the deep event decodes inside a list before the clip; the test proves nothing")
	}
	if !ev.ClipTooDeep() {
		t.Fatal("ClipTooDeep changed nothing")
	}
	if err := list(ev); err != nil {
		t.Fatalf("after the clip: %v", err)
	}
	if !bytes.Equal(ev.Content, tooDeepNote) || !bytes.Equal(ev.Meta.Extra["deep"], tooDeepNote) {
		t.Errorf("content %s, meta.deep %s: want the note", ev.Content, ev.Meta.Extra["deep"])
	}
	if string(ev.Meta.Extra["shallow"]) != `{"a":[1]}` || ev.Meta.ReplyTo != "r" || *ev.Meta.Hop != 1 {
		t.Errorf("the rest of the event changed: %+v", ev.Meta)
	}
	plain := Event{ID: "p", Content: json.RawMessage(`"hi"`)}
	if plain.ClipTooDeep() {
		t.Error("an ordinary event was clipped")
	}
}

// FuzzJSONDepth holds the byte scan to encoding/json's own reading of
// the nesting of any valid document.
func FuzzJSONDepth(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"]"}]}`, `"\\\""`, nested(70, `"x"`), `[[],[[]],{"":{}}]`, `{"a":"\u005b"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return
		}
		want := depthOf(v)
		for _, limit := range []int{0, 1, 2, 3, 5} {
			if got := jsonDepthOver([]byte(s), limit); got != (want > limit) {
				t.Fatalf("%q: over %d = %v, but its depth is %d", s, limit, got, want)
			}
		}
	})
}

// depthOf is the nesting of a decoded JSON value.
func depthOf(v any) int {
	d := 0
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	case map[string]any:
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}
