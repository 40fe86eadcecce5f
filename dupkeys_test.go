package agentbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestCheckJSONBodyDuplicateKeys(t *testing.T) {
	t.Parallel()
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
		// Keys that differ only in case are one key to encoding/json.
		{`{"pause":{"on":true,"On":false}}`, "pause.On"},
		{`{"From":"evil","from":"user"}`, "from"},
		{`{"k":1,"\u212a":2}`, "\u212a"},
		{`{"s":1,"ſ":2}`, "ſ"},
		{`{"ß":1,"ss":1,"SS":2}`, "SS"},
		{`{"é":1,"É":1}`, "É"},
		{`{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0,"k9":0,"k10":0,"k11":0,"k12":0,"k13":0,"k14":0,"k15":0,"k16":0,"K3":0}`, "K3"},
		{`{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0,"k9":0,"k10":0,"k11":0,"k12":0,"k13":0,"k14":0,"k15":0,"ſ":0,"k17":0,"S":0}`, "S"},
		{`{"ß":1,"ẞ":1}`, "ẞ"},
		{`{"a":1,"A1":1,"Σ":1,"ς":1}`, "ς"},
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
	t.Parallel()
	for _, tc := range []struct{ body, field, message string }{
		{`{"from":"user","from":"evil","content":"hi"}`, "from", `The body has the key "from" twice; send each key once (JSON readers disagree about which one counts).`},
		{`{"type":"message","type":"control","from":"user","content":{"pause":{"on":true}}}`, "type", ""},
		{`{"type":"control","from":"user","content":{"pause":{"on":true,"on":false}}}`, "content.pause.on", `The body has the key "on" twice in content.pause; send each key once (JSON readers disagree about which one counts).`},
		{`{"type":"control","from":"user","content":"{\"pause\":{\"on\":true},\"pause\":{\"on\":false}}"}`, "content.pause", ""},
		{`{"type":"control","from":"user","content":{"pause":{"on":true,"On":false}}}`, "content.pause.On", `The body has the keys "on" and "On" in content.pause, which differ only in case and are one key to some JSON readers; send each key once.`},
		{`{"from":"user","From":"evil","content":"hi"}`, "From", `The body has the keys "from" and "From", which differ only in case and are one key to some JSON readers; send each key once.`},
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
// on encoding/json's tokens: on any valid JSON both find a key twice
// (equal under case folding), or neither does.
func FuzzCheckDuplicateKeys(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":[{"c":1,"c":2}]}}`, `{"a":"\u0061","\u0061":1}`, `[1,"x",null,true,{"a":[]}]`,
		`{"a\"b":1,"a\"b":2}`, `{"":1,"":2}`, `{"a":{},"b":{}}`, `"{\"a\":1,\"a\":1}"`, `{"x\\":1,"x\\":1}`,
		`{"on":1,"On":2}`, `{"k":1,"\u212a":2}`, `{"s":1,"ſ":2}`, `{"ß":1,"ss":2}`, `{"σ":1,"ς":2,"Σ":3}`,
		`{"\u00e9":1,"É":2}`, `{"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0,"k9":0,"k10":0,"k11":0,"k12":0,"k13":0,"k14":0,"k15":0,"k16":0,"K3":0}`,
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

// refHasDuplicateKey is the slow, obvious check: the keys of each open
// object, fed by encoding/json's tokens, each compared with every earlier
// one by strings.EqualFold (what encoding/json's field matching amounts to).
func refHasDuplicateKey(t *testing.T, doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	type frame struct {
		keys   []string
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
				stack = append(stack, &frame{object: v == '{', key: v == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.object && top.key {
				for _, k := range top.keys {
					if strings.EqualFold(k, v) {
						return true
					}
				}
				top.keys = append(top.keys, v)
				top.key = false
				continue
			}
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}

// TestCaseFoldedKeysAreOneToEncodingJSON is why keys that differ only in
// case are refused: encoding/json gives each of them to the same field, so
// the last one wins where a JavaScript reader sees two keys.
func TestCaseFoldedKeysAreOneToEncodingJSON(t *testing.T) {
	t.Parallel()
	var v struct {
		On bool `json:"on"`
		K  int  `json:"k"`
	}
	if err := json.Unmarshal([]byte(`{"on":true,"On":false,"k":1,"\u212a":2}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.On || v.K != 2 {
		t.Fatalf("encoding/json read %+v; the refusal's reason no longer holds", v)
	}
}

// ordinaryBody is an append of the kind clients send all day.
const ordinaryBody = `{"from":"claude","to":"user","type":"message","content":"The tests pass; shall I merge?","reply_to":"01J0000000000000000000000","meta":{"via":"coordinator","tags":["coordinator","reply"],"participant":"claude"}}`

// TestCheckJSONBodyAllocations: the check every request body passes costs
// no allocation for an ordinary body.
func TestCheckJSONBodyAllocations(t *testing.T) {
	body := []byte(ordinaryBody)
	if n := testing.AllocsPerRun(100, func() { _ = CheckJSONBody(body) }); n != 0 {
		t.Errorf("CheckJSONBody allocates %v times per ordinary body, want 0", n)
	}
}

func BenchmarkCheckJSONBody(b *testing.B) {
	body := []byte(ordinaryBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := CheckJSONBody(body); err != nil {
			b.Fatal(err)
		}
	}
}
