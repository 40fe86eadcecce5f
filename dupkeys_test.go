package agentbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

func TestCheckJSONBodyDuplicateKeys(t *testing.T) {
	for _, tc := range []struct {
		body  string
		field string // "" when the body passes
	}{
		{`{"from":"user","content":"hi"}`, ""},
		{`{"from":"user","from":"evil"}`, "from"},
		{`{"type":"message","type":"control"}`, "type"},
		{`{"content":{"pause":{"on":true,"on":false}}}`, "content.pause.on"},
		{`{"content":{"a":[{"x":1},{"y":1,"y":2}]}}`, "content.a[1].y"},
		{`{"a":"\u0062","\u0061":1}`, "a"},
		{`{"meta":{"tags":["a","a"]}}`, ""},
		{`{"a":{"b":1},"b":{"a":1}}`, ""},
		{`{"k":"{\"x\":1,\"x\":2}"}`, ""},
		{`[{"a":1},{"a":1}]`, ""},
		{`[{"a":1,"a":1}]`, "[0].a"},
		{`"x"`, ""},
		{` { "a" : 1 , "b" : [ ] , "a" : 2 } `, "a"},
		{`{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0,"k9":0,"k10":0,"k11":0,"k12":0,"k13":0,"k14":0,"k15":0,"k16":0,"k17":0}`, ""},
		{`{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0,"k9":0,"k10":0,"k11":0,"k12":0,"k13":0,"k14":0,"k15":0,"k16":0,"k3":0}`, "k3"},
		{`{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0,"k9":0,"k10":0,"k11":0,"k12":0,"k13":0,"k14":0,"k15":0,"k16":0,"k16":0}`, "k16"},
	} {
		err := CheckJSONBody([]byte(tc.body))
		var e *Error
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v, want it to pass", tc.body, err)
		case tc.field == "":
		case !errors.As(err, &e) || e.Code != ECodeDuplicateKey || e.Field != tc.field || e.Message == "":
			t.Errorf("%s: %v, want duplicate_key at %s", tc.body, err, tc.field)
		}
	}
}

// TestDuplicateKeysRefusedOnAppend: the two forgeries of the issue, and a
// control sent as a string (as the original UI does), are refused by the
// parsing every append goes through.
func TestDuplicateKeysRefusedOnAppend(t *testing.T) {
	for _, tc := range []struct{ body, field, message string }{
		{`{"from":"user","from":"evil","content":"hi"}`, "from", `The body has the key "from" twice; send each key once (JSON readers disagree about which one counts).`},
		{`{"type":"message","type":"control","from":"user","content":{"pause":{"on":true}}}`, "type", ""},
		{`{"type":"control","from":"user","content":{"pause":{"on":true,"on":false}}}`, "content.pause.on", `The body has the key "on" twice in content.pause; send each key once (JSON readers disagree about which one counts).`},
		{`{"type":"control","from":"user","content":"{\"pause\":{\"on\":true},\"pause\":{\"on\":false}}"}`, "content.pause", ""},
	} {
		_, err := decodeEventInput([]byte(tc.body))
		var e *Error
		if !errors.As(err, &e) || e.Code != ECodeDuplicateKey || e.Field != tc.field {
			t.Errorf("%s: %v, want duplicate_key at %s", tc.body, err, tc.field)
			continue
		}
		if tc.message != "" && e.Message != tc.message {
			t.Errorf("%s: message %q, want %q", tc.body, e.Message, tc.message)
		}
	}
}

// FuzzCheckDuplicateKeys holds the one-pass scanner to a reference built
// on encoding/json's tokens: on any valid JSON both find a key twice, or
// neither does.
func FuzzCheckDuplicateKeys(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"c":2}]}}`, `{"a":"\u0061","\u0061":1}`, `[1,"x",null,true,{"a":[]}]`,
		`{"a\"b":1,"a\"b":2}`, `{"":1,"":2}`, `{"a":{},"b":{}}`, `"{\"a\":1,\"a\":1}"`, `{"x\\":1,"x\\":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) {
			_ = CheckDuplicateKeys(doc, "")
			return
		}
		got := CheckDuplicateKeys(doc, "") != nil
		if want := refHasDuplicateKey(t, doc); got != want {
			t.Fatalf("%s: scanner says duplicate %v, reference %v", doc, got, want)
		}
	})
}

// refHasDuplicateKey is the slow, obvious check: a set of keys per open
// object, fed by encoding/json's tokens.
func refHasDuplicateKey(t *testing.T, doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, &frame{keys: map[string]bool{}, object: v == '{', key: v == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.object && top.key {
				if top.keys[v] {
					return true
				}
				top.keys[v] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}
